package server

import (
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/svc-dev/svc/libs/auth/apikey"
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

// DefaultDocsURL is where key-rotation warnings send integrators (the same
// default as tracking's).
const DefaultDocsURL = "https://docs.svc.dev/api-keys/rotation"

// wireIntegration builds GET /api/v1/cli/status and POST
// /api/v1/cli/test-event (program API key) and the consumer of tracking's
// events that keeps the test events the status reports.
//
// Environment: TRACKING_URL (tracking's base address, e.g.
// http://tracking:8080; unset: test events answer 500 and say why in the
// log), CHAIN_LIMIT_PER_HOUR (default 10), TEST_EVENT_SYNC_TIMEOUT (default
// 10s), TRACKING_TIMEOUT (default 10s), API_KEY_DOCS_URL.
func wireIntegration(p *platform.Platform, cat catalog.Service, cliLimit func(http.Handler) http.Handler) ([]platform.Route, error) {
	trackingURL := p.Env.String("TRACKING_URL", "")
	chainLimit := p.Env.Int("CHAIN_LIMIT_PER_HOUR", integration.DefaultChainLimit)
	syncTimeout := p.Env.Duration("TEST_EVENT_SYNC_TIMEOUT", integration.DefaultSyncTimeout)
	trackingTimeout := p.Env.Duration("TRACKING_TIMEOUT", 10*time.Second)
	docsURL := p.Env.String("API_KEY_DOCS_URL", DefaultDocsURL)
	if err := p.Env.Err(); err != nil {
		return nil, err
	}
	if chainLimit < 1 {
		return nil, fmt.Errorf("CHAIN_LIMIT_PER_HOUR must be at least 1, got %d", chainLimit)
	}
	var tracker integration.Tracker = trackingclient.Unconfigured{}
	if trackingURL == "" {
		p.Logger.Warn("TRACKING_URL is not set: POST /api/v1/cli/test-event cannot reach tracking and answers 500")
	} else {
		hc := &http.Client{
			Timeout: trackingTimeout,
			Transport: otelhttp.NewTransport(http.DefaultTransport,
				otelhttp.WithTracerProvider(p.Tracer), otelhttp.WithPropagators(p.Propagator)),
		}
		c, err := trackingclient.New(trackingURL, hc)
		if err != nil {
			return nil, fmt.Errorf("TRACKING_URL: %w", err)
		}
		tracker = c
	}
	store := pgstore.New(p.Pool)
	svc, err := integration.NewService(integration.Config{
		Store:       store,
		Catalog:     cat,
		Tracker:     tracker,
		Now:         p.Now,
		ChainLimit:  chainLimit,
		SyncTimeout: syncTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("integration service: %w", err)
	}
	if err := p.Consume(eventsv1.TopicTracking, consumer.Group, consumer.Handler(pgstore.RecordTestEvent), platform.SkipEvents(consumer.Skip)); err != nil {
		return nil, err
	}
	tracer := p.Tracer.Tracer("svc/accounts")
	set := endpoints.New(svc, obs.Tracing(tracer))
	return httpapi.Routes(set, httpapi.Config{
		Keys:   &apikey.Authenticator{Store: store, Now: p.Now, DocsURL: docsURL},
		Limit:  cliLimit,
		Logger: p.Logger,
	}), nil
}
