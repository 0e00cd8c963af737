// Package httpapi is the HTTP transport of the console's program API key
// routes, GET and POST /api/v1/programs/{id}/keys, POST
// /api/v1/programs/{id}/keys/{keyId}/rotation and DELETE
// /api/v1/programs/{id}/keys/{keyId}, for a signed-in dashboard session
// (the Ed25519 session token accounts issues), over the endpoints of
// apikeys/endpoints. A program API key is never accepted here: it is
// refused like any other invalid session token.
package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/apikeys/endpoints"
	settingshttpapi "github.com/svc-dev/svc/services/accounts/internal/settings/httpapi"
)

// Config carries what the transport needs.
type Config struct {
	// Sessions checks dashboard session tokens, revocations included.
	Sessions *session.Checker
	Logger   *slog.Logger
	// Limit is every key route's limit, the settings routes' (30 a minute
	// per sign-in token), once the token has verified and before the
	// endpoint.
	Limit func(http.Handler) http.Handler
	// FailedAuth wraps the session check: a client IP whose 401s used up
	// its allowance is refused 429 before the token is verified.
	FailedAuth func(http.Handler) http.Handler
}

// Routes lists the key routes.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	// The settings routes' session check: every dashboard route answers a
	// bad session (or a program API key) alike.
	build := settingshttpapi.SessionRoutes{Sessions: cfg.Sessions, Logger: cfg.Logger, Limit: cfg.Limit, FailedAuth: cfg.FailedAuth}.Handler
	limited := cfg.Limit != nil
	return []httpkit.Route{
		{Pattern: "GET /api/v1/programs/{id}/keys", Name: "program_keys_list",
			Handler: build("Failed to load API keys", set.List, decodeList), LimitChecksURL: limited},
		{Pattern: "POST /api/v1/programs/{id}/keys", Name: "program_keys_create",
			Handler: build("Failed to create API key", set.Create, decodeCreate), LimitChecksURL: limited},
		{Pattern: "POST /api/v1/programs/{id}/keys/{keyId}/rotation", Name: "program_keys_rotation",
			Handler: build("Failed to mark API key for rotation", set.MarkRotation, decodeRotation), LimitChecksURL: limited},
		{Pattern: "DELETE /api/v1/programs/{id}/keys/{keyId}", Name: "program_keys_revoke",
			Handler: build("Failed to revoke API key", set.Revoke, decodeRevoke), LimitChecksURL: limited},
	}
}
