module github.com/svc-dev/svc/libs/obs

go 1.26.0
