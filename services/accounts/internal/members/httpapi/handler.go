// Package httpapi is the HTTP transport of the console's team routes, GET
// and POST /api/v1/programs/{id}/members and DELETE
// /api/v1/programs/{id}/members/{userId}, for a signed-in dashboard
// session, over the endpoints of members/endpoints. A program API key is
// never accepted here: it is refused like any other invalid session token.
package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/members/endpoints"
	settingshttpapi "github.com/svc-dev/svc/services/accounts/internal/settings/httpapi"
)

// Config carries what the transport needs.
type Config struct {
	// Sessions checks dashboard session tokens, revocations included.
	Sessions *session.Checker
	Logger   *slog.Logger
	// Limit is every team route's limit (the settings routes' rate per
	// sign-in token), once the token has verified and before the endpoint.
	Limit func(http.Handler) http.Handler
	// FailedAuth wraps the session check: a client IP whose 401s used up
	// its allowance is refused 429 before the token is verified.
	FailedAuth func(http.Handler) http.Handler
}

// Routes lists the team routes.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	build := settingshttpapi.SessionRoutes{Sessions: cfg.Sessions, Logger: cfg.Logger, Limit: cfg.Limit, FailedAuth: cfg.FailedAuth}.Handler
	limited := cfg.Limit != nil
	return []httpkit.Route{
		{Pattern: "GET /api/v1/programs/{id}/members", Name: "program_members_list",
			Handler: build("Failed to load members", set.List, decodeList), LimitChecksURL: limited},
		{Pattern: "POST /api/v1/programs/{id}/members", Name: "program_members_add",
			Handler: build("Failed to add member", set.Add, decodeAdd), LimitChecksURL: limited},
		{Pattern: "DELETE /api/v1/programs/{id}/members/{userId}", Name: "program_members_remove",
			Handler: build("Failed to remove member", set.Remove, decodeRemove), LimitChecksURL: limited},
	}
}
