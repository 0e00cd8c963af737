module github.com/svc-dev/svc/proto

go 1.26.0
