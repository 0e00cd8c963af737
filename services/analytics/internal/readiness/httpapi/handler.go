// Package httpapi is the readiness route's transport: GET
// /api/v1/programs/me/readiness with a program API key (the program is
// the key's), limited per key, every error in the typed envelope the spec
// gives it (invalid_key 401 with the trailing-period messages; 500
// internal_error with retry_after_seconds 10).
package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/analytics/internal/readiness/endpoints"
)

// Path of the route.
const Path = "/api/v1/programs/me/readiness"

// MsgInternal is the spec's readiness 500.
const MsgInternal = "Failed to compute readiness. Retry shortly."

// RetryAfterSeconds is the 500's retry_after_seconds.
const RetryAfterSeconds = 10

// Config carries what the transport needs besides the endpoints.
type Config struct {
	Keys   *apikey.Authenticator
	Logger *slog.Logger
	// Limit is the per-key rate limit (30/min), run after the key check.
	Limit func(http.Handler) http.Handler
	// FailedAuth wraps the key check, as on sale and refund: a client IP
	// whose 401s used up its allowance is refused before any key lookup,
	// and every answer carries X-RateLimit-* (the failed-auth bucket's
	// until the key authenticates, then Limit's).
	FailedAuth func(http.Handler) http.Handler
}

// Routes lists the readiness route.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	fail := func(ctx context.Context, err error, w http.ResponseWriter) {
		if cfg.Logger != nil {
			cfg.Logger.ErrorContext(ctx, "readiness failed", "request_id", httpkit.RequestIDFrom(ctx), "err", err)
		}
		_ = httpkit.WriteTypedError(w, http.StatusInternalServerError, "internal_error", MsgInternal, map[string]any{"retry_after_seconds": RetryAfterSeconds})
	}
	srv := kithttp.NewServer(set.Readiness, decode, encode, httpkit.ServerOptions(fail, cfg.Logger)...)
	auth := cfg.Keys.Middleware(apikey.ReadinessMessages(), func(w http.ResponseWriter, r *http.Request, err error) { fail(r.Context(), err, w) })
	h := http.Handler(srv)
	if cfg.Limit != nil {
		h = cfg.Limit(h)
	}
	h = auth(h)
	if cfg.FailedAuth != nil {
		h = cfg.FailedAuth(h)
	}
	return []httpkit.Route{{Pattern: "GET " + Path, Name: "readiness", Handler: h, Refuse: httpkit.TypedRefusal,
		// The limiter refuses a URL that is not UTF-8 after its headers.
		LimitChecksURL: cfg.Limit != nil}}
}

func decode(ctx context.Context, _ *http.Request) (any, error) {
	k, _ := apikey.KeyFrom(ctx)
	return endpoints.Request{ProgramID: k.ProgramID, TestKey: k.Test}, nil
}

func encode(_ context.Context, w http.ResponseWriter, resp any) error {
	return httpkit.WriteJSON(w, http.StatusOK, resp)
}
