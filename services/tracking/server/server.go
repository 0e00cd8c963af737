// Package server wires the tracking service onto the shared platform (an
// importable package so the one-machine stack and cross-service tests run
// the real service in-process; cmd/tracking only calls platform.Run).
package server

import (
	"context"
	"fmt"
	"time"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/auth/bearer"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/ratelimit"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
	"github.com/svc-dev/svc/services/tracking/internal/ingest/endpoints"
	"github.com/svc-dev/svc/services/tracking/internal/ingest/enrich"
	"github.com/svc-dev/svc/services/tracking/internal/ingest/httpapi"
	"github.com/svc-dev/svc/services/tracking/internal/ingest/pgstore"
	replicaconsumer "github.com/svc-dev/svc/services/tracking/internal/replica/consumer"
	"github.com/svc-dev/svc/services/tracking/migrations"
	"github.com/svc-dev/svc/services/tracking/web"
)

// Name is the service's name: its schema, consumer-group prefix and logs.
const Name = "tracking"

// Spec describes tracking to the platform.
func Spec() platform.Spec {
	return platform.Spec{
		Name:       Name,
		Migrations: migrations.FS,
		// Tracking keeps a replica of the catalog: the barrier's progress
		// tables live in its schema.
		ExtraMigrations: []platform.MigrateFunc{catalogsync.Migrate},
		// Clicks are enqueued without NOTIFY (it serialises commits on a hot
		// path); the relay polls instead.
		RelayPollInterval: 50 * time.Millisecond,
		// One event per click: published rows are deleted rather than kept
		// (Kafka's retention is the record), halving outbox writes.
		RelayDeleteSent: true,
		// Generic plans (checked by deploy/devstack/plans): the sale
		// customer's lookup alone took 400 µs of planning per sale with
		// custom plans (pg_stat_statements, docs/benchmarks.md).
		PlanCacheMode: "auto",
		Topics:        []string{eventsv1.TopicCatalog, eventsv1.TopicCatalogApplied, eventsv1.TopicTracking, eventsv1.TopicAPIKeyUsed},
		Commands:      commands(),
		Wire:          wire,
	}
}

// wire builds tracking on the opened platform from its Config alone.
func wire(_ context.Context, p *platform.Platform) ([]platform.Route, error) {
	cfg, err := LoadConfig(p.Env)
	if err != nil {
		return nil, err
	}
	if err := p.Consume(eventsv1.TopicCatalog, replicaconsumer.Group(p.Name), replicaconsumer.Applier{Service: p.Name, Now: p.Now}.Apply, platform.BatchEvents(catalogsync.BatchSize)); err != nil {
		return nil, err
	}
	enr, err := enrich.New(enrich.Config{GeoIPPath: cfg.GeoIPDB})
	if err != nil {
		return nil, fmt.Errorf("GEOIP_DB: %w", err)
	}
	p.AddCloser(func(context.Context) error { return enr.Close() })
	if info, ok := enr.GeoDB(); ok {
		p.Logger.Info("geo database", "path", info.Path, "type", info.Type, "built", info.BuildTime)
	} else {
		p.Logger.Info("no geo database: click geo fields stay empty (set GEOIP_DB)")
	}
	groups, err := obs.NewGroupCommits(p.Registry)
	if err != nil {
		return nil, err
	}
	store, err := pgstore.New(p.Pool, pgstore.Config{
		Schema: p.Config.Schema, Now: p.Now, Logger: p.Logger,
		ClickWriters: cfg.ClickWriters, ClickGroup: cfg.ClickGroupMax,
		OnAttributionGroup: groups.Observer("attribution"),
	})
	if err != nil {
		return nil, err
	}
	p.AddRunner(store.Run)
	svc, err := ingest.NewService(ingest.Config{Store: store, Enricher: enr.Ingest(), Now: p.Now})
	if err != nil {
		return nil, err
	}
	set := endpoints.New(svc, obs.Tracing(p.Tracer.Tracer("svc/"+p.Name)))
	refusals, err := ratelimit.NewRefusalCounter(p.Registry)
	if err != nil {
		return nil, err
	}
	limiters, err := httpapi.NewLimiters(httpapi.Limits{
		Click: cfg.ClickRateLimit, Lead: cfg.LeadRateLimit, Visit: cfg.VisitRateLimit, Config: cfg.ConfigRateLimit,
		Preflight: cfg.PreflightRateLimit,
	}, p.Now)
	if err != nil {
		return nil, err
	}
	lookups, err := apikey.NewLookupCounter(p.Registry)
	if err != nil {
		return nil, err
	}
	// The internal token is held only as its hash from here on.
	internalToken := bearer.New(cfg.InternalToken)
	if !internalToken.Configured() {
		p.Logger.Info("no INTERNAL_TOKEN: " + httpapi.AttributionsPath + " answers 503 (the commissions service cannot ask for attributions)")
	}
	cfg.InternalToken = ""
	// Keys that worked are reported to accounts once per interval (the
	// console's last use), never written on the request path.
	uses := apikey.NewUses()
	p.AddRunner(catalogsync.KeyUseReporter{Pool: p.Pool, Uses: uses, Service: p.Name, Interval: cfg.KeyUseInterval, Logger: p.Logger}.Run)
	return httpapi.Routes(set, httpapi.Config{
		Logger:   p.Logger,
		Now:      p.Now,
		Keys:     &apikey.Authenticator{Store: store, Now: p.Now, DocsURL: cfg.APIKeyDocsURL, OnLookup: lookups.Observe, Uses: uses},
		IPs:      p.IPs,
		Limiters: limiters,
		OnLimit:  refusals.Inc,
		Origins:  svc.OriginAllowedSomewhere,
		// The token goes from the environment to the verifier only (as its
		// hash), never to logs.
		InternalToken: internalToken,
		Extra: []platform.Route{
			{Pattern: "GET /svc.js", Name: "tracker_js", Handler: web.Handler()},
		},
	}), nil
}
