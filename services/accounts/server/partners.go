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
	"github.com/svc-dev/svc/services/accounts/internal/partners"
	partnerendpoints "github.com/svc-dev/svc/services/accounts/internal/partners/endpoints"
	partnerhttpapi "github.com/svc-dev/svc/services/accounts/internal/partners/httpapi"
)

// appendPartners adds the console's partner and link changes to routes,
// behind the dashboard session checker and a limiter of their own at the
// settings routes' rate (SETTINGS_RATE_LIMIT a minute per session token).
func appendPartners(routes []platform.Route, p *platform.Platform, cfg Config, cat catalog.Service, sessions *session.Checker,
	trace obs.EndpointMiddleware, failedAuth func(http.Handler) http.Handler, refusals *ratelimit.RefusalCounter) ([]platform.Route, error) {
	authz, err := identity.NewAuthorizer(idstore.New(p.Pool))
	if err != nil {
		return nil, err
	}
	svc, err := partners.NewService(partners.Config{Access: authz, Catalog: cat, Store: catalogpg.New(p.Pool, p.Now)})
	if err != nil {
		return nil, err
	}
	limiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.SettingsRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("SETTINGS_RATE_LIMIT: %w", err)
	}
	limit := ratelimit.Middleware(limiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("program_partners"), ratelimit.WithOnRefuse(refusals.Inc))
	return append(routes, partnerhttpapi.Routes(partnerendpoints.New(svc, trace), partnerhttpapi.Config{
		Sessions: sessions, Logger: p.Logger, Limit: limit, FailedAuth: failedAuth,
	})...), nil
}
