module github.com/svc-dev/svc/libs/errkind

go 1.26.0
