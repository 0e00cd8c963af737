module github.com/svc-dev/svc/libs/catalogsync

go 1.26.0
