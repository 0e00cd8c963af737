module github.com/svc-dev/svc/libs/auth

go 1.26.0

require github.com/golang-jwt/jwt/v5 v5.3.1
