// Package httpapi is the HTTP transport of the console's programs, POST and
// GET /api/v1/programs, for a signed-in dashboard session (the settings
// routes' check: settings/httpapi.RequireSession), over programs/endpoints.
package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/programs/endpoints"
	settingshttpapi "github.com/svc-dev/svc/services/accounts/internal/settings/httpapi"
)

// Path of both routes.
const Path = "/api/v1/programs"

// Config carries what the transport needs.
type Config struct {
	// Sessions checks dashboard session tokens, revocations included.
	Sessions *session.Checker
	Logger   *slog.Logger
	// Limit is both routes' limit per session token (the settings routes'
	// SETTINGS_RATE_LIMIT a minute), once the token verified; FailedAuth
	// wraps the session check (the failed-authentication allowance per
	// client IP).
	Limit, FailedAuth func(http.Handler) http.Handler
}

// Routes lists both routes.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	routes := settingshttpapi.SessionRoutes{Sessions: cfg.Sessions, Logger: cfg.Logger, Limit: cfg.Limit, FailedAuth: cfg.FailedAuth}
	build := func(fail string, e endpoint.Endpoint, dec kithttp.DecodeRequestFunc) http.Handler {
		return routes.Handler(fail, e, httpkit.RefuseNULQuery(dec), noStore)
	}
	return []httpkit.Route{
		{Pattern: "POST " + Path, Name: "programs_create",
			Handler: build("Failed to create program", set.Create, decodeCreate), LimitChecksURL: cfg.Limit != nil},
		{Pattern: "GET " + Path, Name: "programs_list",
			Handler: build("Failed to load your programs", set.List, decodeList), LimitChecksURL: cfg.Limit != nil},
	}
}

// noStore keeps a person's programs out of shared caches.
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}
