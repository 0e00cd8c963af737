module github.com/svc-dev/svc/services/accounts

go 1.26.0
