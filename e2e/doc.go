// Package e2e is the black-box suite: it starts the stack exactly as
// `make run` does (the devstack binary, its embedded broker, its seed) on a
// fresh database and talks only HTTP to the gateway, from many client
// addresses behind a trusted X-Forwarded-For hop, validating every answer
// against api/openapi.yaml.
package e2e
