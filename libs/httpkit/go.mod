module github.com/svc-dev/svc/libs/httpkit

go 1.26.0
