// Package obs holds the observability plumbing every svc service shares:
// a JSON slog logger that stamps request and trace ids and masks secrets,
// Prometheus metrics for HTTP, OpenTelemetry tracing setup, liveness and
// readiness handlers, typed environment parsing, and a go-kit endpoint
// tracing middleware.
//
// Nothing here keeps package-level state: every constructor takes the
// registry, provider or writer it should use, so tests and services wire
// their own.
package obs
