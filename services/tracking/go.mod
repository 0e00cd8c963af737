module github.com/svc-dev/svc/services/tracking

go 1.26.0
