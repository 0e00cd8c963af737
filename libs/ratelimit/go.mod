module github.com/svc-dev/svc/libs/ratelimit

go 1.26.0
