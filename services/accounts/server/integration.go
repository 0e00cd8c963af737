package server

import (
	"fmt"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/integration"
	"github.com/svc-dev/svc/services/accounts/internal/integration/consumer"
	"github.com/svc-dev/svc/services/accounts/internal/integration/endpoints"
	"github.com/svc-dev/svc/services/accounts/internal/integration/httpapi"
	"github.com/svc-dev/svc/services/accounts/internal/integration/pgstore"
	"github.com/svc-dev/svc/services/accounts/internal/integration/trackingclient"
)

// wireIntegration builds GET /api/v1/cli/status and POST
// /api/v1/cli/test-event (program API key) and the consumer of tracking's
// events that keeps the test events the status reports.
// An unset TRACKING_URL leaves test events answering 500 (and saying why in
// the log); an unset COMMISSIONS_URL the same for test sales only (the sale
// route is the commissions service's).
func wireIntegration(p *platform.Platform, cfg Config, cat catalog.Service, trace obs.EndpointMiddleware,
	cli cliLimits) ([]platform.Route, error) {
	var tracker integration.Tracker = trackingclient.Unconfigured{}
	if cfg.TrackingURL == "" {
		p.Logger.Warn("TRACKING_URL is not set: POST /api/v1/cli/test-event cannot reach tracking and answers 500")
	} else {
		hc := &http.Client{
			Timeout: cfg.TrackingTimeout,
			Transport: otelhttp.NewTransport(http.DefaultTransport,
				otelhttp.WithTracerProvider(p.Tracer), otelhttp.WithPropagators(p.Propagator)),
		}
		if cfg.CommissionsURL == "" {
			p.Logger.Warn("COMMISSIONS_URL is not set: test sales of POST /api/v1/cli/test-event cannot reach commissions and answer 500")
		}
		c, err := trackingclient.New(cfg.TrackingURL, cfg.CommissionsURL, hc)
		if err != nil {
			return nil, fmt.Errorf("TRACKING_URL, COMMISSIONS_URL: %w", err)
		}
		tracker = c
	}
	store := pgstore.New(p.Pool)
	svc, err := integration.NewService(integration.Config{
		Store:       store,
		Catalog:     cat,
		Tracker:     tracker,
		Now:         p.Now,
		ChainLimit:  cfg.ChainLimitPerHour,
		SyncTimeout: cfg.TestEventSyncTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("integration service: %w", err)
	}
	if err := p.Consume(eventsv1.TopicTracking, consumer.Group, consumer.Handler(pgstore.RecordTestEvent), platform.SkipEvents(consumer.Skip)); err != nil {
		return nil, err
	}
	lookups, err := apikey.NewLookupCounter(p.Registry)
	if err != nil {
		return nil, err
	}
	set := endpoints.New(svc, trace)
	// The CLI routes' keys count as uses too, reported as tracking and
	// commissions report theirs (apikeys.used.v1, consumed back here).
	uses := apikey.NewUses()
	p.AddRunner(catalogsync.KeyUseReporter{Pool: p.Pool, Uses: uses, Service: p.Name, Interval: cfg.KeyUseInterval, Logger: p.Logger}.Run)
	return httpapi.Routes(set, httpapi.Config{
		Keys:       &apikey.Authenticator{Store: store, Now: p.Now, DocsURL: cfg.APIKeyDocsURL, OnLookup: lookups.Observe, Uses: uses},
		Limit:      cli.byToken,
		FailedAuth: cli.failedAuth,
		Logger:     p.Logger,
	}), nil
}
