package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	accounts "github.com/svc-dev/svc/services/accounts/server"
	tracking "github.com/svc-dev/svc/services/tracking/server"
)

const adminToken = "tracking-test-admin-token-0123456789abcdef"

// stack is the stack's services (accounts + tracking) in-process on a fresh
// database and an embedded broker: the real services, routes and event flow.
type stack struct {
	t        *testing.T
	accounts string
	tracking string
	// gateway routes like the Ingress (deploy/devstack/gateway) in front
	// of the services: the front door of the public routes.
	gateway string
	pool    *pgxpool.Pool // tracking's schema
	// registry is tracking's metrics registry.
	registry *prometheus.Registry
	seq      int64
}

// startStack starts the stack with trackingEnv on top (variables only
// tracking reads: rate limits, GEOIP_DB, INTERNAL_TOKEN).
func startStack(t *testing.T, trackingEnv map[string]string) *stack {
	t.Helper()
	return startStackOn(t, nil, trackingEnv)
}

// startStackOn is startStack with every service on clock (nil: the real
// one).
func startStackOn(t *testing.T, clock *platformtest.Clock, trackingEnv map[string]string) *stack {
	t.Helper()
	st := stacktest.StartOn(t, clock, platformtest.With(map[string]string{
		"ADMIN_TOKEN":         adminToken,
		"SESSION_SIGNING_KEY": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, ed25519.SeedSize)),
		// Keep published outbox rows so tests can read the events each
		// request wrote (deleting on publish is tested in libs/outbox).
		"OUTBOX_DELETE_SENT": "false",
	}, trackingEnv))
	gw := httptest.NewServer(gateway.New(st.Handlers()))
	t.Cleanup(gw.Close)
	return &stack{t: t, accounts: st.URL(accounts.Name), tracking: st.URL(tracking.Name), gateway: gw.URL,
		pool: st.Instance(tracking.Name).Platform().Pool, registry: st.Instance(tracking.Name).Platform().Registry}
}

// admin calls the accounts admin API and returns data.
func (s *stack) admin(method, path string, body any) map[string]any {
	s.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, s.accounts+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		s.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if n, err := strconv.ParseInt(resp.Header.Get("X-Catalog-Seq"), 10, 64); err == nil && n > s.seq {
		s.seq = n
	}
	var out struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		s.t.Fatal(err)
	}
	return out.Data
}

func (s *stack) id(method, path string, body any) int64 {
	s.t.Helper()
	return int64(s.admin(method, path, body)["id"].(float64))
}

// sync waits on the catalog barrier for everything written so far.
func (s *stack) sync() {
	s.t.Helper()
	s.admin("GET", fmt.Sprintf("/admin/v1/catalog/sync?seq=%d&timeout=25s", s.seq), nil)
}

// fixture is a catalog made through the admin API.
type fixture struct {
	progServer, progBrowser                   int64 // server_required and browser_allowed programs
	partner1, partner2                        int64
	keyServer, keyBrowser, keyTest            string
	keyRotating, keyRetired                   string
	codeA, codeA2, codeB, codeOff, codeShared string
	origin                                    string
}

func (s *stack) fixture() fixture {
	s.t.Helper()
	f := fixture{codeA: "ALPHA", codeA2: "ALPHA2", codeB: "BETA", codeOff: "OFF", codeShared: "SHARED", origin: "https://shop.example"}
	adv := s.id("POST", "/admin/v1/advertisers", map[string]any{"name": "Brand", "email": "b@brand.example"})
	f.progServer = s.id("POST", "/admin/v1/programs", map[string]any{"advertiser_id": adv, "name": "Server", "domain": "brand.example",
		"commission_type": "percent", "commission_rate": 10, "allowed_origins": []string{f.origin}})
	f.progBrowser = s.id("POST", "/admin/v1/programs", map[string]any{"advertiser_id": adv, "name": "Browser", "domain": "brand.example",
		"commission_type": "fixed", "commission_rate": 5, "lead_auth_policy": "browser_allowed", "attribution_window_days": 30,
		"allowed_origins": []string{f.origin}})
	f.partner1 = s.id("POST", "/admin/v1/partners", map[string]any{"name": "P1", "email": "p1@partners.example"})
	f.partner2 = s.id("POST", "/admin/v1/partners", map[string]any{"name": "P2", "email": "p2@partners.example"})
	for _, pp := range []struct{ prog, partner int64 }{{f.progServer, f.partner1}, {f.progServer, f.partner2}, {f.progBrowser, f.partner1}} {
		s.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", pp.prog), map[string]any{"partner_id": pp.partner, "approved": true})
	}
	link := func(prog, partner int64, code string, active bool) {
		s.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/links", prog), map[string]any{"partner_id": partner, "code": code, "active": active})
	}
	link(f.progServer, f.partner1, f.codeA, true)
	link(f.progServer, f.partner2, f.codeA2, true)
	link(f.progBrowser, f.partner1, f.codeB, true)
	link(f.progServer, f.partner1, f.codeOff, false)
	link(f.progServer, f.partner1, f.codeShared, true)
	link(f.progBrowser, f.partner2, f.codeShared, true)
	key := func(prog int64, test bool) (string, int64) {
		d := s.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/keys", prog), map[string]any{"test": test})
		return d["key"].(string), int64(d["id"].(float64))
	}
	f.keyServer, _ = key(f.progServer, false)
	f.keyBrowser, _ = key(f.progBrowser, false)
	f.keyTest, _ = key(f.progServer, true)
	var rotID, retID int64
	f.keyRotating, rotID = key(f.progServer, false)
	f.keyRetired, retID = key(f.progServer, false)
	s.admin("POST", fmt.Sprintf("/admin/v1/keys/%d/rotation", rotID), map[string]any{"deadline": time.Now().Add(72 * time.Hour).UTC().Format(time.RFC3339)})
	s.admin("POST", fmt.Sprintf("/admin/v1/keys/%d/rotation", retID), map[string]any{"deadline": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)})
	s.sync()
	return f
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// call sends a tracking request; headers are name/value pairs.
func (s *stack) call(method, path, body string, headers ...string) reply {
	s.t.Helper()
	return s.send(s.tracking, method, path, body, headers...)
}

// front sends a request through the gateway, as a client would.
func (s *stack) front(method, path, body string, headers ...string) reply {
	s.t.Helper()
	return s.send(s.gateway, method, path, body, headers...)
}

func (s *stack) send(base, method, path, body string, headers ...string) reply {
	s.t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func jsonBody(v map[string]any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// click records a production click for code and returns the click id.
func (s *stack) click(code string, extra map[string]any) string {
	s.t.Helper()
	body := map[string]any{"affiliate_url": "https://brand.example/landing?via=" + code}
	for k, v := range extra {
		body[k] = v
	}
	r := s.call("POST", "/api/v1/track/click", jsonBody(body))
	if r.status != 200 {
		s.t.Fatalf("click %s: %d %s", code, r.status, r.raw)
	}
	return r.body["click_id"].(string)
}

func (s *stack) count(q string, args ...any) int {
	s.t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		s.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// rows counts what a request may write: customers, click and lead events,
// visits and outbox events.
func (s *stack) rows() [5]int {
	return [5]int{
		s.count(`SELECT count(*) FROM customers`),
		s.count(`SELECT count(*) FROM affiliate_click_events`),
		s.count(`SELECT count(*) FROM lead_events`),
		s.count(`SELECT count(*) FROM visits`),
		s.count(`SELECT count(*) FROM outbox WHERE topic = 'tracking.events.v1'`),
	}
}

func wantPlatformError(t *testing.T, r reply, status int, name, message string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	if _, ok := r.body["data"]; !ok || r.body["data"] != nil {
		t.Fatalf("platform envelope needs data:null: %s", r.raw)
	}
	e, _ := r.body["error"].(map[string]any)
	if e == nil || e["status"] != float64(status) || e["name"] != name || e["message"] != message {
		t.Fatalf("error %s, want %d %s %q", r.raw, status, name, message)
	}
	if d, ok := e["details"].(map[string]any); !ok || len(d) != 0 {
		t.Fatalf("details must be an empty object: %s", r.raw)
	}
	if r.header.Get("X-Request-ID") == "" {
		t.Fatal("missing X-Request-ID")
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func bearer(k string) []string { return []string{"Authorization", "Bearer " + k} }

// wantCodedError checks the platform envelope with an error.code (the
// internal attributions route's).
func wantCodedError(t *testing.T, r reply, status int, name, code, message string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	if d, ok := r.body["data"]; !ok || d != nil {
		t.Fatalf("platform envelope needs data:null: %s", r.raw)
	}
	e, _ := r.body["error"].(map[string]any)
	if e == nil || e["status"] != float64(status) || e["name"] != name || e["code"] != code || e["message"] != message {
		t.Fatalf("error %s, want %d %s %s %q", r.raw, status, name, code, message)
	}
	if _, ok := e["details"].(map[string]any); !ok {
		t.Fatalf("details must be an object: %s", r.raw)
	}
	if r.header.Get("X-Request-ID") == "" {
		t.Fatal("missing X-Request-ID")
	}
}

type customerRow struct {
	status        string
	signup, first *time.Time
	saleAt        *time.Time
	processorID   *string
}

func (s *stack) customer(clickID string) customerRow {
	s.t.Helper()
	var c customerRow
	if err := s.pool.QueryRow(context.Background(), `SELECT status, signup_date, first_purchase_date, sale_recorded_at, processor_customer_id
		FROM customers WHERE click_id = $1`, clickID).Scan(&c.status, &c.signup, &c.first, &c.saleAt, &c.processorID); err != nil {
		s.t.Fatal(err)
	}
	return c
}

// saleRows counts what a payment's attribution may write (the sale itself
// is the commissions service's).
func (s *stack) saleRows() [2]int {
	return [2]int{
		s.count(`SELECT count(*) FROM customers WHERE status = 'conversion' OR sale_recorded_at IS NOT NULL`),
		s.count(`SELECT count(*) FROM lead_events WHERE status = 'settled'`),
	}
}

// ageCustomer moves a customer's first click into the past: the only way
// to have a click older than the attribution window without waiting.
func (s *stack) ageCustomer(clickID string, age time.Duration) {
	s.t.Helper()
	if _, err := s.pool.Exec(context.Background(), `UPDATE customers SET created_at = now() - $2::interval WHERE click_id = $1`,
		clickID, fmt.Sprintf("%d seconds", int(age.Seconds()))); err != nil {
		s.t.Fatal(err)
	}
}
