module github.com/svc-dev/svc/libs/auth

go 1.26.0
