package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/httperr"
)

// SessionRoutes builds the handlers of routes behind the dashboard session
// (settings, and the console's programs, keys, ...) one way: the failed
// authentication allowance per client IP, the session check, the route's
// limit (per sign-in token, so an invalid token gets no bucket), then the
// endpoint with the route's 500 message. Nil Limit or FailedAuth: none.
type SessionRoutes struct {
	Sessions          *session.Checker
	Logger            *slog.Logger
	Limit, FailedAuth func(http.Handler) http.Handler
}

// Handler is one route's handler; inner wraps the endpoint's server inside
// the limit (a route's own headers, such as Cache-Control).
func (c SessionRoutes) Handler(fail string, e endpoint.Endpoint, dec kithttp.DecodeRequestFunc, inner ...func(http.Handler) http.Handler) http.Handler {
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	enc := httperr.Route{Fail: fail}
	var h http.Handler = kithttp.NewServer(e, dec, httpkit.NewResponseEncoder(enc.Refusal), httpkit.ServerOptions(enc.Failure, logger)...)
	for _, w := range inner {
		h = w(h)
	}
	if c.Limit != nil {
		h = c.Limit(h)
	}
	check := httperr.Route{Fail: fail, Logger: logger, FailureLog: "dashboard session check failed"}
	h = session.Require(c.Sessions, check.Failure, h)
	if c.FailedAuth != nil {
		h = c.FailedAuth(h)
	}
	return h
}

// RequireSession is the settings routes' session check for the console's
// other routes (programs, keys, ...): the same messages, the same refusal
// of CLI login tokens and program API keys, so every dashboard route
// answers a bad session alike. SessionUser reads the user it admitted.
func RequireSession(c *session.Checker, enc httperr.Route, next http.Handler) http.Handler {
	return session.Require(c, enc.Failure, next)
}

// SessionUser is the user id RequireSession admitted (0 when none).
func SessionUser(ctx context.Context) int64 {
	return session.UserID(ctx)
}
