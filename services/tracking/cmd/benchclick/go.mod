module github.com/svc-dev/svc/services/tracking/cmd/benchclick

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/svc-dev/svc/libs/pg v0.0.0
	github.com/svc-dev/svc/libs/platform v0.0.0
	github.com/svc-dev/svc/services/accounts v0.0.0
	github.com/svc-dev/svc/services/tracking v0.0.0
	github.com/twmb/franz-go v1.22.2
)

replace (
	github.com/svc-dev/svc/libs/auth => ../../../../libs/auth
	github.com/svc-dev/svc/libs/catalogsync => ../../../../libs/catalogsync
	github.com/svc-dev/svc/libs/httpkit => ../../../../libs/httpkit
	github.com/svc-dev/svc/libs/kafkakit => ../../../../libs/kafkakit
	github.com/svc-dev/svc/libs/obs => ../../../../libs/obs
	github.com/svc-dev/svc/libs/outbox => ../../../../libs/outbox
	github.com/svc-dev/svc/libs/pg => ../../../../libs/pg
	github.com/svc-dev/svc/libs/platform => ../../../../libs/platform
	github.com/svc-dev/svc/libs/ratelimit => ../../../../libs/ratelimit
	github.com/svc-dev/svc/proto => ../../../../proto
	github.com/svc-dev/svc/services/accounts => ../../../accounts
	github.com/svc-dev/svc/services/tracking => ../..
)
