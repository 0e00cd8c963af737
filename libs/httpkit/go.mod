module github.com/svc-dev/svc/libs/httpkit

go 1.26.0

require (
	github.com/go-kit/kit v0.13.0
	github.com/svc-dev/svc/libs/errkind v0.0.0
)

require (
	github.com/go-kit/log v0.2.0 // indirect
	github.com/go-logfmt/logfmt v0.5.1 // indirect
)

replace github.com/svc-dev/svc/libs/errkind => ../errkind
