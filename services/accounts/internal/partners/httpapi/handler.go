// Package httpapi is the HTTP transport of the console's partners list
// (GET /api/v1/programs/{id}/partners) and its partner and link
// changes, POST /api/v1/programs/{id}/partners (invite), POST
// /api/v1/programs/{id}/partners/{partnerId}/approve and /reject, POST
// /api/v1/programs/{id}/partners/{partnerId}/links and PATCH
// /api/v1/programs/{id}/links/{linkId}, for a signed-in dashboard session,
// over the endpoints of partners/endpoints. A program API key is never
// accepted here: it is refused like any other invalid session token.
package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/partners/endpoints"
	settingshttpapi "github.com/svc-dev/svc/services/accounts/internal/settings/httpapi"
)

// Config carries what the transport needs.
type Config struct {
	// Sessions checks dashboard session tokens, revocations included.
	Sessions *session.Checker
	Logger   *slog.Logger
	// Limit is every partner route's limit (the settings routes': 30 a
	// minute per sign-in token), once the token has verified.
	Limit func(http.Handler) http.Handler
	// FailedAuth wraps the session check: a client IP whose 401s used up
	// its allowance is refused 429 before the token is verified.
	FailedAuth func(http.Handler) http.Handler
}

// Routes lists the partner and link routes.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	// The settings routes' session check: every dashboard route answers a
	// bad session (or a program API key) alike.
	build := settingshttpapi.SessionRoutes{Sessions: cfg.Sessions, Logger: cfg.Logger, Limit: cfg.Limit, FailedAuth: cfg.FailedAuth}.Handler
	limited := cfg.Limit != nil
	return []httpkit.Route{
		{Pattern: "GET /api/v1/programs/{id}/partners", Name: "program_partners_list",
			Handler: build("Failed to load partners", set.List, decodeList), LimitChecksURL: limited},
		{Pattern: "POST /api/v1/programs/{id}/partners", Name: "program_partners_invite",
			Handler: build("Failed to invite partner", set.Invite, decodeInvite), LimitChecksURL: limited},
		{Pattern: "POST /api/v1/programs/{id}/partners/{partnerId}/approve", Name: "program_partners_approve",
			Handler: build("Failed to approve partner", set.Approve, decodeApproval), LimitChecksURL: limited},
		{Pattern: "POST /api/v1/programs/{id}/partners/{partnerId}/reject", Name: "program_partners_reject",
			Handler: build("Failed to reject partner", set.Reject, decodeApproval), LimitChecksURL: limited},
		{Pattern: "POST /api/v1/programs/{id}/partners/{partnerId}/links", Name: "program_partner_links_create",
			Handler: build("Failed to create link", set.CreateLink, decodeCreateLink), LimitChecksURL: limited},
		{Pattern: "PATCH /api/v1/programs/{id}/links/{linkId}", Name: "program_links_update",
			Handler: build("Failed to update link", set.UpdateLink, decodeUpdateLink), LimitChecksURL: limited},
	}
}
