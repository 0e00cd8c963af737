// Package e2e holds the end-to-end tests of the svc command-line client
// against the real accounts and tracking services. It is its own module so
// the client's module (github.com/svc-dev/svc/cli) needs no replace
// directives: `go install github.com/svc-dev/svc/cli/cmd/svc@latest`
// refuses a module whose go.mod has any.
package e2e
