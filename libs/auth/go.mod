module github.com/svc-dev/svc/libs/auth

go 1.26.0

require (
	github.com/coreos/go-oidc/v3 v3.21.0
	github.com/go-jose/go-jose/v4 v4.1.8
	github.com/golang-jwt/jwt/v5 v5.3.1
)

require golang.org/x/oauth2 v0.36.0 // indirect
