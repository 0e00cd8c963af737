package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	svcstack "github.com/svc-dev/svc/deploy/devstack/stack"

	"github.com/svc-dev/svc/libs/pg/pgadmin"
)

// benchRateLimit replaces the per-minute limits of the routes the benchmark
// drives: the sale+refund limit (120/min per API key, one bucket for both)
// would otherwise answer 429 after the first two seconds.
const benchRateLimit = "100000000"

var rateLimitEnv = []string{
	"TRACK_SALE_RATE_LIMIT",  // sale + refund per API key (tracking and commissions read the same name)
	"TRACK_CLICK_RATE_LIMIT", // customer creation (not timed); each click also comes from its own address
	"ADMIN_RATE_LIMIT",       // the seed; a repeated run in the same minute
}

// stack is the whole stack (tracking, commissions, accounts) running in this
// process on one fresh database and an in-process broker, started with
// deploy/devstack/stack as `make run` and the cross-service tests start it,
// behind the local gateway.
type stack struct {
	DSN        string
	AdminToken string
	Services   *svcstack.Stack
	Gateway    string // host:port of the gateway
	closers    []func()
}

// Close stops the gateway, the services, the broker and drops the database,
// in reverse order of creation.
func (s *stack) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// startStack creates a uniquely named database on the server of adminDSN,
// starts a kfake broker, the services with pools of dbMaxConns and the
// gateway. Service logs go to logs.
func startStack(ctx context.Context, adminDSN string, logs io.Writer, logLevel string, dbMaxConns int) (_ *stack, err error) {
	s := &stack{AdminToken: randomHex(16)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	dsn, drop, err := pgadmin.CreateDatabase(ctx, adminDSN, pgadmin.ScratchName("benchsale"))
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, drop)
	s.DSN = dsn

	broker, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, fmt.Errorf("start the in-process kafka broker: %w", err)
	}
	s.closers = append(s.closers, broker.Close)

	seed := make([]byte, ed25519.SeedSize)
	_, _ = rand.Read(seed) // crypto/rand.Read never fails on supported platforms
	env := map[string]string{
		"DATABASE_URL":  dsn,
		"KAFKA_BROKERS": strings.Join(broker.ListenAddrs(), ","),
		// One in-process broker: topics can have one replica only.
		"KAFKA_REPLICATION_FACTOR":  "1",
		"KAFKA_MIN_INSYNC_REPLICAS": "1",
		"ADMIN_TOKEN":               s.AdminToken,
		// Commissions asks tracking for the attribution of each sale on
		// its internal route, authenticated with this token.
		"INTERNAL_TOKEN":      randomHex(16),
		"SESSION_SIGNING_KEY": base64.StdEncoding.EncodeToString(seed),
		"SESSION_PUBLIC_KEY":  base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)),
		"TRUSTED_PROXIES":     "127.0.0.1/32,::1/128",
		"LOG_LEVEL":           logLevel,
		"DB_MAX_CONNS":        strconv.Itoa(dbMaxConns),
	}
	for _, k := range rateLimitEnv {
		env[k] = benchRateLimit
	}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		// Tuning knobs of the services pass through.
		return os.Getenv(k)
	}
	// The services a sale and a refund go through, and accounts for the
	// seed. Not analytics: a consumer of the ledger, it would spend the
	// same two cores counting every sale and commission, measuring its
	// consumers instead of the routes (the sale runs of before analytics
	// had these three only).
	services, err := svcstack.Start(ctx, svcstack.Options{Env: getenv, Logs: func(string) io.Writer { return logs },
		Only: []string{"tracking", "commissions", "accounts"}})
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { _ = services.Close() })
	s.Services = services

	addr, stop, err := serveHTTP(gateway.New(services.Handlers()))
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	s.closers = append(s.closers, stop)
	s.Gateway = addr
	return s, nil
}

// serveHTTP serves h on a loopback port until stop is called.
func serveHTTP(h http.Handler) (addr string, stop func(), err error) {
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

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

// catalog is what the seed created for the benchmark.
type catalog struct {
	ProgramID int64
	Codes     []string // one referral link per partner
	APIKey    string   // the program's live API key (never printed)
	Seq       int64
}

// admin calls the accounts admin API through the gateway and remembers the
// highest catalog sequence its writes produced, for the sync barrier.
type admin struct {
	base, token string
	http        *http.Client
	seq         int64
}

func (a *admin) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: encode: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(raw))
	}
	if v := resp.Header.Get("X-Catalog-Seq"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > a.seq {
			a.seq = n
		}
	}
	if out == nil {
		return nil
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("%s %s: decode data: %w", method, path, err)
	}
	return nil
}

// seedCatalog creates an advertiser, a program paying 10 % with no hold,
// partners approved partners with one referral link each and a live
// program API key, then waits on the catalog sync barrier so tracking's and
// commissions' replicas know the links and the key before the first
// request.
func seedCatalog(ctx context.Context, a *admin, partners, holdDays int) (catalog, error) {
	var id struct {
		ID int64 `json:"id"`
	}
	if err := a.call(ctx, http.MethodPost, "/admin/v1/advertisers", map[string]any{"name": "Bench Brand", "email": "owner@bench-brand.example"}, &id); err != nil {
		return catalog{}, err
	}
	prog := map[string]any{
		"advertiser_id":         id.ID,
		"name":                  "Bench Sale Program",
		"domain":                "brand.example",
		"commission_type":       "percent",
		"commission_rate":       10,
		"hold_days":             holdDays,
		"cookie_duration":       30,
		"duration_months":       12,
		"payment_tracking_mode": "s2s",
	}
	if err := a.call(ctx, http.MethodPost, "/admin/v1/programs", prog, &id); err != nil {
		return catalog{}, err
	}
	c := catalog{ProgramID: id.ID}
	pp := "/admin/v1/programs/" + strconv.FormatInt(c.ProgramID, 10)
	for i := range partners {
		body := map[string]any{"name": fmt.Sprintf("Bench Partner %02d", i+1), "email": fmt.Sprintf("partner%02d@bench-brand.example", i+1)}
		if err := a.call(ctx, http.MethodPost, "/admin/v1/partners", body, &id); err != nil {
			return catalog{}, err
		}
		if err := a.call(ctx, http.MethodPost, pp+"/partners", map[string]any{"partner_id": id.ID, "approved": true}, nil); err != nil {
			return catalog{}, err
		}
		code := fmt.Sprintf("benchsale%02d", i+1)
		if err := a.call(ctx, http.MethodPost, pp+"/links", map[string]any{"partner_id": id.ID, "code": code, "active": true}, nil); err != nil {
			return catalog{}, err
		}
		c.Codes = append(c.Codes, code)
	}
	var key struct {
		Key string `json:"key"`
	}
	if err := a.call(ctx, http.MethodPost, pp+"/keys", map[string]any{"test": false}, &key); err != nil {
		return catalog{}, err
	}
	if key.Key == "" {
		return catalog{}, fmt.Errorf("POST %s/keys: no key in the answer", pp)
	}
	c.APIKey = key.Key
	if err := a.call(ctx, http.MethodGet, fmt.Sprintf("/admin/v1/catalog/sync?seq=%d&timeout=30s", a.seq), nil, nil); err != nil {
		return catalog{}, fmt.Errorf("wait for the catalog to reach the replicas: %w", err)
	}
	c.Seq = a.seq
	return c, nil
}
