// Package server is commissions' wiring: its Spec for the platform and the
// wire function that builds the service from the opened platform: the
// catalog replica, the sale and refund routes (attributed by tracking), the
// ledger's approval scheduler and backstop, and the ledger's admin routes.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/ratelimit"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/commissions/internal/attribution"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
	ledgerconsumer "github.com/svc-dev/svc/services/commissions/internal/ledger/consumer"
	"github.com/svc-dev/svc/services/commissions/internal/ledger/endpoints"
	"github.com/svc-dev/svc/services/commissions/internal/ledger/httpapi"
	"github.com/svc-dev/svc/services/commissions/internal/ledger/pgstore"
	"github.com/svc-dev/svc/services/commissions/internal/processor"
	processorendpoints "github.com/svc-dev/svc/services/commissions/internal/processor/endpoints"
	processorhttp "github.com/svc-dev/svc/services/commissions/internal/processor/httpapi"
	processorstore "github.com/svc-dev/svc/services/commissions/internal/processor/pgstore"
	"github.com/svc-dev/svc/services/commissions/internal/replica/consumer"
	"github.com/svc-dev/svc/services/commissions/internal/track"
	trackendpoints "github.com/svc-dev/svc/services/commissions/internal/track/endpoints"
	trackhttp "github.com/svc-dev/svc/services/commissions/internal/track/httpapi"
	"github.com/svc-dev/svc/services/commissions/migrations"
)

// Name is the service's name: its schema, consumer-group prefix and logs.
const Name = "commissions"

// Spec describes commissions to the platform.
func Spec() platform.Spec {
	return platform.Spec{
		Name:       Name,
		Migrations: migrations.FS,
		// Commissions keeps a replica of the catalog: the barrier's
		// progress tables live in its schema.
		ExtraMigrations: []platform.MigrateFunc{catalogsync.Migrate},
		Topics:          []string{eventsv1.TopicCatalog, eventsv1.TopicCatalogApplied, eventsv1.TopicTracking, eventsv1.TopicCommissions, eventsv1.TopicAPIKeyUsed},
		// The ledger's events are the history of the money: kept forever,
		// like the catalog (not compacted: the key is the program id).
		TopicConfigs: map[string]map[string]string{eventsv1.TopicCommissions: {"retention.ms": "-1"}},
		// The ledger's events are enqueued without NOTIFY (a notifying
		// transaction holds Postgres's notification lock through its
		// commit, so sales and refunds committed one at a time); the relay
		// polls instead, as tracking's does.
		RelayPollInterval: 50 * time.Millisecond,
		// Published rows are deleted rather than kept for the sweep: the
		// topic keeps every event forever (above), so it is the record, and
		// marking a row sent cost a second row version and index entries
		// per event (0.04 ms a row against a delete's 0.004, about 0.1 ms
		// of every sale and refund; pg_stat_statements, docs/benchmarks.md).
		// OUTBOX_DELETE_SENT=false keeps them again.
		RelayDeleteSent: true,
		// Every ledger statement is a keyed lookup or write: generic plans
		// (checked by deploy/devstack/plans) save planning each of the ~10
		// statements of a sale and a refund, about a quarter of Postgres's
		// CPU on them (docs/benchmarks.md).
		PlanCacheMode: "auto",
		Commands:      commands(),
		Wire:          wire,
	}
}

// wire builds commissions on the opened platform from its Config alone.
func wire(_ context.Context, p *platform.Platform) ([]platform.Route, error) {
	cfg, err := LoadConfig(p.Env)
	if err != nil {
		return nil, err
	}
	deps, err := newDependencies(cfg, p.Logger, p.Tracer, p.Propagator)
	if err != nil {
		return nil, err
	}
	if err := p.Consume(eventsv1.TopicCatalog, consumer.Group(p.Name), consumer.Applier{Service: p.Name, Now: p.Now}.Apply, platform.BatchEvents(catalogsync.BatchSize)); err != nil {
		return nil, err
	}
	groups, err := obs.NewGroupCommits(p.Registry)
	if err != nil {
		return nil, err
	}
	store := pgstore.New(p.Pool, pgstore.ObserveReservations(groups.Observer("sale_reservation")))
	// Settled leads earn the per-lead reward, in the inbox transaction.
	leads := ledgerconsumer.Leads{Store: store, Now: p.Now, Logger: p.Logger}
	// Only leads reach the ledger; the clicks (most of tracking's events)
	// are acknowledged without a transaction.
	onlyLeads := platform.SkipEvents(func(env *eventsv1.Envelope) bool { return env.GetType() != eventsv1.TypeLeadRecorded })
	if err := p.Consume(eventsv1.TopicTracking, ledgerconsumer.Group(p.Name), leads.Apply, onlyLeads); err != nil {
		return nil, err
	}
	metrics, err := newRunnerMetrics(p.Registry)
	if err != nil {
		return nil, err
	}
	svc, err := ledger.New(ledger.Config{
		Store:             store,
		Now:               p.Now,
		OnRefund:          func(outcome string) { metrics.refunds.WithLabelValues(outcome).Inc() },
		OnCompletionGroup: groups.Observer("sale_completion"),
		OnRefundGroup:     groups.Observer("refund"),
		OnNotifyError: func(err error) {
			p.Logger.Warn("refund notifications not sent; the backstop sends them", "err", err)
		},
	})
	if err != nil {
		return nil, err
	}
	var attr track.Attributor
	if deps.attribution != nil {
		attr = deps.attribution
	}
	tracker, err := track.New(svc, attr, p.Now, p.Logger)
	if err != nil {
		return nil, err
	}
	hooks, err := processor.New(processor.Config{
		Store: processorstore.New(p.Pool), Ledger: svc, Attributor: attr, Now: p.Now, Logger: p.Logger,
		MetadataRouting: cfg.ProcessorPlatformAccount != "",
		OnOutcome:       func(outcome string) { metrics.processorEvents.WithLabelValues(outcome).Inc() },
	})
	if err != nil {
		return nil, err
	}
	run := &runners{ledger: svc, track: tracker, processor: hooks, now: p.Now, logger: p.Logger, metrics: metrics, cfg: cfg}
	p.AddRunner(run.approveLoop)
	p.AddRunner(run.backstopLoop)

	limiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.AdminRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("ADMIN_RATE_LIMIT: %w", err)
	}
	refusals, err := ratelimit.NewRefusalCounter(p.Registry)
	if err != nil {
		return nil, err
	}
	failedLimiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.FailedAuthRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("FAILED_AUTH_RATE_LIMIT: %w", err)
	}
	if cfg.AdminToken == "" {
		p.Logger.Info("no ADMIN_TOKEN: every /admin/v1/ route of commissions answers 401")
	}
	saleLimiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.SaleRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("TRACK_SALE_RATE_LIMIT: %w", err)
	}
	lookups, err := apikey.NewLookupCounter(p.Registry)
	if err != nil {
		return nil, err
	}
	// The sale and refund routes' keys, cached until the replica changes.
	keys, err := catalogsync.NewKeys(p.Pool, p.Config.Schema, p.Logger)
	if err != nil {
		return nil, err
	}
	p.AddRunner(keys.Run)
	// Keys that worked are reported to accounts once per interval (the
	// console's last use), never written on the request path.
	uses := apikey.NewUses()
	p.AddRunner(catalogsync.KeyUseReporter{Pool: p.Pool, Uses: uses, Service: p.Name, Interval: cfg.KeyUseInterval, Logger: p.Logger}.Run)
	tracing := obs.Tracing(p.Tracer.Tracer("svc/" + p.Name))
	failedAuth := ratelimit.FailedAuth(failedLimiter, ratelimit.ByIP(p.IPs), ratelimit.WithRoute("failed_auth"), ratelimit.WithOnRefuse(refusals.Inc))
	routes := trackhttp.Routes(trackendpoints.New(tracker, tracing), trackhttp.Config{
		Logger: p.Logger,
		Now:    p.Now,
		Keys:   &apikey.Authenticator{Store: keys, Now: p.Now, DocsURL: cfg.APIKeyDocsURL, OnLookup: lookups.Observe, Uses: uses},
		// One bucket per key for sale and refund together: the same
		// middleware (and limiter) wraps both routes.
		Limit:      ratelimit.Middleware(saleLimiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("sale"), ratelimit.WithOnRefuse(refusals.Inc)),
		FailedAuth: failedAuth,
	})
	if cfg.ProcessorWebhookSecret == "" {
		p.Logger.Info("no PROCESSOR_WEBHOOK_SECRET: the payment processor's webhook is not served")
	}
	routes = append(routes, processorhttp.Routes(processorendpoints.New(hooks, tracing), processorhttp.Config{
		Logger: p.Logger, Now: p.Now, Secrets: []string{cfg.ProcessorWebhookSecret, cfg.ProcessorWebhookSecretPrevious},
	})...)
	consoleRoutes, err := wireConsole(p, cfg, svc, tracing, failedAuth, refusals)
	if err != nil {
		return nil, err
	}
	routes = append(routes, consoleRoutes...)
	set := endpoints.New(adminService{Service: svc, run: run}, tracing)
	return append(routes, httpapi.Routes(set, httpapi.Config{
		AdminToken: cfg.AdminToken,
		Logger:     p.Logger,
		Limit:      ratelimit.Middleware(limiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("admin"), ratelimit.WithOnRefuse(refusals.Inc)),
		FailedAuth: failedAuth,
	})...), nil
}

// adminService is the ledger with the approval scheduler's single run, as
// the admin endpoints need them.
type adminService struct {
	*ledger.Service
	run *runners
}

// ApproveDueNow runs the approval scheduler once, with its metrics.
func (a adminService) ApproveDueNow(ctx context.Context) (int, error) { return a.run.approve(ctx) }

// dependencies are the clients of the other services commissions calls,
// one per dependency, built once in wire and shared by the routes that
// need them.
type dependencies struct {
	// attribution asks tracking for a payment's attribution decision (the
	// sale route and the backstop); nil without TRACKING_URL or
	// INTERNAL_TOKEN, and a live sale then answers 500 `Sale tracking
	// failed` (a sale is never recorded without tracking's decision).
	attribution *attribution.Client
}

// newDependencies builds the clients from cfg, tracing with the platform's
// provider and propagator. A missing setting is logged, not fatal: the
// refund, test-sale and admin routes work without tracking.
func newDependencies(cfg Config, logger *slog.Logger, tp trace.TracerProvider, prop propagation.TextMapPropagator) (dependencies, error) {
	var d dependencies
	switch {
	case cfg.TrackingURL == "":
		logger.Info("no TRACKING_URL: no attribution client (the sale route will answer 500 until it is set)")
		return d, nil
	case cfg.InternalToken == "":
		logger.Warn("TRACKING_URL is set but INTERNAL_TOKEN is not: no attribution client (tracking refuses calls without it)")
		return d, nil
	}
	c, err := attribution.New(cfg.TrackingURL, cfg.InternalToken, cfg.AttributionTimeout, attribution.WithTracing(tp, prop))
	if err != nil {
		return d, fmt.Errorf("TRACKING_URL: %w", err)
	}
	logger.Info("attribution client ready", "tracking_url", cfg.TrackingURL, "timeout", cfg.AttributionTimeout.String())
	d.attribution = c
	return d, nil
}
