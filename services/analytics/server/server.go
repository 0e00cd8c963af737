// Package server is analytics' wiring: its Spec for the platform and the
// wire function that builds the service from the opened platform: the
// catalog replica, the consumers that keep the dashboard's aggregates from
// tracking's and the ledger's events, the dashboard routes and the
// dashboard page.
package server

import (
	"context"
	"fmt"
	"time"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/auth/bearer"
	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/ratelimit"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	aggregate "github.com/svc-dev/svc/services/analytics/internal/aggregate/consumer"
	"github.com/svc-dev/svc/services/analytics/internal/dashboard"
	"github.com/svc-dev/svc/services/analytics/internal/dashboard/endpoints"
	"github.com/svc-dev/svc/services/analytics/internal/dashboard/httpapi"
	"github.com/svc-dev/svc/services/analytics/internal/dashboard/pgstore"
	"github.com/svc-dev/svc/services/analytics/internal/page"
	"github.com/svc-dev/svc/services/analytics/internal/partnerfigures"
	figuresendpoints "github.com/svc-dev/svc/services/analytics/internal/partnerfigures/endpoints"
	figureshttp "github.com/svc-dev/svc/services/analytics/internal/partnerfigures/httpapi"
	figuresstore "github.com/svc-dev/svc/services/analytics/internal/partnerfigures/pgstore"
	"github.com/svc-dev/svc/services/analytics/internal/readiness"
	readinessendpoints "github.com/svc-dev/svc/services/analytics/internal/readiness/endpoints"
	readinesshttp "github.com/svc-dev/svc/services/analytics/internal/readiness/httpapi"
	readinessstore "github.com/svc-dev/svc/services/analytics/internal/readiness/pgstore"
	"github.com/svc-dev/svc/services/analytics/internal/rebuild"
	"github.com/svc-dev/svc/services/analytics/internal/replica/consumer"
	"github.com/svc-dev/svc/services/analytics/migrations"
)

// Name is the service's name: its schema, consumer-group prefix and logs.
const Name = "analytics"

// Where accounts serves the dashboard sign-in, on the same origin (the
// gateway, the Ingress): the page's config.json.
const (
	SignInPath   = "/api/v1/dashboard/auth/start"
	SignOutPath  = "/api/v1/dashboard/auth/signout"
	ProgramsPath = "/api/v1/dashboard/me"
)

// Spec describes analytics to the platform.
func Spec() platform.Spec {
	return platform.Spec{
		Name:            Name,
		Migrations:      migrations.FS,
		ExtraMigrations: []platform.MigrateFunc{catalogsync.Migrate},
		Topics:          []string{eventsv1.TopicCatalog, eventsv1.TopicCatalogApplied, eventsv1.TopicTracking, eventsv1.TopicCommissions, eventsv1.TopicAPIKeyUsed},
		Commands:        commands(),
		Wire:            wire,
	}
}

// wire builds analytics on the opened platform from its Config alone.
func wire(_ context.Context, p *platform.Platform) ([]platform.Route, error) {
	cfg, err := LoadConfig(p.Env)
	if err != nil {
		return nil, err
	}
	if err := p.Consume(eventsv1.TopicCatalog, consumer.Group(p.Name), consumer.Applier{Service: p.Name, Now: p.Now}.Apply, platform.BatchEvents(catalogsync.BatchSize)); err != nil {
		return nil, err
	}
	// Clicks arrive by the thousand a second: the figures' consumers apply
	// what is already fetched in one transaction (one commit, not one per
	// click), each event still deduplicated by its inbox row.
	if err := p.Consume(eventsv1.TopicTracking, aggregate.TrackingGroup(p.Name), aggregate.Tracking, platform.BatchEvents(aggregate.BatchSize),
		platform.BatchHandler(aggregate.TrackingBatch)); err != nil {
		return nil, err
	}
	if err := p.Consume(eventsv1.TopicCommissions, aggregate.CommissionsGroup(p.Name), aggregate.Commissions, platform.BatchEvents(aggregate.BatchSize)); err != nil {
		return nil, err
	}
	if err := p.Registry.Register(rebuild.NewCollector(p.Pool, time.Now, p.Logger)); err != nil {
		return nil, err
	}
	// Sessions are verified with accounts' public key and checked against
	// the replica's revocations and suspensions (the catalog topic).
	store := pgstore.New(p.Pool)
	sessions, err := session.NewDashboardChecker(cfg.SessionPublicKey, SessionIssuer, p.Now, store)
	if err != nil {
		return nil, err
	}
	if sessions == nil {
		p.Logger.Warn("no SESSION_PUBLIC_KEY: every caller of the dashboard routes is signed out")
	}
	svc, err := dashboard.New(store, p.Now)
	if err != nil {
		return nil, err
	}
	tracing := obs.Tracing(p.Tracer.Tracer("svc/" + p.Name))
	set := endpoints.New(svc, tracing)
	routes := httpapi.Routes(set, httpapi.Config{Sessions: sessions, Logger: p.Logger})
	// GET /api/v1/programs/me/readiness: a program API key, 30/min per key.
	rstore := readinessstore.New(p.Pool)
	ready, err := readiness.NewService(rstore, p.Now)
	if err != nil {
		return nil, err
	}
	limiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.ReadinessRateLimit, Now: p.Now})
	if err != nil {
		return nil, err
	}
	refusals, err := ratelimit.NewRefusalCounter(p.Registry)
	if err != nil {
		return nil, err
	}
	// Readiness and sources share one failed-authentication allowance per
	// client IP, checked before the key lookup (as sale and refund).
	failedLimiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.FailedAuthRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("FAILED_AUTH_RATE_LIMIT: %w", err)
	}
	failedAuth := ratelimit.FailedAuth(failedLimiter, ratelimit.ByIP(p.IPs), ratelimit.WithRoute("failed_auth"), ratelimit.WithOnRefuse(refusals.Inc))
	// Keys that worked on readiness and sources are reported to accounts
	// once per interval (the console's last use), as tracking's and
	// commissions' are.
	uses := apikey.NewUses()
	p.AddRunner(catalogsync.KeyUseReporter{Pool: p.Pool, Uses: uses, Service: p.Name, Interval: cfg.KeyUseInterval, Logger: p.Logger}.Run)
	routes = append(routes, readinesshttp.Routes(readinessendpoints.New(ready, tracing), readinesshttp.Config{
		Keys:       &apikey.Authenticator{Store: rstore, Now: p.Now, DocsURL: apikey.DefaultDocsURL, Uses: uses},
		Logger:     p.Logger,
		Limit:      ratelimit.Middleware(limiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("readiness"), ratelimit.WithOnRefuse(refusals.Inc)),
		FailedAuth: failedAuth,
	})...)
	// GET /api/v1/programs/me/analytics/sources: a program API key, its
	// own 30/min per key.
	sourcesLimiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.SourcesRateLimit, Now: p.Now})
	if err != nil {
		return nil, err
	}
	routes = append(routes, httpapi.KeyRoutes(set, httpapi.KeyConfig{
		Keys:       &apikey.Authenticator{Store: rstore, Now: p.Now, DocsURL: apikey.DefaultDocsURL, Uses: uses},
		Logger:     p.Logger,
		Limit:      ratelimit.Middleware(sourcesLimiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("sources"), ratelimit.WithOnRefuse(refusals.Inc)),
		FailedAuth: failedAuth,
	})...)
	// GET /internal/v1/programs/{id}/partner-figures: accounts' console
	// partners list, on the operations port with INTERNAL_TOKEN.
	figures, err := partnerfigures.NewService(figuresstore.New(p.Pool), p.Now)
	if err != nil {
		return nil, err
	}
	internalToken := bearer.New(cfg.InternalToken)
	if !internalToken.Configured() {
		p.Logger.Info("no INTERNAL_TOKEN: " + figureshttp.Path + " answers 503 (the console's partners list shows no figures)")
	}
	routes = append(routes, figureshttp.Routes(figuresendpoints.New(figures, tracing), figureshttp.Config{InternalToken: internalToken, Logger: p.Logger})...)
	pageHandler, err := page.Handler(page.Config{SignInURL: SignInPath, SignOutURL: SignOutPath, ProgramsURL: ProgramsPath})
	if err != nil {
		return nil, err
	}
	routes = append(routes,
		platform.Route{Pattern: "GET " + page.Prefix, Name: "dashboard_page", Handler: pageHandler},
		platform.Route{Pattern: "GET /dashboard", Name: "dashboard_page", Handler: pageHandler},
	)
	return routes, nil
}
