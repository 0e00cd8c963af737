// Package httpapi is the HTTP transport of the program settings routes,
// GET and PATCH /api/v1/programs/{id}/settings, for a signed-in dashboard
// session (the Ed25519 session token accounts issues), over the endpoints
// of settings/endpoints.
package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/settings/endpoints"
)

// 401 messages. Rule 5 of the contract: an account-session 401 is fixed by
// signing in again.
const (
	MsgMissingSession = session.MsgMissing
	MsgInvalidSession = session.MsgInvalid
	MsgExpiredSession = session.MsgExpired
)

// Config carries what the transport needs.
type Config struct {
	// Sessions checks dashboard session tokens, revocations included.
	Sessions *session.Checker
	Logger   *slog.Logger
	// Limit is both routes' limit: the contract's 30 a minute per sign-in
	// token, once the token has verified (so an invalid one gets no bucket)
	// and before the endpoint.
	Limit func(http.Handler) http.Handler
	// FailedAuth wraps the session check: a client IP whose 401s used up
	// its allowance is refused 429 before the token is verified.
	FailedAuth func(http.Handler) http.Handler
}

// Routes lists both settings routes.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	build := SessionRoutes{Sessions: cfg.Sessions, Logger: cfg.Logger, Limit: cfg.Limit, FailedAuth: cfg.FailedAuth}.Handler
	return []httpkit.Route{
		{Pattern: "GET /api/v1/programs/{id}/settings", Name: "program_settings_get",
			Handler: build("Failed to load program settings", set.Get, decodeGet), LimitChecksURL: cfg.Limit != nil},
		{Pattern: "PATCH /api/v1/programs/{id}/settings", Name: "program_settings_update",
			Handler: build("Failed to update program settings", set.Update, decodeUpdate), LimitChecksURL: cfg.Limit != nil},
	}
}
