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
	"github.com/svc-dev/svc/services/accounts/internal/programs"
	programsendpoints "github.com/svc-dev/svc/services/accounts/internal/programs/endpoints"
	programshttpapi "github.com/svc-dev/svc/services/accounts/internal/programs/httpapi"
	programsstore "github.com/svc-dev/svc/services/accounts/internal/programs/pgstore"
)

// wirePrograms builds the console's POST and GET /api/v1/programs behind
// the dashboard session check and a limiter of their own at the settings
// routes' rate (SETTINGS_RATE_LIMIT a minute per session token).
func wirePrograms(p *platform.Platform, cfg Config, cat catalog.Service, sessions *session.Checker, trace obs.EndpointMiddleware,
	failedAuth func(http.Handler) http.Handler, refusals *ratelimit.RefusalCounter) ([]platform.Route, error) {
	svc, err := programs.NewService(programsstore.New(p.Pool), catalogpg.New(p.Pool, p.Now), cat)
	if err != nil {
		return nil, err
	}
	limiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.SettingsRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("SETTINGS_RATE_LIMIT: %w", err)
	}
	limit := ratelimit.Middleware(limiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("programs"), ratelimit.WithOnRefuse(refusals.Inc))
	return programshttpapi.Routes(programsendpoints.New(svc, trace), programshttpapi.Config{
		Sessions: sessions, Logger: p.Logger, Limit: limit, FailedAuth: failedAuth,
	}), nil
}
