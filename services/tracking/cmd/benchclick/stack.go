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
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"

	svcstack "github.com/svc-dev/svc/deploy/devstack/stack"
	"github.com/svc-dev/svc/libs/platform"
	accounts "github.com/svc-dev/svc/services/accounts/server"
	tracking "github.com/svc-dev/svc/services/tracking/server"

	"github.com/svc-dev/svc/libs/pg/pgadmin"
)

// stack is the services of the stack (accounts and tracking) running in
// this process on one fresh database and an in-process broker, started as
// `make run` and the cross-service tests start them.
type stack struct {
	DSN        string
	AdminToken string
	Services   *svcstack.Stack
	Accounts   *platform.Instance
	Tracking   *platform.Instance
	closers    []func()
}

// Close stops the services, the broker and drops the database, in reverse
// order of creation.
func (s *stack) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// startStack creates a uniquely named database on the server of adminDSN,
// starts a kfake broker and the services with pools of dbMaxConns. Logs go
// to logs.
func startStack(ctx context.Context, adminDSN string, logs io.Writer, logLevel string, dbMaxConns int) (_ *stack, err error) {
	s := &stack{AdminToken: randomHex(16)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	dsn, drop, err := pgadmin.CreateDatabase(ctx, adminDSN, pgadmin.ScratchName("benchclick"))
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
		"SESSION_SIGNING_KEY":       base64.StdEncoding.EncodeToString(seed),
		"SESSION_PUBLIC_KEY":        base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)),
		"TRUSTED_PROXIES":           "127.0.0.1/32,::1/128",
		"LOG_LEVEL":                 logLevel,
		"DB_MAX_CONNS":              strconv.Itoa(dbMaxConns),
		// The seed writes a few hundred catalog rows in a burst; the
		// default admin limit (1200/min) would be enough, but a repeated
		// run in the same minute must not trip it.
		"ADMIN_RATE_LIMIT": "100000",
	}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		// Tuning knobs of the services (CLICK_WRITERS, ...) pass through.
		return os.Getenv(k)
	}
	// The click route's service, and accounts for the seed, as the README
	// says: commissions' and analytics' consumers of the clicks would
	// spend the same cores and the same Postgres on the run.
	services, err := svcstack.Start(ctx, svcstack.Options{Env: getenv, Logs: func(string) io.Writer { return logs },
		Only: []string{"tracking", "accounts"}})
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { _ = services.Close() })
	s.Services = services
	s.Accounts, s.Tracking = services.Instance(accounts.Name), services.Instance(tracking.Name)
	return s, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

// catalog is what the seed created for the benchmark.
type catalog struct {
	ProgramID int64
	Codes     []string
	Seq       int64
}

// admin calls the accounts admin API and remembers the highest catalog
// sequence its writes produced, for the sync barrier.
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

// seedCatalog creates one browser-allowed program whose allowed origins
// include origin, partners approved partners and links referral links spread
// evenly over them, then waits on the catalog sync barrier so tracking's
// replica has every link before the first click.
func seedCatalog(ctx context.Context, a *admin, origin string, partners, links int) (catalog, error) {
	var id struct {
		ID int64 `json:"id"`
	}
	if err := a.call(ctx, http.MethodPost, "/admin/v1/advertisers", map[string]any{"name": "Bench Brand", "email": "owner@bench-brand.example"}, &id); err != nil {
		return catalog{}, err
	}
	prog := map[string]any{
		"advertiser_id":         id.ID,
		"name":                  "Bench Program",
		"domain":                "bench-brand.example",
		"commission_type":       "percent",
		"commission_rate":       20,
		"cookie_duration":       30,
		"lead_auth_policy":      "browser_allowed",
		"allowed_origins":       []string{origin},
		"duration_months":       12,
		"payment_tracking_mode": "s2s",
	}
	if err := a.call(ctx, http.MethodPost, "/admin/v1/programs", prog, &id); err != nil {
		return catalog{}, err
	}
	c := catalog{ProgramID: id.ID}
	pp := "/admin/v1/programs/" + strconv.FormatInt(c.ProgramID, 10)
	partnerIDs := make([]int64, partners)
	for i := range partnerIDs {
		body := map[string]any{"name": fmt.Sprintf("Partner %02d", i+1), "email": fmt.Sprintf("partner%02d@bench-brand.example", i+1)}
		if err := a.call(ctx, http.MethodPost, "/admin/v1/partners", body, &id); err != nil {
			return catalog{}, err
		}
		partnerIDs[i] = id.ID
		if err := a.call(ctx, http.MethodPost, pp+"/partners", map[string]any{"partner_id": id.ID, "approved": true}, nil); err != nil {
			return catalog{}, err
		}
	}
	for i := range links {
		code := fmt.Sprintf("p%02d-link%03d", i%partners+1, i+1)
		if err := a.call(ctx, http.MethodPost, pp+"/links", map[string]any{"partner_id": partnerIDs[i%partners], "code": code, "active": true}, nil); err != nil {
			return catalog{}, err
		}
		c.Codes = append(c.Codes, code)
	}
	if err := a.call(ctx, http.MethodGet, fmt.Sprintf("/admin/v1/catalog/sync?seq=%d&timeout=30s", a.seq), nil, nil); err != nil {
		return catalog{}, fmt.Errorf("wait for the catalog to reach tracking: %w", err)
	}
	c.Seq = a.seq
	return c, nil
}
