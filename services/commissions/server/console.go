package server

import (
	"fmt"
	"net/http"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/ratelimit"
	"github.com/svc-dev/svc/services/commissions/internal/console"
	consoleendpoints "github.com/svc-dev/svc/services/commissions/internal/console/endpoints"
	consolehttp "github.com/svc-dev/svc/services/commissions/internal/console/httpapi"
	consolestore "github.com/svc-dev/svc/services/commissions/internal/console/pgstore"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
)

// wireConsole builds the console's commissions and payouts routes: the
// dashboard session checked as analytics checks it (accounts' public key,
// then the replica's revocations and suspensions), the settings routes'
// limit per sign-in token, the failed-authentication allowance shared with
// the other routes.
func wireConsole(p *platform.Platform, cfg Config, l *ledger.Service, tracing obs.EndpointMiddleware,
	failedAuth func(http.Handler) http.Handler, refusals *ratelimit.RefusalCounter) ([]platform.Route, error) {
	store := consolestore.New(p.Pool)
	sessions, err := session.NewDashboardChecker(cfg.SessionPublicKey, SessionIssuer, p.Now, store)
	if err != nil {
		return nil, err
	}
	if sessions == nil {
		p.Logger.Warn("no SESSION_PUBLIC_KEY: every caller of the console's commissions and payouts routes is signed out")
	}
	svc, err := console.New(store, l)
	if err != nil {
		return nil, err
	}
	limiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.SettingsRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("SETTINGS_RATE_LIMIT: %w", err)
	}
	return consolehttp.Routes(consoleendpoints.New(svc, tracing), consolehttp.Config{
		Sessions:   sessions,
		Logger:     p.Logger,
		Limit:      ratelimit.Middleware(limiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("console"), ratelimit.WithOnRefuse(refusals.Inc)),
		FailedAuth: failedAuth,
	}), nil
}
