module github.com/svc-dev/svc/libs/catalogsync

go 1.26.0

require (
	github.com/svc-dev/svc/libs/outbox v0.0.0
	github.com/svc-dev/svc/libs/pg v0.0.0
	github.com/svc-dev/svc/proto v0.0.0
)

replace (
	github.com/svc-dev/svc/libs/kafkakit => ../kafkakit
	github.com/svc-dev/svc/libs/outbox => ../outbox
	github.com/svc-dev/svc/libs/pg => ../pg
	github.com/svc-dev/svc/proto => ../../proto
)
