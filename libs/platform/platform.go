// Package platform runs one svc service process: configuration from the
// environment, logger, metrics, tracing, Postgres pool and migrations, Kafka
// topics, the outbox relay, inbox consumers and the HTTP server with health
// and metrics routes, all in one run group with graceful shutdown. A service
// supplies a Spec (its name, migrations, topics with their settings, HTTP
// write timeout and a Wire function that builds its routes); everything else
// is the same for every service, so it lives here once instead of in every
// cmd/ package. The platform knows no product: what one service needs and
// another does not is in that service's Spec. README.md has the whole tour.
package platform

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/outbox/inbox"
	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// Route is one HTTP route of a service (httpkit.Route: the type every
// feature's transport returns).
type Route = httpkit.Route

// Spec describes a service to the platform.
type Spec struct {
	Name string
	// Migrations are the service's own goose SQL files (an embed.FS of
	// "*.sql"), applied to its schema before anything else.
	Migrations fs.FS
	// ExtraMigrations apply tables a library keeps in the service's schema
	// (catalogsync.Migrate for a catalog replica), in order, after the
	// service's migrations and the outbox's, at start and by `migrate`.
	ExtraMigrations []MigrateFunc
	// Topics this service produces to or consumes from; created at start,
	// or in the background once the broker answers, before any consumer
	// joins its group (each with a ".dlq" beside it).
	Topics []string
	// TopicConfigs are topic-level settings (retention.ms, cleanup.policy,
	// ...) keyed by topic, each topic one of Topics. A topic is created with
	// them and, when it exists already, brought to them at every start
	// (kafkakit.EnsureTopics); settings not named keep the broker's
	// defaults, and dead-letter topics get none. The topic's owner (its
	// producer) names them; a consumer that lists the topic too leaves them
	// out, and does not undo them.
	TopicConfigs map[string]map[string]string
	// HTTPWriteTimeout bounds writing one response, from the end of the
	// request headers (http.Server.WriteTimeout); zero means
	// DefaultHTTPWriteTimeout. A service with a route that waits longer
	// (a long poll, a barrier) raises it.
	HTTPWriteTimeout time.Duration
	// RelayPollInterval, when set, is how often the outbox relay looks for
	// rows without a NOTIFY (services that enqueue without one, on a hot
	// path, want tens of milliseconds); OUTBOX_POLL_INTERVAL overrides it.
	RelayPollInterval time.Duration
	// PlanCacheMode is the pool's plan_cache_mode when DB_PLAN_CACHE_MODE
	// is unset; empty: force_custom_plan (see NewPool's call).
	PlanCacheMode string
	// RelayDeleteSent deletes published outbox rows at once rather than
	// keeping them (see outbox.RelayConfig.DeleteSent).
	RelayDeleteSent bool
	// Commands are the service's own subcommands beside serve, migrate and
	// dead-letters, by name (commands.go).
	Commands map[string]Command
	// Wire builds the service on the opened platform: it may add consumers
	// and returns the service's routes.
	Wire func(ctx context.Context, p *Platform) ([]Route, error)
}

// DefaultHTTPWriteTimeout is Spec.HTTPWriteTimeout when it is not set: far
// above any ordinary route, short enough that a stuck handler does not hold
// a connection for minutes.
const DefaultHTTPWriteTimeout = 30 * time.Second

// MigrateFunc applies one set of migrations to schema (catalogsync.Migrate,
// outbox.Migrate): idempotent and safe to run from several processes at once
// (pg.Migrate with a version table of its own is both).
type MigrateFunc func(ctx context.Context, dsn, schema string, logger *slog.Logger) error

// Option adjusts how Start runs a service beyond its Spec and environment.
type Option func(*options)

type options struct {
	now    func() time.Time
	stderr io.Writer
	stdin  io.Reader
	tracer pgx.QueryTracer
}

// WithQueryTracer adds t to the service's Postgres pool beside its
// OpenTelemetry tracer (pg.Options.QueryTracer): it sees every statement
// the service runs, with its arguments (a pgx.BatchTracer sees batched
// ones too). For tests: the plan test records the statements to EXPLAIN
// them.
func WithQueryTracer(t pgx.QueryTracer) Option {
	return func(o *options) { o.tracer = t }
}

// WithClock makes now the service's clock, Platform.Now, in place of
// time.Now: every rule the service decides by time (windows, holds,
// expiries, rotation deadlines, rate-limit windows) reads it, so a test can
// move time instead of waiting or rewriting rows (platformtest.Clock). The
// platform's own machinery (the outbox relay, the inbox sweeper, health
// caching, HTTP timeouts) keeps the wall clock: it measures real durations
// and compares with Postgres's now().
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// Config is the environment every service reads, with the same names.
type Config struct {
	HTTPAddr string
	// OpsAddr (OPS_HTTP_ADDR), when set, is a second listener serving the
	// operations routes: /admin/ and /internal/ routes and /metrics, which
	// the HTTPAddr listener then answers 404 like any unknown path (ops.go).
	// Empty: one listener serves everything (local runs and tests).
	OpsAddr     string
	DatabaseURL string
	Schema      string
	DBMaxConns  int
	// DBMaxConnIdle closes pool connections idle that long (0: pgxpool's
	// 30 minutes).
	DBMaxConnIdle  time.Duration
	KafkaBrokers   []string
	LogLevel       string
	TrustedProxies string
	ShutdownGrace  time.Duration
	TopicPartition int
	InboxRetention time.Duration
	// KafkaReplicationFactor and KafkaMinInsyncReplicas are given to the
	// topics this service creates; an existing topic with others is
	// reported (kafka_topic_config_mismatch), not changed.
	KafkaReplicationFactor int
	KafkaMinInsyncReplicas int
	// KafkaProbeInterval is how often kafka_up is refreshed.
	KafkaProbeInterval time.Duration
}

// minInboxRetention guards INBOX_RETENTION against values that would sweep
// the record of an event while ordinary redeliveries of it (rebalances,
// restarts, a consumer retrying through a database outage) can still arrive.
const minInboxRetention = time.Hour

// LoadConfig reads the common variables; service-specific ones are read by
// the service's Wire through p.Env. Invalid values are reported by env.Err.
func LoadConfig(service string, env *obs.Env) Config {
	cfg := Config{
		HTTPAddr:       env.String("HTTP_ADDR", ":8080"),
		OpsAddr:        env.String("OPS_HTTP_ADDR", ""),
		DatabaseURL:    env.String("DATABASE_URL", "postgres://postgres@localhost:5432/postgres?sslmode=disable"),
		Schema:         env.String("DB_SCHEMA", service),
		DBMaxConns:     env.Int("DB_MAX_CONNS", 32),
		DBMaxConnIdle:  env.Duration("DB_MAX_CONN_IDLE", 0),
		KafkaBrokers:   env.List("KAFKA_BROKERS", []string{"127.0.0.1:9092"}),
		LogLevel:       env.String("LOG_LEVEL", "info"),
		TrustedProxies: env.String("TRUSTED_PROXIES", "127.0.0.1/32,::1/128"),
		ShutdownGrace:  env.Duration("SHUTDOWN_GRACE", 10*time.Second),
		TopicPartition: env.Int("KAFKA_TOPIC_PARTITIONS", 4),
		InboxRetention: env.Duration("INBOX_RETENTION", inbox.DefaultRetention),
		// Production defaults: a write acknowledged by two of three
		// replicas survives the loss of a broker. The local stack and tests
		// run one broker and set both to 1.
		KafkaReplicationFactor: env.Int("KAFKA_REPLICATION_FACTOR", 3),
		KafkaMinInsyncReplicas: env.Int("KAFKA_MIN_INSYNC_REPLICAS", 2),
		KafkaProbeInterval:     env.Duration("KAFKA_PROBE_INTERVAL", 10*time.Second),
	}
	// Port 0 asks for any free port, so two ":0" addresses are two ports.
	if cfg.OpsAddr != "" && cfg.OpsAddr == cfg.HTTPAddr && !strings.HasSuffix(cfg.OpsAddr, ":0") {
		env.Fail(fmt.Errorf("OPS_HTTP_ADDR: %s is HTTP_ADDR too: the operations routes need a port of their own", cfg.OpsAddr))
	}
	if cfg.InboxRetention < minInboxRetention {
		env.Fail(fmt.Errorf("INBOX_RETENTION: %s is shorter than %s", cfg.InboxRetention, minInboxRetention))
	}
	if cfg.KafkaReplicationFactor < 1 {
		env.Fail(fmt.Errorf("KAFKA_REPLICATION_FACTOR: %d is less than 1", cfg.KafkaReplicationFactor))
	}
	if cfg.KafkaMinInsyncReplicas < 1 || cfg.KafkaMinInsyncReplicas > cfg.KafkaReplicationFactor {
		env.Fail(fmt.Errorf("KAFKA_MIN_INSYNC_REPLICAS: %d is not between 1 and KAFKA_REPLICATION_FACTOR (%d): no write could be acknowledged",
			cfg.KafkaMinInsyncReplicas, cfg.KafkaReplicationFactor))
	}
	if cfg.KafkaProbeInterval <= 0 {
		env.Fail(fmt.Errorf("KAFKA_PROBE_INTERVAL: %s is not positive", cfg.KafkaProbeInterval))
	}
	return cfg
}

// validate reports a Spec the platform cannot run as meant.
func (s Spec) validate() error {
	if s.Name == "" {
		return errors.New("spec: Name is required")
	}
	if s.HTTPWriteTimeout < 0 {
		return fmt.Errorf("spec %s: HTTPWriteTimeout %s is negative", s.Name, s.HTTPWriteTimeout)
	}
	for i, m := range s.ExtraMigrations {
		if m == nil {
			return fmt.Errorf("spec %s: ExtraMigrations[%d] is nil", s.Name, i)
		}
	}
	// A setting for a topic the service does not create would silently do
	// nothing (a misspelt name, a topic renamed in one place only).
	listed := make(map[string]bool, len(s.Topics))
	for _, t := range s.Topics {
		listed[t] = true
	}
	for t := range s.TopicConfigs {
		if !listed[t] {
			return fmt.Errorf("spec %s: TopicConfigs names %q, which is not in Topics", s.Name, t)
		}
	}
	return nil
}

func (s Spec) writeTimeout() time.Duration {
	if s.HTTPWriteTimeout > 0 {
		return s.HTTPWriteTimeout
	}
	return DefaultHTTPWriteTimeout
}

// Platform is an opened service process.
type Platform struct {
	Name       string
	Config     Config
	Env        *obs.Env
	Logger     *slog.Logger
	Registry   *prometheus.Registry
	Tracer     trace.TracerProvider
	Propagator propagation.TextMapPropagator
	Pool       *pgxpool.Pool
	Writer     *kafka.Writer
	IPs        *httpkit.IPResolver
	// Now is the service's clock: time.Now, or the one given WithClock.
	// Wire hands it to everything that decides by time.
	Now func() time.Time

	writeTimeout time.Duration
	getenv       func(string) string
	queryTracer  pgx.QueryTracer
	stopping     chan struct{}
	health       *obs.Health
	metrics      *obs.HTTPMetrics
	kafka        kafkaMetrics
	topics       []kafkakit.TopicSpec
	topicsReady  chan struct{}
	runners      []func(context.Context) error
	closers      []func(context.Context) error
	listener     net.Listener
	// opsListener serves the operations routes when Config.OpsAddr is set;
	// nil otherwise.
	opsListener net.Listener
	// consumers are the inbox consumers Wire added, by name, for
	// `dead-letters replay`.
	consumers map[string]*inbox.Consumer
}

// Run is main() for a service: `serve` (the default), `migrate`,
// `dead-letters` (deadletters.go) or one of the spec's Commands. Options
// are Start's, plus WithStderr.
func Run(ctx context.Context, spec Spec, args []string, getenv func(string) string, stdout io.Writer, opts ...Option) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "serve":
		inst, err := Start(ctx, spec, getenv, stdout, opts...)
		if err != nil {
			fmt.Fprintf(stdout, `{"level":"ERROR","msg":"start failed","service":%q,"err":%q}`+"\n", spec.Name, err.Error())
			return 1
		}
		if err := inst.Wait(); err != nil {
			inst.p.Logger.Error("stopped with error", "err", err)
			return 1
		}
		return 0
	case "migrate":
		if err := spec.validate(); err != nil {
			fmt.Fprintf(stdout, `{"level":"ERROR","msg":"migrate failed","service":%q,"err":%q}`+"\n", spec.Name, err.Error())
			return 1
		}
		env := obs.NewEnv(getenv)
		cfg := LoadConfig(spec.Name, env)
		logger := obs.NewLogger(stdout, cfg.LogLevel)
		if err := migrate(ctx, spec, cfg, logger); err != nil {
			logger.Error("migrate failed", "err", err)
			return 1
		}
		logger.Info("migrations applied", "schema", cfg.Schema)
		return 0
	case "dead-letters":
		return deadLetters(ctx, spec, args[1:], getenv, stdout, opts)
	default:
		if c, ok := spec.Commands[cmd]; ok {
			return runCommand(ctx, spec, cmd, c, args[1:], getenv, stdout, opts)
		}
		fmt.Fprintf(stdout, "usage: %s [%s]\n", spec.Name, commandNames(spec))
		for _, name := range sortedCommands(spec) {
			fmt.Fprintf(stdout, "  %s %s\n", spec.Name, spec.Commands[name].Usage)
		}
		return 2
	}
}

func migrate(ctx context.Context, spec Spec, cfg Config, logger *slog.Logger) error {
	if err := pg.Migrate(ctx, cfg.DatabaseURL, cfg.Schema, spec.Migrations, logger); err != nil {
		return fmt.Errorf("service migrations: %w", err)
	}
	if err := outbox.Migrate(ctx, cfg.DatabaseURL, cfg.Schema, logger); err != nil {
		return fmt.Errorf("outbox migrations: %w", err)
	}
	for _, m := range spec.ExtraMigrations {
		if err := m(ctx, cfg.DatabaseURL, cfg.Schema, logger); err != nil {
			return fmt.Errorf("extra migrations: %w", err)
		}
	}
	return nil
}

// Instance is a started service.
type Instance struct {
	p       *Platform
	handler http.Handler
	ops     http.Handler
	done    chan struct{} // closed once the service has stopped
	err     error         // why it stopped; set before done closes
	stop    context.CancelFunc
}

// Addr is the address the HTTP server listens on (useful with port 0).
func (i *Instance) Addr() string { return i.p.listener.Addr().String() }

// OpsAddr is the address of the operations listener (OPS_HTTP_ADDR: admin,
// internal and metrics routes), or Addr when the service has none and one
// port serves everything.
func (i *Instance) OpsAddr() string {
	if i.p.opsListener == nil {
		return i.Addr()
	}
	return i.p.opsListener.Addr().String()
}

// Handler is the service's whole HTTP handler, exactly what its listener
// serves (client IP, request id, tracing, metrics and every route). A local
// gateway that runs services in its own process hands requests to it
// directly instead of proxying them over loopback.
func (i *Instance) Handler() http.Handler { return i.handler }

// OpsHandler is what the operations listener serves (its admin, internal
// and metrics routes, and the probes), or Handler when the service has no
// such listener. A local gateway sends its in-cluster (admin) rules here.
func (i *Instance) OpsHandler() http.Handler { return i.ops }

// Platform exposes the opened platform (pool, logger) to tests.
func (i *Instance) Platform() *Platform { return i.p }

// Wait blocks until the service stops and returns why. It may be called
// any number of times, from any goroutine.
func (i *Instance) Wait() error {
	<-i.done
	return i.err
}

// Stop shuts the service down gracefully and waits for it. Stopping a
// stopped service returns the same answer again.
func (i *Instance) Stop() error {
	i.stop()
	return i.Wait()
}

// Start opens everything, migrates, wires the service and serves in the
// background until ctx ends or Stop is called.
func Start(ctx context.Context, spec Spec, getenv func(string) string, stdout io.Writer, opts ...Option) (*Instance, error) {
	p, routes, err := wired(ctx, spec, getenv, stdout, true, opts)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			p.close(context.Background())
		}
	}()
	cfg := p.Config
	obs.LogConfig(p.Logger, p.Env.Values())
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.HTTPAddr, err)
	}
	p.listener = ln
	if cfg.OpsAddr != "" {
		ops, err := net.Listen("tcp", cfg.OpsAddr)
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("listen %s (OPS_HTTP_ADDR): %w", cfg.OpsAddr, err)
		}
		p.opsListener = ops
	}
	runCtx, cancel := context.WithCancel(ctx)
	handler, opsHandler := p.handlers(routes)
	inst := &Instance{p: p, handler: handler, ops: opsHandler, done: make(chan struct{}), stop: cancel}
	ok = true
	go func() {
		err := p.serve(runCtx, handler, opsHandler)
		p.close(context.Background())
		inst.err = err
		close(inst.done)
	}()
	p.Logger.Info("serving", "addr", ln.Addr().String(), "ops_addr", inst.OpsAddr())
	return inst, nil
}

// wired opens the platform and runs spec's Wire on it; nothing runs yet
// (runners start in serve). serving also migrates and creates the topics;
// `dead-letters` does neither: it needs the schema as it is and no broker.
// On error everything opened is closed.
func wired(ctx context.Context, spec Spec, getenv func(string) string, logTo io.Writer, serving bool, opts []Option) (*Platform, []Route, error) {
	if err := spec.validate(); err != nil {
		return nil, nil, err
	}
	if spec.Wire == nil {
		return nil, nil, fmt.Errorf("spec %s: Wire is required", spec.Name)
	}
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if o.now == nil {
		return nil, nil, errors.New("WithClock: nil clock")
	}
	env := obs.NewEnv(getenv)
	cfg := LoadConfig(spec.Name, env)
	if err := env.Err(); err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	p := &Platform{Name: spec.Name, Config: cfg, Env: env, Now: o.now, writeTimeout: spec.writeTimeout(), getenv: getenv, queryTracer: o.tracer, stopping: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			p.close(context.Background())
		}
	}()
	if err := p.open(ctx, spec, logTo, serving); err != nil {
		return nil, nil, err
	}
	routes, err := spec.Wire(ctx, p)
	if err != nil {
		return nil, nil, fmt.Errorf("wire %s: %w", spec.Name, err)
	}
	if err := env.Err(); err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	ok = true
	return p, routes, nil
}

func (p *Platform) open(ctx context.Context, spec Spec, stdout io.Writer, serving bool) error {
	cfg := p.Config
	p.Logger = obs.NewLogger(stdout, cfg.LogLevel,
		obs.WithContextAttr("request_id", httpkit.RequestIDFrom)).With("service", spec.Name)
	p.Registry = obs.NewRegistry()
	tp, prop, shutdown, err := obs.SetupTracing(ctx, spec.Name, p.getenv)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	p.Tracer, p.Propagator = tp, prop
	p.closers = append(p.closers, shutdown)
	if p.IPs, err = httpkit.NewIPResolver(cfg.TrustedProxies); err != nil {
		return fmt.Errorf("TRUSTED_PROXIES: %w", err)
	}
	if p.metrics, err = obs.NewHTTPMetrics(p.Registry); err != nil {
		return fmt.Errorf("http metrics: %w", err)
	}
	if serving {
		if err := migrate(ctx, spec, cfg, p.Logger); err != nil {
			return err
		}
	}
	p.Pool, err = pg.NewPool(ctx, cfg.DatabaseURL, pg.Options{
		Schema: cfg.Schema, MaxConns: int32(cfg.DBMaxConns), MaxConnIdleTime: cfg.DBMaxConnIdle, Tracing: true, AppName: spec.Name,
		// Services start on empty tables; a generic plan chosen then (a
		// sequential scan) would outlive the table's growth. Measured on the
		// click path: 60-90 µs of Postgres CPU per click with custom plans,
		// 200-300 µs when a cached generic plan scanned customers.
		// A service whose statements all plan well generic (the plan test
		// checks its generic plans too) saves the planning of every run:
		// Spec.PlanCacheMode "auto".
		PlanCacheMode: p.Env.String("DB_PLAN_CACHE_MODE", cmp.Or(spec.PlanCacheMode, "force_custom_plan")),
		QueryTracer:   p.queryTracer,
	})
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	p.closers = append(p.closers, func(context.Context) error { p.Pool.Close(); return nil })

	// Topics: created now if the broker answers, otherwise in the
	// background (kafka.go); consumers and the relay wait for them.
	if p.kafka, err = newKafkaMetrics(p.Registry); err != nil {
		return err
	}
	p.topics, p.topicsReady = topicSpecs(spec, cfg), make(chan struct{})
	if serving {
		firstCtx, cancelFirst := context.WithTimeout(ctx, firstEnsureTimeout)
		err = p.ensureTopics(firstCtx)
		cancelFirst()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("kafka topics: %w", ctx.Err())
			}
			p.logEnsureFailure(ctx, err)
		}
	}
	p.runners = append(p.runners, p.retryTopics, p.probeKafka)
	p.Writer = kafkakit.NewWriter(cfg.KafkaBrokers)
	p.closers = append(p.closers, func(context.Context) error { return p.Writer.Close() })
	relay, err := outbox.NewRelay(p.Pool, p.Writer, outbox.RelayConfig{
		Schema: cfg.Schema, Logger: p.Logger, Registerer: p.Registry,
		PollInterval: p.Env.Duration("OUTBOX_POLL_INTERVAL", spec.RelayPollInterval),
		DeleteSent:   p.Env.Bool("OUTBOX_DELETE_SENT", spec.RelayDeleteSent),
	})
	if err != nil {
		return fmt.Errorf("outbox relay: %w", err)
	}
	p.runners = append(p.runners, p.afterTopics(relay.Run))
	sweeper, err := inbox.NewSweeper(p.Pool, inbox.SweeperConfig{
		Schema: cfg.Schema, Retention: cfg.InboxRetention, Logger: p.Logger, Registerer: p.Registry,
	})
	if err != nil {
		return fmt.Errorf("inbox sweeper: %w", err)
	}
	p.runners = append(p.runners, sweeper.Run)
	// Readiness is Postgres only: every pod shares the broker, so a Kafka
	// outage would take them all out of their Services while HTTP (and the
	// outbox behind it) still works. kafka_up carries Kafka to the alerts.
	p.health = obs.NewHealth(
		obs.Check{Name: "postgres", Fn: func(ctx context.Context) error { return p.Pool.Ping(ctx) }},
	)
	return nil
}

// AddRunner runs fn beside the HTTP server until the service stops; an
// error from it stops the service.
func (p *Platform) AddRunner(fn func(context.Context) error) {
	p.runners = append(p.runners, fn)
}

// AddCloser registers fn to run when the service stops, after the HTTP
// server and every runner have finished.
func (p *Platform) AddCloser(fn func(context.Context) error) {
	p.closers = append(p.closers, fn)
}

// ConsumeOption adjusts a consumer.
type ConsumeOption func(*inbox.ConsumerConfig)

// BatchEvents applies up to n events already fetched in one transaction
// (see inbox.ConsumerConfig.BatchSize): for consumers of many small events
// whose handler may share a transaction.
func BatchEvents(n int) ConsumeOption {
	return func(c *inbox.ConsumerConfig) { c.BatchSize = n }
}

// BatchHandler applies a batch's new events in one call (see
// inbox.ConsumerConfig.BatchHandler); with BatchEvents.
func BatchHandler(h func(ctx context.Context, tx pgx.Tx, envs []*eventsv1.Envelope) error) ConsumeOption {
	return func(c *inbox.ConsumerConfig) { c.BatchHandler = h }
}

// SkipEvents acknowledges events for which skip is true without a
// transaction (see inbox.ConsumerConfig.Skip).
func SkipEvents(skip func(*eventsv1.Envelope) bool) ConsumeOption {
	return func(c *inbox.ConsumerConfig) { c.Skip = skip }
}

// Consume adds an inbox consumer of topic in consumer group group; each
// event's effect is applied by handler exactly once. The consumer joins its
// group once the service's topics exist.
func (p *Platform) Consume(topic, group string, handler inbox.Handler, opts ...ConsumeOption) error {
	dlq := kafkakit.NewWriter(p.Config.KafkaBrokers)
	cfg := inbox.ConsumerConfig{
		Name: group, Handler: handler, Logger: p.Logger, Registerer: p.Registry, DeadLetter: dlq,
		Propagator: p.Propagator, TracerProvider: p.Tracer,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if _, dup := p.consumers[group]; dup {
		_ = dlq.Close()
		return fmt.Errorf("consumer %s on %s: the service has a consumer of that name already", group, topic)
	}
	c, err := inbox.NewConsumerOpening(p.Pool, p.newReader(group, topic), cfg)
	if err != nil {
		_ = dlq.Close()
		return fmt.Errorf("consumer %s on %s: %w", group, topic, err)
	}
	if p.consumers == nil {
		p.consumers = map[string]*inbox.Consumer{}
	}
	p.consumers[group] = c
	p.runners = append(p.runners, p.afterTopics(c.Run))
	p.closers = append(p.closers, func(context.Context) error { return dlq.Close() })
	return nil
}

// handlers builds what the listeners serve: with an operations listener,
// the public handler has the public routes and the ops handler the admin
// and internal routes and /metrics (isOpsRoute); without one, both are one
// handler with every route. Both answer the probes, so the kubelet may
// check either port.
func (p *Platform) handlers(routes []Route) (public, ops http.Handler) {
	split := p.opsListener != nil
	pub, op := http.NewServeMux(), http.NewServeMux()
	if !split {
		op = pub
	}
	for _, r := range routes {
		mux := pub
		if isOpsRoute(r.Pattern) {
			mux = op
		}
		// Path and query bytes that are not UTF-8 are the client's
		// mistake, answered before the route (and its queries) runs; a
		// client closing its side does not cancel the route's work.
		h := httpkit.OutliveHangup(r.Handler, p.writeTimeout)
		check := httpkit.ValidURL
		if r.LimitChecksURL {
			check = httpkit.DeferURLCheck
		}
		mux.Handle(r.Pattern, p.metrics.Middleware(r.Name, check(h, r.Refuse)))
	}
	op.Handle("GET /metrics", obs.Handler(p.Registry))
	muxes := []*http.ServeMux{pub}
	if split {
		muxes = append(muxes, op)
	}
	for _, mux := range muxes {
		mux.Handle("GET /healthz", p.health.Healthz())
		mux.Handle("GET /readyz", p.health.Readyz())
		// An operations path on the public port gets this same answer as
		// any unknown path: it says nothing about what the other port has.
		mux.Handle("/", unmatched(mux))
	}
	wrap := func(mux *http.ServeMux) http.Handler {
		var h http.Handler = mux
		h = p.IPs.Middleware(h)
		h = httpkit.RequestID(h)
		return obs.HTTPTracing(h, p.Tracer, p.Propagator, p.Name)
	}
	public = wrap(pub)
	if !split {
		return public, public
	}
	return public, wrap(op)
}

// unmatched answers a request no route of mux took: 405 with Allow when
// mux serves the path with other methods (RFC 9110: a client calling a
// POST route with GET learns the route exists and how to call it), else
// 404. Only mux's own routes are looked at, so the public port still says
// nothing of the operations port's.
func unmatched(mux *http.ServeMux) http.Handler {
	methods := []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range methods {
			// The path is clean here (the mux redirects others before
			// any handler runs), so the probe matches a route or "/".
			probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
			if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 && !slices.Contains(allow, r.Method) {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			_ = httpkit.WritePlatformError(w, http.StatusMethodNotAllowed, "Method "+r.Method+" is not allowed for "+r.URL.Path)
			return
		}
		_ = httpkit.WritePlatformError(w, http.StatusNotFound, "No route for "+r.Method+" "+r.URL.Path)
	})
}

// serve runs the HTTP server and every background runner until ctx ends or
// one of them fails, then shuts the server down within the grace period.
func (p *Platform) serve(ctx context.Context, handler, opsHandler http.Handler) error {
	// Runners (the click writer, relay, consumers) outlive the HTTP server
	// during shutdown, so requests still in flight can finish their writes.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	newServer := func(h http.Handler) *http.Server {
		return &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       15 * time.Second,
			WriteTimeout:      p.writeTimeout,
			IdleTimeout:       120 * time.Second,
			ErrorLog:          slog.NewLogLogger(p.Logger.Handler(), slog.LevelWarn),
		}
	}
	type listening struct {
		name string
		srv  *http.Server
		ln   net.Listener
	}
	servers := []listening{{"http server", newServer(handler), p.listener}}
	if p.opsListener != nil {
		servers = append(servers, listening{"ops http server", newServer(opsHandler), p.opsListener})
	}
	errs := make(chan error, len(p.runners)+len(servers))
	var wg sync.WaitGroup
	wg.Add(len(p.runners))
	for _, s := range servers {
		go func() {
			if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("%s: %w", s.name, err)
				return
			}
			errs <- nil
		}()
	}
	for _, run := range p.runners {
		go func() {
			defer wg.Done()
			err := run(runCtx)
			if err != nil && runCtx.Err() == nil {
				errs <- err
				return
			}
			errs <- nil
		}()
	}
	var first error
	select {
	case <-ctx.Done():
	case first = <-errs:
	}
	p.health.Drain()
	close(p.stopping)
	shutdownCtx, stop := context.WithTimeout(context.Background(), p.Config.ShutdownGrace)
	defer stop()
	// Both servers drain at once, within the one grace period.
	shutdownErrs := make(chan error, len(servers))
	for _, s := range servers {
		go func() {
			if err := s.srv.Shutdown(shutdownCtx); err != nil {
				shutdownErrs <- fmt.Errorf("%s shutdown: %w", s.name, err)
				return
			}
			shutdownErrs <- nil
		}()
	}
	for range servers {
		if err := <-shutdownErrs; err != nil && first == nil {
			first = err
		}
	}
	cancel()
	// Runners hold pool connections and Kafka readers: let them finish
	// before anything is closed.
	wg.Wait()
	p.Logger.Info("stopped")
	return first
}

func (p *Platform) close(ctx context.Context) {
	for i := len(p.closers) - 1; i >= 0; i-- {
		if err := p.closers[i](ctx); err != nil && p.Logger != nil {
			p.Logger.Warn("close", "err", err)
		}
	}
	p.closers = nil
}

// Stopping is closed when the service begins to shut down, before the
// server waits (up to SHUTDOWN_GRACE) for the requests in flight. A
// request that waits on purpose (the sync barrier, a long poll) may wait
// longer than the grace; it ends its wait on this and answers, so the
// client hears "retry" instead of a dropped connection.
func (p *Platform) Stopping() <-chan struct{} { return p.stopping }

// Brokers is the configured Kafka bootstrap list, for logs and tests.
func (p *Platform) Brokers() string { return strings.Join(p.Config.KafkaBrokers, ",") }
