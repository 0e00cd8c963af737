// Package pg holds the Postgres plumbing shared by services: a pgx pool with
// safe defaults, schema-scoped goose migrations, a transaction helper and
// error classification.
package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
)

// DefaultMaxConns replaces pgxpool's default (max(4, NumCPU)), which starves
// a request-per-connection service on a small machine.
const DefaultMaxConns int32 = 32

// Options configures NewPool. The zero value is usable.
type Options struct {
	// Schema, when set, becomes the connections' search_path so unqualified
	// table names resolve in the service's own schema (and nowhere else).
	Schema string
	// MaxConns defaults to DefaultMaxConns when zero.
	MaxConns int32
	// Tracing installs an OpenTelemetry tracer on every connection. SQL text
	// and parameters are kept out of span attributes: statements can embed
	// customer data and the span name already names the operation.
	Tracing bool
	// TracerProvider is used when Tracing is set; nil means the provider
	// registered with otel.SetTracerProvider by the service's main.
	TracerProvider trace.TracerProvider
	// AppName is reported as application_name (visible in pg_stat_activity).
	AppName string
	// MaxConnIdleTime closes a connection idle that long; zero keeps
	// pgxpool's 30 minutes. Idle connections are checked every half of it
	// (at most every minute, pgxpool's period), so a pool shrinks back soon
	// after a burst: many pools sharing one server (the test suite's
	// stacks) then fit in its max_connections.
	MaxConnIdleTime time.Duration
	// PlanCacheMode sets plan_cache_mode ("auto", "force_custom_plan",
	// "force_generic_plan"); empty keeps the server's setting. pgx prepares
	// and caches every statement, and after five runs Postgres may switch a
	// statement to a generic plan costed on the statistics of that moment:
	// on a service that starts with empty tables, that can be a sequential
	// scan kept long after the table has grown.
	PlanCacheMode string
	// QueryTracer, when set, sees every statement the pool runs (beside the
	// OpenTelemetry tracer when Tracing is set); a BatchTracer sees batched
	// statements too. Meant for tests that inspect what a service runs
	// (the plan test records statements to EXPLAIN them).
	QueryTracer pgx.QueryTracer
}

// ValidSchema reports an error when name is not a plain lower-case
// identifier ([a-z_][a-z0-9_]*, at most 63 bytes). Schema names end up in
// search_path, DDL and advisory-lock keys; a name that never needs quoting
// behaves the same in all of them.
func ValidSchema(name string) error {
	ok := len(name) > 0 && len(name) <= 63
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c == '_' || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9')
	}
	if !ok {
		return fmt.Errorf("invalid schema name %q: want [a-z_][a-z0-9_]*, at most 63 bytes", name)
	}
	return nil
}

// NewPool opens a pgx pool and pings it, so a bad DSN or an unreachable
// server fails at startup rather than on the first request.
func NewPool(ctx context.Context, dsn string, opt Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The parse error can echo the DSN, password included: keep it out.
		return nil, errors.New("parse database url: invalid format")
	}
	if opt.Schema != "" {
		if err := ValidSchema(opt.Schema); err != nil {
			return nil, err
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = opt.Schema
	}
	if opt.AppName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = opt.AppName
	}
	if opt.PlanCacheMode != "" {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = opt.PlanCacheMode
	}
	cfg.MaxConns = opt.MaxConns
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if opt.MaxConnIdleTime > 0 {
		cfg.MaxConnIdleTime = opt.MaxConnIdleTime
		cfg.HealthCheckPeriod = min(cfg.HealthCheckPeriod, max(opt.MaxConnIdleTime/2, 100*time.Millisecond))
	}
	if opt.Tracing {
		topts := []otelpgx.Option{
			otelpgx.WithDisableSQLStatementInAttributes(),
		}
		if opt.TracerProvider != nil {
			topts = append(topts, otelpgx.WithTracerProvider(opt.TracerProvider))
		}
		cfg.ConnConfig.Tracer = otelpgx.NewTracer(topts...)
	}
	if opt.QueryTracer != nil {
		if cfg.ConnConfig.Tracer != nil {
			cfg.ConnConfig.Tracer = multitracer.New(cfg.ConnConfig.Tracer, opt.QueryTracer)
		} else {
			cfg.ConnConfig.Tracer = opt.QueryTracer
		}
	}

	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database %s:%d/%s: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, err)
	}
	return pool, nil
}
