package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/seed"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/kafkakit/kafkatest"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/libs/platform"
	accounts "github.com/svc-dev/svc/services/accounts/server"
	tracking "github.com/svc-dev/svc/services/tracking/server"
)

const stackWebhookSecret = "whsec_stack_test"

type testStack struct {
	gateway  string
	accounts *platform.Instance
	tracking *platform.Instance
}

// startStack runs the stack's services in-process against one fresh
// database (each in its own schema) and an embedded broker, behind the
// gateway, as `make run` does.
func startStack(t *testing.T) *testStack {
	t.Helper()
	st := stacktest.Start(t, map[string]string{
		"ADMIN_TOKEN":              "stack-admin-token-0123456789abcdef",
		"SESSION_SIGNING_KEY":      base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, ed25519.SeedSize)),
		"PROCESSOR_WEBHOOK_SECRET": stackWebhookSecret,
	})
	gw := httptest.NewServer(gateway.New(st.Handlers()))
	t.Cleanup(gw.Close)
	return &testStack{gateway: gw.URL, accounts: st.Instance(accounts.Name), tracking: st.Instance(tracking.Name)}
}

func client(base string) *seed.Client {
	return &seed.Client{BaseURL: base, AdminToken: "stack-admin-token-0123456789abcdef", HTTP: &http.Client{Timeout: 30 * time.Second}}
}

func count(t *testing.T, pool *pgxpool.Pool, q string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// The catalog reaches tracking's replica through the real broker, and the
// sync barrier answers only once it has.
func TestCatalogReachesTrackingReplica(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	demo, err := seed.Load("../seed/demo.json")
	if err != nil {
		t.Fatal(err)
	}
	c := client(s.gateway)
	ctx := context.Background()
	res, err := seed.Run(ctx, c, demo) // ends with GET /admin/v1/catalog/sync
	if err != nil {
		t.Fatal(err)
	}
	tp := s.tracking.Platform().Pool
	if n := count(t, tp, `SELECT count(*) FROM programs WHERE id = $1 AND lead_auth_policy = 'browser_allowed' AND attribution_window_days = 60`, res.ProgramID); n != 1 {
		t.Fatalf("program %d not in tracking's replica", res.ProgramID)
	}
	if n := count(t, tp, `SELECT count(*) FROM links WHERE id = $1 AND code = $2 AND active AND partner_id = $3`, res.LinkID, res.LinkCode, res.PartnerID); n != 1 {
		t.Fatalf("link %d not in tracking's replica", res.LinkID)
	}
	for _, k := range res.Keys {
		if n := count(t, tp, `SELECT count(*) FROM api_keys WHERE id = $1 AND test = $2 AND program_id = $3`, k.ID, k.Test, res.ProgramID); n != 1 {
			t.Fatalf("key %d (test %v) not in tracking's replica", k.ID, k.Test)
		}
	}
	if _, ok := res.Key(false); !ok || len(res.Keys) != 2 {
		t.Fatalf("the demo has a live and a test key: %+v", res.Keys)
	}
	if n := count(t, tp, `SELECT count(*) FROM partner_programs WHERE program_id = $1 AND partner_id = $2 AND approved`, res.ProgramID, res.PartnerID); n != 1 {
		t.Fatal("partner-program not in tracking's replica")
	}
	if n := count(t, tp, `SELECT watermark FROM catalog_progress`); int64(n) != res.CatalogSeq {
		t.Fatalf("tracking watermark %d, want %d", n, res.CatalogSeq)
	}

	// A later change (link turned off) propagates too, and the barrier
	// covers exactly that write.
	if err := c.Call(ctx, "PATCH", fmt.Sprintf("/admin/v1/links/%d", res.LinkID), map[string]any{"active": false}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := count(t, tp, `SELECT count(*) FROM links WHERE id = $1 AND NOT active`, res.LinkID); n != 1 {
		t.Fatal("link deactivation did not reach tracking before the barrier answered")
	}
	// Each catalog event was applied once: one inbox row per event.
	ap := s.accounts.Platform().Pool
	events := count(t, ap, `SELECT count(*) FROM outbox WHERE topic = 'accounts.catalog.v1'`)
	if n := count(t, tp, `SELECT count(*) FROM inbox WHERE consumer = 'tracking.catalog'`); n != events {
		t.Fatalf("tracking applied %d events, accounts published %d", n, events)
	}
}

func TestGatewayRoutes(t *testing.T) {
	t.Parallel()
	cases := []struct{ path, service string }{
		{"/api/v1/track/click", "tracking"},
		{"/api/v1/track/lead", "tracking"},
		{"/api/v1/track/sale", "commissions"},
		{"/api/v1/track/config", "tracking"},
		{"/api/v1/track/refund", "commissions"},
		{"/api/v1/webhooks/processor", "commissions"},
		{"/api/v1/cli/auth/start", "accounts"},
		{"/api/v1/programs/12/settings", "accounts"},
		{"/api/v1/programs/me/readiness", "analytics"},
		{"/api/tracking/performance/3", "analytics"},
		{"/dashboard/", "analytics"},
		{"/dashboard", "analytics"},
		{"/admin/v1/programs", "accounts"},
	}
	for _, tc := range cases {
		r, ok := gateway.Route(tc.path)
		if !ok || r.Service != tc.service {
			t.Errorf("%s -> %+v, want %s", tc.path, r, tc.service)
		}
	}
	if _, ok := gateway.Route("/api/v1/webhooks/other"); ok {
		t.Error("/api/v1/webhooks/other is routed: only the processor's webhook is public")
	}
	for _, r := range gateway.Rules() {
		if strings.HasPrefix(r.Prefix, "/admin") && r.Public {
			t.Errorf("admin rule %s must not be public", r.Prefix)
		}
	}
	gw := httptest.NewServer(gateway.New(map[string]http.Handler{}))
	defer gw.Close()
	resp, err := http.Get(gw.URL + "/api/tracking/performance/1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("absent service: %d", resp.StatusCode)
	}
}

// processorSignature is the processor's Processor-Signature header for body
// at t, written out here because commissions' Sign is internal to it.
func processorSignature(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// The processor's webhook reaches commissions through the gateway with its body
// intact (the signature covers the raw bytes), and a wrong signature is
// refused there rather than accepted by some other backend.
func TestProcessorWebhookThroughGateway(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	// An event type commissions stores without acting on: no catalog needed.
	body := []byte(`{"id":"evt_stack_1","type":"customer.created","created":1700000000,"data":{"object":{"id":"cus_1"}}}`)
	post := func(sig string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.gateway+"/api/v1/webhooks/processor", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Processor-Signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("status %d: decode body: %v", resp.StatusCode, err)
		}
		return resp.StatusCode, out
	}

	if code, out := post(processorSignature("not-the-secret", time.Now(), body)); code != http.StatusBadRequest {
		t.Fatalf("wrong secret: %d %v, want 400", code, out)
	}
	code, out := post(processorSignature(stackWebhookSecret, time.Now(), body))
	if code != http.StatusOK || out["received"] != true || out["outcome"] != "stored" {
		t.Fatalf("signed event: %d %v, want 200 received/stored", code, out)
	}
	// A redelivery is recognised: the first delivery was stored.
	code, out = post(processorSignature(stackWebhookSecret, time.Now(), body))
	if code != http.StatusOK || out["duplicate"] != true {
		t.Fatalf("redelivery: %d %v, want 200 duplicate", code, out)
	}
}

// The seed finds what exists and creates only what is missing: a second run
// (a restart, `make seed`, `rm -rf .data`, a second clone against the same
// database) writes nothing and ends with the same program and keys, and a
// run after part of the demo is gone recreates only that part.
func TestSeedIsIdempotent(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	demo, err := seed.Load("../seed/demo.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := seed.Run(ctx, client(s.gateway), demo)
	if err != nil {
		t.Fatal(err)
	}
	if first.Created == 0 || first.CatalogSeq == 0 {
		t.Fatalf("first run created nothing: %+v", first)
	}
	ap := s.accounts.Platform().Pool
	before := count(t, ap, `SELECT (SELECT count(*) FROM advertisers) + (SELECT count(*) FROM programs) + (SELECT count(*) FROM partners) + (SELECT count(*) FROM links) + (SELECT count(*) FROM api_keys)`)
	again, err := seed.Run(ctx, client(s.gateway), demo)
	if err != nil {
		t.Fatal(err)
	}
	if again.Created != 0 || again.CatalogSeq != 0 {
		t.Fatalf("second run wrote: created %d, catalog seq %d", again.Created, again.CatalogSeq)
	}
	if again.ProgramID != first.ProgramID || again.PartnerID != first.PartnerID || again.LinkID != first.LinkID ||
		fmt.Sprint(again.Keys) != fmt.Sprint(first.Keys) || fmt.Sprint(again.AllowedOrigins) != fmt.Sprint(first.AllowedOrigins) {
		t.Fatalf("second run found other entities:\n%+v\n%+v", first, again)
	}
	if after := count(t, ap, `SELECT (SELECT count(*) FROM advertisers) + (SELECT count(*) FROM programs) + (SELECT count(*) FROM partners) + (SELECT count(*) FROM links) + (SELECT count(*) FROM api_keys)`); after != before {
		t.Fatalf("rows %d -> %d", before, after)
	}

	// A newer seed file with another allowed origin updates the program.
	demo.Program["allowed_origins"] = append(demo.Program["allowed_origins"].([]any), "http://localhost:4321")
	third, err := seed.Run(ctx, client(s.gateway), demo)
	if err != nil {
		t.Fatal(err)
	}
	if third.Created != 1 || third.ProgramID != first.ProgramID || !slices.Contains(third.AllowedOrigins, "http://localhost:4321") {
		t.Fatalf("changed origins not applied: %+v", third)
	}
	if n := count(t, s.tracking.Platform().Pool, `SELECT count(*) FROM programs WHERE id = $1 AND 'http://localhost:4321' = ANY(allowed_origins)`, first.ProgramID); n != 1 {
		t.Fatal("the new origin did not reach tracking before the seed returned")
	}

	// The brand renames the demo program (in the console, say): the next
	// start finds it by its demo keys, keeps the new name and creates no
	// second program.
	if err := client(s.gateway).Call(ctx, "PATCH", fmt.Sprintf("/admin/v1/programs/%d", first.ProgramID), map[string]any{"name": "Renamed by the brand"}, nil); err != nil {
		t.Fatal(err)
	}
	fourth, err := seed.Run(ctx, client(s.gateway), demo)
	if err != nil {
		t.Fatalf("after a rename: %v", err)
	}
	if fourth.ProgramID != first.ProgramID || fourth.Created != 0 || fmt.Sprint(fourth.Keys) != fmt.Sprint(first.Keys) {
		t.Fatalf("after a rename: %+v", fourth)
	}
	if n := count(t, ap, `SELECT count(*) FROM programs`); n != 1 {
		t.Fatalf("%d programs after a rename, want the one", n)
	}
	if n := count(t, ap, `SELECT count(*) FROM programs WHERE id = $1 AND name = 'Renamed by the brand'`, first.ProgramID); n != 1 {
		t.Fatal("the seed gave the renamed program its old name back")
	}
}

// make run after rm -rf .data: a new broker over the database that kept
// its state. Events published to the old broker but consumed by no one
// (here: the catalog, published while no replica ran) are sent again, so
// the replicas catch up and the sync barrier answers.
func TestFreshBrokerOverAKeptDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "KAFKA_BROKERS": strings.Join(kafkatest.StartBroker(t), ",")}
	old := stacktest.Start(t, env, accounts.Name)
	gw := httptest.NewServer(gateway.New(old.Handlers()))
	demo, err := seed.Load("../seed/demo.json")
	if err != nil {
		t.Fatal(err)
	}
	c := &seed.Client{BaseURL: gw.URL, AdminToken: stacktest.AdminToken, HTTP: &http.Client{Timeout: 30 * time.Second}}
	res, err := seed.Run(ctx, c, demo)
	if err != nil {
		t.Fatal(err)
	}
	ap := old.Instance(accounts.Name).Platform().Pool
	deadline := time.Now().Add(30 * time.Second)
	for count(t, ap, `SELECT count(*) FROM outbox WHERE sent_at IS NULL`) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("accounts did not publish its catalog to the first broker")
		}
		time.Sleep(20 * time.Millisecond)
	}
	published := count(t, ap, `SELECT count(*) FROM outbox`)
	gw.Close()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := republishKept(ctx, &out, env["DATABASE_URL"]); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d published events", published); !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "accounts "+strconv.Itoa(published)) {
		t.Fatalf("republishKept said %q, want %q and accounts' count", out.String(), want)
	}
	env["KAFKA_BROKERS"] = strings.Join(kafkatest.StartBroker(t), ",")
	st := stacktest.Start(t, env, tracking.Name, accounts.Name)
	gw2 := httptest.NewServer(gateway.New(st.Handlers()))
	t.Cleanup(gw2.Close)
	c.BaseURL = gw2.URL
	if err := c.Sync(ctx, 20*time.Second); err != nil {
		t.Fatalf("the barrier on the new broker: %v", err)
	}
	if n := count(t, st.Instance(tracking.Name).Platform().Pool, `SELECT count(*) FROM links WHERE id = $1 AND code = $2`, res.LinkID, res.LinkCode); n != 1 {
		t.Fatal("the demo link did not reach tracking's replica")
	}
	// Nothing to send again on a database with no outbox at all.
	out.Reset()
	if err := republishKept(ctx, &out, pgtest.NewDatabase(t)); err != nil || out.Len() != 0 {
		t.Fatalf("on an empty database: %v, said %q", err, out.String())
	}
}
