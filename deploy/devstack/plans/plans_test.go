package plans_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

const (
	hookSecret = "whsec_plans"
	origin     = "https://shop.plans.example"
)

// TestHotStatementsUseIndexes: every statement the services run while
// the click, lead, visit, config, sale, refund, processor webhook, admin
// sale and commission reads, dashboard and console routes (webhooks' and
// `svc listen`'s among them) are driven (and while the consumers apply
// their events and the webhooks dispatcher delivers) is planned, with the
// arguments it ran with, on tables of bulkRows rows; none may read a large
// table whole.
func TestHotStatementsUseIndexes(t *testing.T) {
	t.Parallel()
	start := time.Now()
	rec := newRecorder()
	env := platformtest.With(platformtest.With(platformtest.Env(t), stacktest.Defaults()), map[string]string{
		"DB_MAX_CONNS":             "4",
		"PROCESSOR_WEBHOOK_SECRET": hookSecret,
		"TRACK_CLICK_RATE_LIMIT":   "1000000",
		"TRACK_LEAD_RATE_LIMIT":    "1000000",
		"TRACK_SALE_RATE_LIMIT":    "1000000",
		"FAILED_AUTH_RATE_LIMIT":   "1000000",
		"ADMIN_RATE_LIMIT":         "1000000",
		"SETTINGS_RATE_LIMIT":      "1000000",
		// Webhooks: a retried delivery goes at the next poll; an endpoint
		// still failing a millisecond after its first failure is disabled
		// (so the disabling statements run).
		"DELIVERY_POLL_INTERVAL": "100ms",
		"DISABLE_AFTER":          "1ms",
	})
	ctx := context.Background()
	if err := prepare(ctx, env); err != nil {
		t.Fatal(err)
	}
	loaded := time.Now()
	st, err := stack.Start(ctx, stack.Options{
		Env:      func(k string) string { return env[k] },
		Platform: []platform.Option{platform.WithQueryTracer(rec)},
	})
	if err != nil {
		t.Fatalf("start the stack: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	gw := httptest.NewServer(gateway.New(st.Handlers()))
	t.Cleanup(gw.Close)
	started := time.Now()

	c := &client{t: t, gw: gw.URL, http: &http.Client{Timeout: 30 * time.Second}, rec: rec}
	c.drive()
	driven := time.Now()

	checked := check(t, ctx, env["DATABASE_URL"], rec.statements())
	t.Logf("migrations and load %s, stack %s, routes %s, %d plans checked in %s",
		loaded.Sub(start).Round(time.Millisecond), started.Sub(loaded).Round(time.Millisecond), driven.Sub(started).Round(time.Millisecond),
		checked, time.Since(driven).Round(time.Millisecond))
}

// hotSchemas are the schemas checked: the services of the routes driven.
// accounts' statements are recorded only from the console's routes on
// (recorder.console), not the admin calls that make the test's catalog.
var hotSchemas = map[string]bool{"tracking": true, "commissions": true, "analytics": true, "accounts": true, "webhooks": true}

// genericSchemas are the services whose pools plan generic
// (platform.Spec.PlanCacheMode "auto"): their statements are checked under
// the generic plan as well.
var genericSchemas = map[string]bool{"commissions": true, "tracking": true}

// check EXPLAINs each recorded statement in its service's schema with the
// arguments it ran with and fails on each plan that reads a large table
// whole. It returns how many plans it checked.
func check(t *testing.T, ctx context.Context, dsn string, stmts []statement) int {
	t.Helper()
	conns := map[string]*pgx.Conn{}
	generic := map[string]*pgx.Conn{}
	cats := map[string]catalog{}
	n := 0
	per := map[string]int{}
	for _, s := range stmts {
		if !explainable(s.sql) || !hotSchemas[s.schema] {
			continue
		}
		per[s.schema]++
		conn, ok := conns[s.schema]
		if !ok {
			cfg, err := pgx.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			cfg.RuntimeParams["search_path"] = s.schema
			// As the services plan (platform: DB_PLAN_CACHE_MODE).
			cfg.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
			if conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			conns[s.schema] = conn
			if cats[s.schema], err = loadCatalog(ctx, conn, s.schema); err != nil {
				t.Fatal(err)
			}
			if genericSchemas[s.schema] {
				cfg = cfg.Copy()
				cfg.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
				cfg.RuntimeParams["enable_seqscan"] = "off" // as pg.PipeOptions.GenericPlans runs them
				g, err := pgx.ConnectConfig(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close(ctx)
				generic[s.schema] = g
			}
		}
		for _, args := range s.args {
			n++
			plan, err := explain(ctx, conn, s.sql, args)
			if err != nil {
				t.Errorf("%s: EXPLAIN %s: %v", s.schema, oneLine(s.sql), err)
				continue
			}
			if os.Getenv("PLANS_REPORT") != "" {
				t.Logf("%s: %s\n\t%s", s.schema, oneLine(s.sql), strings.Join(reads(plan), "; "))
			}
			if ps := cats[s.schema].problems(plan, s.sql); len(ps) > 0 {
				t.Errorf("%s: %s\n\tin: %s\n\targs: %v", s.schema, strings.Join(ps, "; "), oneLine(s.sql), args)
			}
			if g := generic[s.schema]; g != nil {
				n++
				plan, err := explainGeneric(ctx, g, s.sql, args)
				if err != nil {
					t.Errorf("%s: EXPLAIN EXECUTE (generic) %s: %v", s.schema, oneLine(s.sql), err)
					continue
				}
				if ps := cats[s.schema].problems(plan, s.sql); len(ps) > 0 {
					t.Errorf("%s (generic plan): %s\n\tin: %s\n\targs: %v", s.schema, strings.Join(ps, "; "), oneLine(s.sql), args)
				}
			}
		}
	}
	for schema := range hotSchemas {
		if per[schema] == 0 {
			t.Errorf("no statement of schema %s was recorded: is the query tracer on its pool?", schema)
		}
	}
	return n
}

// client drives the routes through the gateway as a brand, a browser, the
// processor, a dashboard user and a developer's `svc listen` would.
type client struct {
	t    *testing.T
	gw   string
	http *http.Client
	seq  atomic.Int64
	cat  int64 // highest X-Catalog-Seq seen
	rec  *recorder
}

type reply struct {
	status int
	raw    string
	body   map[string]any
	header http.Header
}

func (c *client) uniq() string { return strconv.FormatInt(c.seq.Add(1), 10) }

func (c *client) do(method, path string, body any, headers ...string) reply {
	c.t.Helper()
	var in io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		in = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		in = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.gw+path, in)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, raw: string(raw), header: resp.Header}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// want sends a request that must answer status.
func (c *client) want(status int, method, path string, body any, headers ...string) reply {
	c.t.Helper()
	r := c.do(method, path, body, headers...)
	if r.status != status {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.raw, status)
	}
	return r
}

// admin sends an admin request that must answer 2xx and returns its
// data's id (0 when none).
func (c *client) admin(method, path string, body any) int64 {
	c.t.Helper()
	r := c.do(method, path, body, "Authorization", "Bearer "+stacktest.AdminToken)
	if r.status < 200 || r.status > 299 {
		c.t.Fatalf("%s %s: %d %s", method, path, r.status, r.raw)
	}
	if n, err := strconv.ParseInt(r.header.Get("X-Catalog-Seq"), 10, 64); err == nil {
		c.cat = max(c.cat, n)
	}
	d, _ := r.body["data"].(map[string]any)
	id, _ := d["id"].(float64)
	return int64(id)
}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

// world is the catalog the routes run against: a program whose browser
// leads are allowed from origin, connected to a processor account, with
// an owner, an approved partner with a link, a live and a test key.
type world struct {
	program, owner, partner int64
	code, live, test        string
	account                 string
}

func (c *client) world() world {
	u := c.uniq()
	var w world
	adv := c.admin("POST", "/admin/v1/advertisers", map[string]any{"name": "Brand " + u, "email": "brand" + u + "@brand.example"})
	w.owner = c.admin("POST", "/admin/v1/users", map[string]any{"email": "owner" + u + "@brand.example", "name": "Owner", "advertiser_id": adv})
	w.program = c.admin("POST", "/admin/v1/programs", map[string]any{"advertiser_id": adv, "name": "Program " + u, "domain": "brand.example",
		"commission_type": "percent", "commission_rate": 10, "hold_days": 0, "currency": "USD",
		"lead_auth_policy": "browser_allowed", "allowed_origins": []string{origin}})
	c.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/members", w.program), map[string]any{"user_id": w.owner, "active": true,
		"permissions": []string{"tracking:read", "tracking:write"}})
	w.partner = c.admin("POST", "/admin/v1/partners", map[string]any{"name": "Partner " + u, "email": "partner" + u + "@partners.example"})
	c.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", w.program), map[string]any{"partner_id": w.partner, "approved": true})
	w.code = "C" + u
	c.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/links", w.program), map[string]any{"partner_id": w.partner, "code": w.code, "active": true})
	pad := func(s string) string { return s + strings.Repeat("0", 43-len(s)) }
	w.live, w.test = "svc_live_"+pad("live"+u), "svc_test_"+pad("test"+u)
	c.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/keys", w.program), map[string]any{"key": w.live, "test": false})
	c.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/keys", w.program), map[string]any{"key": w.test, "test": true})
	w.account = "acct_plans" + u
	c.admin("PATCH", fmt.Sprintf("/admin/v1/programs/%d", w.program), map[string]any{
		"processor_connection": map[string]any{"status": "connected", "account_id": w.account}})
	c.admin("GET", fmt.Sprintf("/admin/v1/catalog/sync?seq=%d&timeout=10s", c.cat), nil)
	return w
}

func (c *client) click(w world) string {
	c.t.Helper()
	r := c.want(200, "POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://brand.example/landing?via=" + w.code + "&utm_source=news"})
	cid, _ := r.body["click_id"].(string)
	if cid == "" {
		c.t.Fatalf("click: %s", r.raw)
	}
	return cid
}

// drive runs every hot route at least once, then waits for the
// consumers to have applied what they caused.
func (c *client) drive() {
	t := c.t
	w := c.world()
	browser := []string{"Origin", origin}
	issuer, err := session.NewIssuer(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize)), "svc-accounts", time.Hour, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	owner := bearer(mustIssue(t, issuer, w.owner))

	// Webhooks: the brand's endpoints and a listener, before the traffic
	// whose events they receive.
	hooks := c.webhooksStart(w, owner)

	// Tracking: config, clicks (new, returning, test), visit, leads
	// (settled by key, provisional from the browser, test).
	c.want(200, "GET", fmt.Sprintf("/api/v1/track/config?program_id=%d", w.program), nil, browser...)
	c1, c2, c3, c4, c5 := c.click(w), c.click(w), c.click(w), c.click(w), c.click(w)
	c.want(200, "POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://brand.example/?via=" + w.code, "existing_click_id": c1})
	c.want(200, "POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://brand.example/?via=" + w.code,
		"additional_data": map[string]any{"test_mode": true}})
	c.want(200, "POST", "/api/v1/track/visit", map[string]any{"program_id": fmt.Sprint(w.program), "page_url": "https://brand.example/pricing", "click_id": c1}, browser...)
	key1 := "k1-" + c.uniq()
	c.want(200, "POST", "/api/v1/track/lead", map[string]any{"click_id": c1, "customer_key": key1}, bearer(w.live)...)
	c.want(200, "POST", "/api/v1/track/lead", map[string]any{"click_id": c2, "customer_key": "k2-" + c.uniq()}, browser...)
	c.want(200, "POST", "/api/v1/track/lead", map[string]any{"click_id": c3, "additional_data": map[string]any{"test_mode": true}}, bearer(w.test)...)

	// Commissions: sales (by click id, by customer key, a test sale),
	// refunds (partial with an id, the rest), the admin reads.
	txn1, txn2, txnTest := "txn_"+c.uniq(), "txn_"+c.uniq(), "txn_"+c.uniq()
	sale := c.want(200, "POST", "/api/v1/track/sale", map[string]any{"transaction_id": txn1, "amount_cents": 5000, "currency": "USD", "click_id": c1}, bearer(w.live)...)
	c.want(200, "POST", "/api/v1/track/sale", map[string]any{"transaction_id": txn2, "amount_cents": 2000, "currency": "EUR", "click_id": c2}, bearer(w.live)...)
	c.want(200, "POST", "/api/v1/track/sale", map[string]any{"transaction_id": "txn_" + c.uniq(), "amount_cents": 1500, "currency": "USD", "customer_key": key1}, bearer(w.live)...)
	c.want(409, "POST", "/api/v1/track/sale", map[string]any{"transaction_id": txn1, "amount_cents": 5000, "currency": "USD", "click_id": c1}, bearer(w.live)...) // a duplicate
	c.want(200, "POST", "/api/v1/track/sale", map[string]any{"transaction_id": txnTest, "amount_cents": 700, "currency": "USD", "click_id": c3}, bearer(w.test)...)
	c.want(200, "POST", "/api/v1/track/refund", map[string]any{"transaction_id": txn1, "refund_amount_cents": 1000, "refund_id": "r_" + c.uniq()}, bearer(w.live)...)
	c.want(200, "POST", "/api/v1/track/refund", map[string]any{"transaction_id": txn1}, bearer(w.live)...)
	c.want(200, "POST", "/api/v1/track/refund", map[string]any{"transaction_id": txnTest, "refund_amount_cents": 100}, bearer(w.test)...)
	c.want(404, "POST", "/api/v1/track/refund", map[string]any{"transaction_id": "txn_missing_" + c.uniq()}, bearer(w.live)...)
	com, _ := sale.body["commission"].(map[string]any)
	comID, _ := com["id"].(float64)
	c.admin("GET", "/admin/v1/sales/"+txn1, nil)
	c.admin("GET", "/admin/v1/sales/"+txnTest+"?test=true", nil)
	c.admin("GET", fmt.Sprintf("/admin/v1/commissions/%d", int64(comID)), nil)
	c.admin("GET", fmt.Sprintf("/admin/v1/partners/%d/balances", w.partner), nil)
	c.admin("GET", fmt.Sprintf("/admin/v1/partners/%d/withdrawals", w.partner), nil)
	c.admin("GET", fmt.Sprintf("/admin/v1/partners/%d/notifications", w.partner), nil)
	c.admin("POST", "/admin/v1/commissions/approve-due", nil)

	// The processor: a refund that comes before its payment (kept), the
	// checkout that records the payment (and applies the refund), a
	// refund, the cumulative refund, a dispute opened and closed.
	pi, ch := "pi_"+c.uniq(), "ch_"+c.uniq()
	c.hook("refund_created.json", w.account, map[string]any{"id": "re_" + c.uniq(), "charge": ch, "payment_intent": pi, "amount": 500}, "awaiting_payment")
	checkout := c.event("checkout_session_completed_payment.json", w.account, map[string]any{
		"id": "cs_" + c.uniq(), "metadata": map[string]any{"svc_click_id": c4}, "payment_intent": pi, "customer": "cus_" + c.uniq(), "amount_total": 9000})
	c.deliver(checkout, "sale_recorded")
	c.hook("refund_created.json", w.account, map[string]any{"id": "re_" + c.uniq(), "charge": ch, "payment_intent": pi, "amount": 1000}, "")
	c.hook("charge_refunded.json", w.account, map[string]any{"id": ch, "payment_intent": pi, "amount_refunded": 2000}, "")
	dp := "dp_" + c.uniq()
	c.hook("charge_dispute_created.json", w.account, map[string]any{"id": dp, "payment_intent": pi, "charge": ch}, "dispute_opened")
	c.hook("charge_dispute_closed.json", w.account, map[string]any{"id": dp, "payment_intent": pi, "charge": ch, "status": "won"}, "")
	c.deliver(checkout, "") // a redelivery
	// A payment found by none of its metadata, email and processor
	// customer, but by its client reference (every lookup runs).
	c.hook("checkout_session_completed_payment.json", w.account, map[string]any{
		"id": "cs_" + c.uniq(), "metadata": map[string]any{}, "client_reference_id": c5, "payment_intent": "pi_" + c.uniq(),
		"customer": "cus_" + c.uniq(), "customer_details": map[string]any{"email": "buyer" + c.uniq() + "@example.com"}}, "sale_recorded")

	// The dashboard, once the analytics consumers have counted the
	// conversions (their statements are recorded too).
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := c.want(200, "GET", fmt.Sprintf("/api/tracking/performance/%d", w.program), nil, owner...)
		m, _ := r.body["metrics"].(map[string]any)
		if m["totalConversions"] == 4.0 && m["totalClicks"] == 6.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dashboard never counted the routes' events: %s", r.raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, q := range []string{"?period=all", "?period=90d&timezone=America/New_York", "?dateFrom=2026-01-01&dateTo=2026-03-31"} {
		c.want(200, "GET", fmt.Sprintf("/api/tracking/performance/%d%s", w.program, q), nil, owner...)
	}
	c.want(200, "GET", fmt.Sprintf("/api/tracking/status/%d", w.program), nil, owner...)
	c.want(200, "GET", fmt.Sprintf("/api/tracking/sources/%d?period=30d", w.program), nil, owner...)
	c.want(200, "GET", fmt.Sprintf("/api/tracking/partners/%d?period=30d", w.program), nil, owner...)
	c.want(200, "GET", "/api/v1/programs/me/readiness", nil, bearer(w.live)...)
	c.want(200, "GET", "/api/v1/programs/me/analytics/sources?period=7d", nil, bearer(w.live)...)

	// The brand console's reads (accounts), on a catalog of 100,000 people.
	c.rec.console.Store(true)
	c.want(200, "GET", "/api/v1/dashboard/me", nil, owner...)
	c.want(200, "GET", "/api/v1/programs?limit=10", nil, owner...)
	c.want(200, "GET", fmt.Sprintf("/api/v1/programs/%d/settings", w.program), nil, owner...)
	c.want(200, "GET", fmt.Sprintf("/api/v1/programs/%d/keys", w.program), nil, owner...)
	// The partners list, and analytics' figures of its page (asked on the
	// internal route, recorded with analytics' statements).
	if r := c.want(200, "GET", fmt.Sprintf("/api/v1/programs/%d/partners?limit=5", w.program), nil, owner...); r.body["figures"].(map[string]any)["available"] != true {
		c.t.Fatalf("the partners list had no figures: %s", r.raw)
	}

	// The console's commissions and payouts (commissions): the world's
	// program, and the loaded program 1000001 with 100,000 commissions
	// (its member 4000001 reads it): pages, the cursor, filters, CSV, the
	// money, and a payout opened, paid and cancelled.
	c.consoleMoney(issuer, w, owner)

	// The webhooks of all the above delivered, the delivery log read and
	// retried, the listener polled.
	c.webhooksFinish(hooks)
}

func (c *client) consoleMoney(issuer *session.Issuer, w world, owner []string) {
	t := c.t
	reader := bearer(mustIssue(t, issuer, 4000001))
	const many = 1000001
	page := c.want(200, "GET", fmt.Sprintf("/api/v1/programs/%d/commissions?limit=50", many), nil, reader...)
	next, _ := page.body["next_cursor"].(string)
	if next == "" {
		t.Fatalf("no next page of program %d: %.200s", many, page.raw)
	}
	c.want(200, "GET", fmt.Sprintf("/api/v1/programs/%d/commissions?limit=50&cursor=%s", many, url.QueryEscape(next)), nil, reader...)
	day := time.Now().UTC().Format(time.DateOnly)
	for _, q := range []string{"status=approved", "partner_id=2000001", "partner_id=2000001&status=pending&cursor=" + url.QueryEscape(next),
		"from=" + day, "to=" + day, "from=" + day + "&status=approved"} {
		c.want(200, "GET", fmt.Sprintf("/api/v1/programs/%d/commissions?%s", many, q), nil, reader...)
	}
	c.want(200, "GET", fmt.Sprintf("/api/v1/programs/%d/commissions?partner_id=2000001", many), nil, append(reader, "Accept", "text/csv")...)
	c.want(200, "GET", fmt.Sprintf("/api/v1/programs/%d/payouts", many), nil, reader...)
	c.want(200, "GET", fmt.Sprintf("/api/v1/programs/%d/payouts?limit=10", 1000002), nil, bearer(mustIssue(t, issuer, 4000002))...)
	c.want(200, "GET", fmt.Sprintf("/api/v1/programs/%d/payouts", many), nil, append(reader, "Accept", "text/csv")...)

	c.want(200, "GET", fmt.Sprintf("/api/v1/programs/%d/commissions", w.program), nil, owner...)
	c.want(200, "GET", fmt.Sprintf("/api/v1/programs/%d/payouts", w.program), nil, owner...)
	open := c.want(201, "POST", fmt.Sprintf("/api/v1/programs/%d/payouts", w.program), map[string]any{"partner_id": w.partner, "currency": "USD", "amount": 10}, owner...)
	id, _ := open.body["data"].(map[string]any)["id"].(float64)
	c.want(200, "POST", fmt.Sprintf("/api/v1/programs/%d/payouts/%d/pay", w.program, int64(id)), map[string]any{"reference": "tr_plans"}, owner...)
	open = c.want(201, "POST", fmt.Sprintf("/api/v1/programs/%d/payouts", w.program), map[string]any{"partner_id": w.partner, "currency": "USD", "amount": 10}, owner...)
	id, _ = open.body["data"].(map[string]any)["id"].(float64)
	c.want(200, "POST", fmt.Sprintf("/api/v1/programs/%d/payouts/%d/cancel", w.program, int64(id)), nil, owner...)
}

func mustIssue(t *testing.T, issuer *session.Issuer, user int64) string {
	t.Helper()
	tok, _, err := issuer.Issue(user, session.KindDashboard)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// event is a processor fixture (commissions' testdata) with a fresh id,
// the account, the current time and the object's fields set.
func (c *client) event(fixture, account string, fields map[string]any) map[string]any {
	c.t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "services", "commissions", "internal", "processor", "testdata", fixture))
	if err != nil {
		c.t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		c.t.Fatal(err)
	}
	ev["id"], ev["account"], ev["created"] = "evt_"+c.uniq(), account, time.Now().Unix()
	obj := ev["data"].(map[string]any)["object"].(map[string]any)
	for k, v := range fields {
		obj[k] = v
	}
	return ev
}

func (c *client) hook(fixture, account string, fields map[string]any, outcome string) {
	c.t.Helper()
	c.deliver(c.event(fixture, account, fields), outcome)
}

// deliver posts ev signed as the processor signs (t=<unix>,v1=<hex
// HMAC-SHA256 of "<t>.<body>">); outcome "" takes any.
func (c *client) deliver(ev map[string]any, outcome string) {
	c.t.Helper()
	body, err := json.Marshal(ev)
	if err != nil {
		c.t.Fatal(err)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	m := hmac.New(sha256.New, []byte(hookSecret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	r := c.want(200, "POST", "/api/v1/webhooks/processor", body, "Processor-Signature", "t="+ts+",v1="+hex.EncodeToString(m.Sum(nil)))
	if outcome != "" && r.body["outcome"] != outcome {
		c.t.Fatalf("processor event %s: %s, want outcome %s", ev["type"], r.raw, outcome)
	}
}
