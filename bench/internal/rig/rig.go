// Package rig is what the benchmarks stand on: a throwaway database and an
// in-process broker, the stack's services started in this process as
// `make run` starts them (deploy/devstack/stack) behind the local gateway,
// the admin API client, and the small helpers every benchmark needs (a
// loopback server, the service log file, a CPU profile, settling the
// database between runs).
package rig

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	demoseed "github.com/svc-dev/svc/deploy/devstack/seed"
	svcstack "github.com/svc-dev/svc/deploy/devstack/stack"
	"github.com/svc-dev/svc/libs/pg/pgadmin"
	"github.com/svc-dev/svc/libs/platform"
)

// DefaultDatabaseURL is the Postgres server the benchmarks use when
// -database-url is not given: $TEST_DATABASE_URL, else the local one.
func DefaultDatabaseURL(getenv func(string) string) string {
	if u := getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@localhost:5432/postgres?sslmode=disable"
}

// Stack is one benchmark's world: a database of its own, a broker, and
// once Start ran, the services and the gateway.
type Stack struct {
	DSN        string
	Brokers    []string
	AdminToken string
	SessionKey ed25519.PrivateKey // signs dashboard sessions; the services get its public half
	Services   *svcstack.Stack    // nil until Start
	Gateway    string             // host:port of the gateway, once Start ran
	closers    []func()
	keep       bool
}

// Open creates a uniquely named database (name is its prefix) on the
// server of adminDSN and starts an in-process Kafka broker.
func Open(ctx context.Context, adminDSN, name string) (_ *Stack, err error) {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	s := &Stack{AdminToken: RandomHex(16), SessionKey: key}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	dsn, drop, err := pgadmin.CreateDatabase(ctx, adminDSN, pgadmin.ScratchName(name))
	if err != nil {
		return nil, err
	}
	s.Defer(func() {
		if !s.keep {
			drop()
		}
	})
	s.DSN = dsn
	broker, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, fmt.Errorf("start the in-process kafka broker: %w", err)
	}
	s.Defer(broker.Close)
	s.Brokers = broker.ListenAddrs()
	return s, nil
}

// Env is the environment the services read: the stack's database,
// broker, tokens and session key, loopback as the trusted proxy, then
// extra over those; anything else (the services' tuning knobs) passes
// through from this process's environment.
func (s *Stack) Env(extra map[string]string) func(string) string {
	env := map[string]string{
		"DATABASE_URL":  s.DSN,
		"KAFKA_BROKERS": strings.Join(s.Brokers, ","),
		// One in-process broker: topics can have one replica only.
		"KAFKA_REPLICATION_FACTOR":  "1",
		"KAFKA_MIN_INSYNC_REPLICAS": "1",
		"ADMIN_TOKEN":               s.AdminToken,
		// Commissions asks tracking for the attribution of each sale on
		// its internal route, authenticated with this token.
		"INTERNAL_TOKEN":      RandomHex(16),
		"SESSION_SIGNING_KEY": base64.StdEncoding.EncodeToString(s.SessionKey.Seed()),
		"SESSION_PUBLIC_KEY":  base64.StdEncoding.EncodeToString(s.SessionKey.Public().(ed25519.PublicKey)),
		"TRUSTED_PROXIES":     "127.0.0.1/32,::1/128",
	}
	for k, v := range extra {
		env[k] = v
	}
	return func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
}

// Start starts the services named in only (all when empty) on env, their
// logs to logs, and the gateway of `make run` in front of them.
func (s *Stack) Start(ctx context.Context, only []string, env func(string) string, logs io.Writer, opts ...platform.Option) error {
	services, err := svcstack.Start(ctx, svcstack.Options{Env: env, Logs: func(string) io.Writer { return logs }, Only: only, Platform: opts})
	if err != nil {
		return fmt.Errorf("start the stack: %w", err)
	}
	s.Defer(func() { _ = services.Close() })
	s.Services = services
	addr, stop, err := Serve(gateway.New(services.Handlers()))
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	s.Defer(stop)
	s.Gateway = addr
	return nil
}

// Admin is a client of the accounts admin API through the gateway.
func (s *Stack) Admin() *demoseed.Client {
	return &demoseed.Client{BaseURL: "http://" + s.Gateway, AdminToken: s.AdminToken, HTTP: &http.Client{Timeout: 60 * time.Second}}
}

// Defer has Close call f, in reverse order of the calls.
func (s *Stack) Defer(f func()) { s.closers = append(s.closers, f) }

// Keep leaves the database in place at Close (for EXPLAIN afterwards).
func (s *Stack) Keep() { s.keep = true }

// Close stops what Start and Open started and drops the database (unless
// kept), in reverse order of creation.
func (s *Stack) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// Serve serves h on a fresh loopback port until stop is called.
func Serve(h http.Handler) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// OpenLog opens path for the services' logs, or a fresh file named after
// prefix in the temp directory when path is empty, and returns its
// absolute name for the report.
func OpenLog(path, prefix string) (*os.File, string, error) {
	if path == "" {
		f, err := os.CreateTemp("", prefix+"-*.log")
		if err != nil {
			return nil, "", fmt.Errorf("service log: %w", err)
		}
		return f, f.Name(), nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("service log: %w", err)
	}
	abs, _ := filepath.Abs(path)
	return f, abs, nil
}

// StartProfile starts a CPU profile of this process into path ("" does
// nothing) and returns what stops it.
func StartProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// OpenPool opens a pool of conns connections to dsn named app, with the
// run-time settings params, and checks it connects.
func OpenPool(ctx context.Context, dsn string, conns int32, app string, params map[string]string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	cfg.MaxConns = conns
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool %s: %w", app, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open pool %s: %w", app, err)
	}
	return pool, nil
}

// Settle waits (up to a minute) for the outboxes named (schema.outbox) to
// drain, then vacuums and checkpoints the database, so a run does not pay
// for the previous one's aftermath (events still to publish, autovacuum of
// the rows it wrote, dirty buffers): without it, whichever run comes second
// measured slower. Best effort: CHECKPOINT needs a superuser or
// pg_checkpoint.
func Settle(ctx context.Context, db *pgxpool.Pool, logger *slog.Logger, outboxes ...string) {
	start := time.Now()
	unsentSQL := "SELECT 0"
	for _, t := range outboxes {
		unsentSQL += fmt.Sprintf(" + CASE WHEN to_regclass('%[1]s') IS NULL THEN 0 ELSE (SELECT count(*) FROM %[1]s WHERE sent_at IS NULL) END", t)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var unsent int64
		err := db.QueryRow(ctx, unsentSQL).Scan(&unsent)
		if err != nil || unsent == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			if unsent > 0 {
				logger.Warn("outboxes not drained before the next run", "unsent", unsent)
			}
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, err := db.Exec(ctx, "VACUUM (ANALYZE)"); err != nil {
		logger.Warn("vacuum before the next run", "err", err)
	}
	if _, err := db.Exec(ctx, "CHECKPOINT"); err != nil {
		logger.Warn("checkpoint before the next run", "err", err)
	}
	logger.Info("database settled", "took", time.Since(start).Round(time.Millisecond))
}

// ClickID reads the click id of the click route's success answer
// `{success: true, click_id, partner_code, cookie_window_days}`.
func ClickID(answer []byte) (string, bool) {
	var a struct {
		Success bool   `json:"success"`
		ClickID string `json:"click_id"`
	}
	if err := json.Unmarshal(answer, &a); err != nil || !a.Success || a.ClickID == "" {
		return "", false
	}
	return a.ClickID, true
}

// RandomHex is n random bytes in hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
