// Package server wires the accounts service onto the shared platform. It is
// an importable package rather than code in cmd/ so the one-machine stack
// and the cross-service tests run the real service in-process; cmd/accounts
// only calls platform.Run with this Spec.
package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/ratelimit"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	catalogconsumer "github.com/svc-dev/svc/services/accounts/internal/catalog/consumer"
	"github.com/svc-dev/svc/services/accounts/internal/catalog/endpoints"
	"github.com/svc-dev/svc/services/accounts/internal/catalog/httpapi"
	"github.com/svc-dev/svc/services/accounts/internal/catalog/pgstore"
	"github.com/svc-dev/svc/services/accounts/migrations"
)

// Name is the service's name: its schema, consumer-group prefix and logs.
const Name = "accounts"

// SessionIssuer names the issuer of dashboard session tokens.
const SessionIssuer = "svc-accounts"

// Spec describes accounts to the platform.
func Spec() platform.Spec {
	return platform.Spec{
		Name:       Name,
		Migrations: migrations.FS,
		Topics:     []string{eventsv1.TopicCatalog, eventsv1.TopicCatalogApplied, eventsv1.TopicTracking, eventsv1.TopicAPIKeyUsed},
		TopicConfigs: map[string]map[string]string{
			// Nothing replays the catalog: a replica that starts later (a new
			// service, or a group whose offsets expired) builds its copy from
			// this topic alone, so nothing may age out of it. Not compaction:
			// the key is the program id, not the entity, so compacting would
			// drop every upsert of a program but its last.
			eventsv1.TopicCatalog: {"retention.ms": "-1"},
		},
		// GET /admin/v1/catalog/sync may wait up to 60s (the sync barrier).
		HTTPWriteTimeout: 70 * time.Second,
		Wire:             wire,
	}
}

func wire(ctx context.Context, p *platform.Platform) ([]platform.Route, error) {
	cfg, err := LoadConfig(p.Env)
	if err != nil {
		return nil, err
	}
	priv, err := session.ParsePrivateKey(cfg.SessionSigningKey)
	if err != nil {
		return nil, fmt.Errorf("SESSION_SIGNING_KEY: %w", err)
	}
	issuer, err := session.NewIssuer(priv, SessionIssuer, cfg.SessionTTL, p.Now)
	if err != nil {
		return nil, fmt.Errorf("session issuer: %w", err)
	}
	store := pgstore.New(p.Pool, p.Now)
	// Before any route: state a replica was never given is on its way
	// before this pod answers anyone (pgstore.Backfill).
	if n, err := store.Backfill(ctx); err != nil {
		return nil, err
	} else if n > 0 {
		p.Logger.Info("catalog backfill republished state to the replicas", "events", n)
	}
	svc, err := catalog.NewService(catalog.Config{
		Store:     store,
		Keys:      apikey.Generate,
		Import:    apikey.Import,
		Sessions:  issuer,
		Now:       p.Now,
		Consumers: cfg.CatalogConsumers,
		Stopping:  p.Stopping(),
	})
	if err != nil {
		return nil, err
	}
	// One tracer for the service; every feature's endpoints use it.
	trace := obs.Tracing(p.Tracer.Tracer("svc/accounts"))
	set := endpoints.New(svc, trace)
	if err := p.Consume(eventsv1.TopicCatalogApplied, catalogconsumer.Group, catalogconsumer.Handler(pgstore.RecordAck),
		// An ack is a GREATEST upsert: a batch of them shares a transaction
		// (every replica acknowledges each catalog event it applies).
		platform.BatchEvents(catalogsync.BatchSize)); err != nil {
		return nil, err
	}
	limiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.AdminRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("ADMIN_RATE_LIMIT: %w", err)
	}
	refusals, err := ratelimit.NewRefusalCounter(p.Registry)
	if err != nil {
		return nil, err
	}
	limit := ratelimit.Middleware(limiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("admin"), ratelimit.WithOnRefuse(refusals.Inc))
	// One failed-authentication allowance per client IP for every route
	// that checks a token (admin, CLI key and login-token, settings): once
	// an IP's 401s use it up, 429 before any lookup. The per-token limiters
	// run after the check, so an invented token never gets a bucket.
	failedLimiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.FailedAuthRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("FAILED_AUTH_RATE_LIMIT: %w", err)
	}
	failedAuth := ratelimit.FailedAuth(failedLimiter, ratelimit.ByIP(p.IPs), ratelimit.WithRoute("failed_auth"), ratelimit.WithOnRefuse(refusals.Inc))
	doc, err := openAPIRoute()
	if err != nil {
		return nil, err
	}
	routes := []platform.Route{doc}
	routes = append(routes, httpapi.Routes(set, httpapi.Config{AdminToken: cfg.AdminToken, Logger: p.Logger, Limit: limit, FailedAuth: failedAuth})...)

	// Every /api/v1/cli/* route shares one limit of the spec: 60 a minute per
	// API key or login token (the Bearer token, counted once it has
	// authenticated), per client IP on the key-less routes.
	cliLimiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.CLIRateLimit, Now: p.Now})
	if err != nil {
		return nil, fmt.Errorf("CLI_RATE_LIMIT: %w", err)
	}
	cli := cliLimits{
		byIP:       ratelimit.Middleware(cliLimiter, ratelimit.ByIP(p.IPs), ratelimit.WithRoute("cli"), ratelimit.WithOnRefuse(refusals.Inc)),
		byToken:    ratelimit.Middleware(cliLimiter, ratelimit.BearerOrIP(p.IPs), ratelimit.WithRoute("cli"), ratelimit.WithOnRefuse(refusals.Inc)),
		failedAuth: failedAuth,
	}

	// CLI status and test events (program API key): see integration.go.
	integrationRoutes, err := wireIntegration(p, cfg, svc, trace, cli)
	if err != nil {
		return nil, err
	}
	routes = append(routes, integrationRoutes...)

	// CLI sign-in, init, programs and stripe-connect, and the program
	// settings routes: see cliauth.go.
	cliAuthRoutes, err := wireCLIAuth(ctx, p, cfg, svc, priv, issuer, trace, cli, refusals)
	if err != nil {
		return nil, err
	}
	routes = append(routes, cliAuthRoutes...)

	return routes, nil
}

// cliLimits are the shared CLI limiter keyed per client IP (key-less
// routes) and per authenticated token, and the failed-auth guard that goes
// around every token check.
type cliLimits struct {
	byIP, byToken, failedAuth func(http.Handler) http.Handler
}
