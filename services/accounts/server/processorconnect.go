package server

import (
	"fmt"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/ratelimit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
	idstore "github.com/svc-dev/svc/services/accounts/internal/identity/pgstore"
	"github.com/svc-dev/svc/services/accounts/internal/processorconnect"
	pcendpoints "github.com/svc-dev/svc/services/accounts/internal/processorconnect/endpoints"
	pchttpapi "github.com/svc-dev/svc/services/accounts/internal/processorconnect/httpapi"
	pcstore "github.com/svc-dev/svc/services/accounts/internal/processorconnect/pgstore"
	"github.com/svc-dev/svc/services/accounts/internal/processorconnect/processorapi"
)

// ProcessorCallbackPath is where the processor sends the person back
// (PUBLIC_URL + this is the redirect URI registered with it).
const ProcessorCallbackPath = "/api/v1/processor/connect/callback"

// appendProcessorConnect adds the console's payment processor connection:
// connect and disconnect behind the dashboard session at the settings
// routes' rate, and the callback limited per client IP at the CLI's
// key-less rate. Without PROCESSOR_CONNECT_CLIENT_ID connect answers 503.
func appendProcessorConnect(routes []platform.Route, p *platform.Platform, cfg Config, cat catalog.Service, sessions *session.Checker,
	trace obs.EndpointMiddleware, limits cliLimits, refusals *ratelimit.RefusalCounter) ([]platform.Route, error) {
	authz, err := identity.NewAuthorizer(idstore.New(p.Pool))
	if err != nil {
		return nil, err
	}
	var proc processorconnect.Processor
	if cfg.ProcessorEnabled() {
		c, err := processorapi.New(processorapi.Config{ClientID: cfg.ProcessorClientID, Secret: cfg.ProcessorSecret,
			ConnectURL: cfg.ProcessorConnectURL, APIURL: cfg.ProcessorAPIURL, RedirectURL: cfg.PublicURL + ProcessorCallbackPath})
		if err != nil {
			return nil, err
		}
		proc = c
	}
	// A connection waits for the replicas as long as a sign-out does, so
	// the settings page the person lands on shows it.
	svc, err := processorconnect.NewService(processorconnect.Config{Access: authz, Store: pcstore.New(p.Pool, p.Now), Catalog: cat,
		Processor: proc, Now: p.Now, StateTTL: cfg.ProcessorStateTTL, SyncTimeout: cfg.SignOutSyncTimeout})
	if err != nil {
		return nil, err
	}
	limiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.SettingsRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("SETTINGS_RATE_LIMIT: %w", err)
	}
	limit := ratelimit.Middleware(limiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("program_processor"), ratelimit.WithOnRefuse(refusals.Inc))
	return append(routes, pchttpapi.Routes(pcendpoints.New(svc, trace), pchttpapi.Config{
		Sessions: sessions, Logger: p.Logger, Limit: limit, FailedAuth: limits.failedAuth, CallbackLimit: limits.byIP,
		SettingsURL: cfg.DashboardURL + "#settings",
	})...), nil
}
