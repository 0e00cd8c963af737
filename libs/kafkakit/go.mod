module github.com/svc-dev/svc/libs/kafkakit

go 1.26.0
