package server

import (
	"fmt"
	"net/http"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/ratelimit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	catalogpg "github.com/svc-dev/svc/services/accounts/internal/catalog/pgstore"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
	idstore "github.com/svc-dev/svc/services/accounts/internal/identity/pgstore"
	"github.com/svc-dev/svc/services/accounts/internal/members"
	membersendpoints "github.com/svc-dev/svc/services/accounts/internal/members/endpoints"
	membershttpapi "github.com/svc-dev/svc/services/accounts/internal/members/httpapi"
	membersstore "github.com/svc-dev/svc/services/accounts/internal/members/pgstore"
)

// appendMembers adds the console's team routes to routes, behind the
// dashboard session check and a limiter of their own at the settings
// routes' rate (SETTINGS_RATE_LIMIT a minute per session token).
func appendMembers(routes []platform.Route, p *platform.Platform, cfg Config, cat catalog.Service, sessions *session.Checker, trace obs.EndpointMiddleware,
	failedAuth func(http.Handler) http.Handler, refusals *ratelimit.RefusalCounter) ([]platform.Route, error) {
	authz, err := identity.NewAuthorizer(idstore.New(p.Pool))
	if err != nil {
		return nil, err
	}
	// A removal waits for the replicas as long as a sign-out does.
	svc, err := members.NewService(members.Config{Access: authz, Store: membersstore.New(p.Pool), Catalog: cat,
		Team: catalogpg.New(p.Pool, p.Now), PropagationTimeout: cfg.SignOutSyncTimeout})
	if err != nil {
		return nil, err
	}
	limiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.SettingsRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("SETTINGS_RATE_LIMIT: %w", err)
	}
	limit := ratelimit.Middleware(limiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("program_members"), ratelimit.WithOnRefuse(refusals.Inc))
	return append(routes, membershttpapi.Routes(membersendpoints.New(svc, trace), membershttpapi.Config{
		Sessions: sessions, Logger: p.Logger, Limit: limit, FailedAuth: failedAuth,
	})...), nil
}
