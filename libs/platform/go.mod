module github.com/svc-dev/svc/libs/platform

go 1.26.0
