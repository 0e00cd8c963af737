module github.com/svc-dev/svc/libs/pg

go 1.26.0
