package server

import (
	"fmt"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/ratelimit"
	"github.com/svc-dev/svc/services/webhooks/internal/delivery"
	"github.com/svc-dev/svc/services/webhooks/internal/endpoint"
	"github.com/svc-dev/svc/services/webhooks/internal/endpoint/endpoints"
	"github.com/svc-dev/svc/services/webhooks/internal/endpoint/httpapi"
	"github.com/svc-dev/svc/services/webhooks/internal/endpoint/pgstore"
	"github.com/svc-dev/svc/services/webhooks/internal/secret"
)

// failedAuthPerMinute is the 401s one client IP may get from the endpoint
// routes in a minute before it is refused 429 without a token check
// (commissions' FAILED_AUTH_RATE_LIMIT default; webhooks has no variable
// for it yet).
const failedAuthPerMinute = 30

// wireAPI builds the console's endpoint routes: the dashboard session
// checked as the commissions console checks it (accounts' public key, then
// the replica's revocations and suspensions), the settings routes' limit
// per sign-in token, failed authentications limited per client IP. Without WEBHOOKS_SECRET_KEY the routes still answer,
// but create and rotate refuse 503. The routes are appended to routes.
func wireAPI(p *platform.Platform, cfg Config, routes *[]platform.Route) error {
	store := pgstore.New(p.Pool)
	sessions, err := session.NewDashboardChecker(cfg.SessionPublicKey, SessionIssuer, p.Now, store)
	if err != nil {
		return err
	}
	if sessions == nil {
		p.Logger.Warn("no SESSION_PUBLIC_KEY: every caller of the webhook endpoint routes is signed out")
	}
	var box *secret.Box
	if cfg.SecretKey != "" {
		key, err := secret.ParseKey(cfg.SecretKey)
		if err != nil {
			return fmt.Errorf("WEBHOOKS_SECRET_KEY: %w", err)
		}
		if box, err = secret.NewBox(key); err != nil {
			return err
		}
	} else {
		p.Logger.Warn("no WEBHOOKS_SECRET_KEY: webhook endpoints cannot be created nor their secrets rotated (503)")
	}
	svc, err := endpoint.New(endpoint.Config{Store: store, Box: box, CheckURL: func(u string) error { return delivery.CheckURL(u, cfg.AllowPrivate) }, Now: p.Now})
	if err != nil {
		return err
	}
	limiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.SettingsRateLimit, Now: p.Now})
	if err != nil {
		return fmt.Errorf("SETTINGS_RATE_LIMIT: %w", err)
	}
	refusals, err := ratelimit.NewRefusalCounter(p.Registry)
	if err != nil {
		return err
	}
	failedLimiter, err := ratelimit.New(ratelimit.Config{Limit: failedAuthPerMinute, Now: p.Now})
	if err != nil {
		return err
	}
	tracing := obs.Tracing(p.Tracer.Tracer("svc/" + p.Name))
	*routes = append(*routes, httpapi.Routes(endpoints.New(svc, tracing), httpapi.Config{
		Sessions: sessions,
		Logger:   p.Logger,
		Limit:    ratelimit.Middleware(limiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("webhooks_console"), ratelimit.WithOnRefuse(refusals.Inc)),
		FailedAuth: ratelimit.FailedAuth(failedLimiter, ratelimit.ByIP(p.IPs), ratelimit.WithRoute("webhooks_failed_auth"),
			ratelimit.WithOnRefuse(refusals.Inc)),
	})...)
	return nil
}
