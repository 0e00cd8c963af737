module github.com/svc-dev/svc/libs/outbox

go 1.26.0
