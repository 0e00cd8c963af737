package httpkit

import "net/http"

// Route is one HTTP route of a service: every feature's transport returns
// its routes as []Route from Routes(set, cfg), and the platform serves them.
// Name labels the route's metrics and spans.
type Route struct {
	Pattern string // net/http pattern, e.g. "POST /api/v1/track/click"
	Name    string
	Handler http.Handler
	// Refuse writes a refusal the platform makes before the route runs
	// (ValidURL) in the route's own envelope: the typed one of readiness,
	// the platform one with the sale route's error.code. Nil: the
	// platform envelope.
	Refuse Refusal
	// LimitChecksURL: the route's chain passes through a
	// ratelimit.Middleware before anything reads the URL, and that limiter
	// refuses a URL that is not UTF-8 after setting X-RateLimit-*, which
	// the spec puts on every answer of its limited routes. The platform
	// then defers the check to it (DeferURLCheck) instead of refusing first.
	LimitChecksURL bool
}

// Refusal writes a client error with its status and message.
type Refusal func(w http.ResponseWriter, status int, message string)

// TypedRefusal answers in the typed envelope with code invalid_request.
func TypedRefusal(w http.ResponseWriter, status int, message string) {
	_ = WriteTypedError(w, status, "invalid_request", message, nil)
}

// CodedRefusal answers in the platform envelope with error.code code.
func CodedRefusal(code string) Refusal {
	return func(w http.ResponseWriter, status int, message string) {
		_ = WritePlatformError(w, status, message, WithCode(code))
	}
}
