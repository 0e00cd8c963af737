module github.com/svc-dev/svc/libs/platform

go 1.26.0

require (
	github.com/svc-dev/svc/libs/catalogsync v0.0.0
	github.com/svc-dev/svc/libs/httpkit v0.0.0
	github.com/svc-dev/svc/libs/kafkakit v0.0.0
	github.com/svc-dev/svc/libs/obs v0.0.0
	github.com/svc-dev/svc/libs/outbox v0.0.0
	github.com/svc-dev/svc/libs/pg v0.0.0
)

replace (
	github.com/svc-dev/svc/libs/catalogsync => ../catalogsync
	github.com/svc-dev/svc/libs/httpkit => ../httpkit
	github.com/svc-dev/svc/libs/kafkakit => ../kafkakit
	github.com/svc-dev/svc/libs/obs => ../obs
	github.com/svc-dev/svc/libs/outbox => ../outbox
	github.com/svc-dev/svc/libs/pg => ../pg
	github.com/svc-dev/svc/proto => ../../proto
)
