package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/auth/bearer"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
	"github.com/svc-dev/svc/services/tracking/internal/ingest/endpoints"
	"github.com/svc-dev/svc/services/tracking/internal/ingest/httpapi"
	"github.com/svc-dev/svc/services/tracking/internal/ingest/pgstore"
	"github.com/svc-dev/svc/services/tracking/migrations"
)

// memStore is just enough catalog and customers for the decoders and
// rules to run end to end: the fuzz targets check the transport and domain
// never fail on a body, not persistence (the integration tests cover that).
type memStore struct {
	mu        sync.Mutex
	customers map[string]ingest.Customer
}

var fuzzProgram = ingest.Program{ID: 1, AttributionWindowDays: 60, LeadAuthPolicy: "server_required", AllowedOrigins: []string{"https://shop.example"}}

func newMemStore() *memStore {
	return &memStore{customers: map[string]ingest.Customer{}}
}

func (m *memStore) Program(_ context.Context, id int64) (ingest.Program, bool, error) {
	return fuzzProgram, id == 1, nil
}
func (m *memStore) FindLink(_ context.Context, code string, programID int64) (ingest.Link, bool, error) {
	if code != "A" || (programID != 0 && programID != 1) {
		return ingest.Link{}, false, nil
	}
	return ingest.Link{ID: 1, Code: "A", PartnerID: 1, Active: true, Program: fuzzProgram, ProgramKnown: true}, true, nil
}
func (m *memStore) RecordClick(_ context.Context, rec ingest.ClickRecord) (ingest.ClickResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := rec.ExistingClickID
	if id == "" {
		id = rec.NewClickID()
	}
	if _, ok := m.customers[id]; !ok {
		// The link's partner is in the program, so a sale for this customer
		// can be attributed.
		m.customers[id] = ingest.Customer{ID: int64(len(m.customers) + 1), ClickID: id, ProgramID: 1, Status: "click", Program: fuzzProgram,
			FirstPartnerID: rec.Link.PartnerID, PartnerLinked: true, FirstClickAt: rec.At}
	}
	return ingest.ClickResult{EventID: 1, ClickID: id}, nil
}
func (m *memStore) RecordTestClick(context.Context, ingest.TestClickRecord) (int64, error) {
	return 1, nil
}

// Lead applies the decision, so a browser lead leaves a provisional
// customer for a processor checkout to settle.
func (m *memStore) Lead(_ context.Context, ref ingest.LeadRef, at time.Time, decide func(ingest.Customer) (ingest.LeadDecision, error)) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.customers[ref.ClickID]
	if !ok {
		return false, nil
	}
	d, err := decide(c)
	if err != nil || !d.Record {
		return true, err
	}
	if d.Provisional {
		c.HasProvisional = true
	} else {
		c.Status, c.SignupDate, c.HasProvisional = "lead", at, false
	}
	m.customers[c.ClickID] = c
	return true, nil
}
func (m *memStore) FindCustomer(_ context.Context, ref ingest.LeadRef) (ingest.Customer, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.customers[ref.ClickID]
	return c, ok, nil
}
func (m *memStore) RecordTestLead(context.Context, ingest.TestLeadRecord) (int64, error) {
	return 1, nil
}
func (m *memStore) RecordVisit(context.Context, ingest.Visit) (int64, error) { return 1, nil }
func (m *memStore) AnyProgramAllowsOrigin(_ context.Context, o string) (bool, error) {
	return fuzzProgram.AllowsOrigin(o), nil
}

// Attribute decides by click id only and stores nothing (no replays): the
// fuzz targets check the internal route never fails on a body; its
// idempotency is server/attribution_test.go's.
func (m *memStore) Attribute(_ context.Context, req ingest.AttributionRequest, decide func(ingest.Customer) (ingest.PaymentDecision, error)) (ingest.AttributionResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.customers[req.Ref.ClickID]
	if !ok {
		return ingest.AttributionResult{}, nil
	}
	d, err := decide(c)
	if err != nil {
		return ingest.AttributionResult{}, err
	}
	a := ingest.Attribution{TransactionID: req.TransactionID, ProgramID: req.Ref.ProgramID, Outcome: ingest.AttributionAttributed,
		CustomerID: c.ID, ClickID: c.ClickID, PartnerID: c.FirstPartnerID, CustomerStatus: c.Status, Source: req.Source, DecidedAt: req.At}
	if d.Refused != nil {
		a.Outcome = ingest.AttributionRefused
		a.RefusalCode, a.RefusalMessage = ingest.Refusal(d.Refused)
	}
	return ingest.AttributionResult{Found: true, Decision: a}, nil
}

type keyStore struct{}

func (keyStore) LookupKeyByHash(_ context.Context, h []byte) (apikey.Key, error) {
	if string(h) == string(apikey.Hash("svc_live_fuzzkey")) {
		return apikey.Key{ID: 1, ProgramID: 1}, nil
	}
	return apikey.Key{}, apikey.ErrKeyNotFound
}

type noEnrich struct{}

func (noEnrich) Enrich(netip.Addr, string) ingest.Enrichment { return ingest.Enrichment{} }

// fuzzNow is the handler's fixed clock: 2027-01-15T08:00:00Z.
func fuzzNow() time.Time { return time.Unix(1_800_000_000, 0) }

func newHandler(t testing.TB, store ingest.Store, keys apikey.Store) http.Handler {
	t.Helper()
	svc, err := ingest.NewService(ingest.Config{Store: store, Enricher: noEnrich{}, Now: fuzzNow})
	if err != nil {
		t.Fatal(err)
	}
	ips, err := httpkit.NewIPResolver("127.0.0.1/32")
	if err != nil {
		t.Fatal(err)
	}
	limits := httpapi.Limits{Click: 1 << 30, Lead: 1 << 30, Visit: 1 << 30, Config: 1 << 30, Preflight: 1 << 30}
	limiters, err := httpapi.NewLimiters(limits, fuzzNow)
	if err != nil {
		t.Fatal(err)
	}
	routes := httpapi.Routes(endpoints.New(svc), httpapi.Config{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: fuzzNow,
		Keys: &apikey.Authenticator{Store: keys, Now: fuzzNow}, IPs: ips, Limiters: limiters,
		OnLimit: func(string) {}, Origins: svc.OriginAllowedSomewhere,
		InternalToken: bearer.New(fuzzInternalToken),
	})
	mux := http.NewServeMux()
	for _, r := range routes {
		mux.Handle(r.Pattern, r.Handler)
	}
	return httpkit.RequestID(ips.Middleware(mux))
}

var seeds = []string{
	`{"affiliate_url":"https://shop.example/?aff=A"}`,
	`{"affiliate_url":"https://shop.example/?via=A&aff=","program_id":"1","existing_click_id":"cust_1_2"}`,
	`{"affiliate_url":"https://shop.example/?aff=A","additional_data":{"test_mode":true,"program_id":1},"visitor_ip":"::1"}`,
	`{"click_id":"cust_1_2","customer_key":"k","email":"a@b.c","program_id":1}`,
	`{"customer_key":"k"}`,
	`{"additional_data":{"test_mode":true,"event_name":"x"}}`,
	`{"affiliate_url":"%zz","program_id":-1,"screen_resolution":"1x1"}`,
	`{"affiliate_url":null,"additional_data":[]}`,
	`[]`, `null`, `{"a":1}{"b":2}`, ``, `{"program_id":1e400}`, `{"program_id":"99999999999999999999"}`,
	// U+0000, which Postgres text and jsonb cannot hold: refused at the edge.
	`{"affiliate_url":"https://shop.example/?aff=A","page_title":"\u0000"}`,
	`{"affiliate_url":"https://shop.example/?aff=A","additional_data":{"event_name":"a\u0000"},"x":["\u0000"]}`,
	`{"click_id":"cust_1_2\u0000","customer_key":"k","email":"a@b.c"}`,
	`{"program_id":"1","page_url":"https://shop.example/","session_id":"s\u0000"}`,
	`{"a\u0000":1}`, `{"s":"\\u0000"}`,
	// Percent-decoded codes Postgres text cannot hold (found by this target).
	`{"affiliate_url":"https://shop.example/?via=A%8000","0":"0"}`, `{"affiliate_url":"https://shop.example/?aff=%00"}`,
}

// FuzzClickAndLead sends any body to click, lead and visit (with and
// without a key, with and without an Origin) on the in-memory store, and to
// click, lead, visit and the internal attributions route on the real
// store over Postgres (pgDatabase): never a panic, never a 5xx, always
// JSON. The database leg is what finds values the decoders accept and
// Postgres refuses (U+0000, invalid UTF-8). (The processor webhook's target
// moved with it to commissions: internal/processor/httpapi.) It needs the test Postgres (TEST_DATABASE_URL, see libs/pg/pgtest).
func FuzzClickAndLead(f *testing.F) {
	for _, s := range append(append([]string{}, seeds...), attributionSeeds...) {
		f.Add(s, false)
		f.Add(s, true)
	}
	mem := newHandler(f, newMemStore(), keyStore{})
	db := pgHandler(f)
	f.Fuzz(func(t *testing.T, body string, withKey bool) {
		for _, leg := range []struct {
			h     http.Handler
			paths []string
		}{
			{mem, []string{"/api/v1/track/click", "/api/v1/track/lead", "/api/v1/track/visit"}},
			{db, []string{"/api/v1/track/click", "/api/v1/track/lead", "/api/v1/track/visit", attributionPath}},
		} {
			for _, path := range leg.paths {
				header := http.Header{}
				if withKey {
					header.Set("Authorization", "Bearer svc_live_fuzzkey")
				}
				if path == attributionPath {
					header.Set("Authorization", "Bearer "+fuzzInternalToken)
				}
				if withKey {
					header.Set("Origin", "https://shop.example")
				}
				checkJSON(t, path, body, post(leg.h, path, body, header))
			}
		}
	})
}

// pgHandler is the handler over the real store on a fresh database (its
// own, dropped after the test) holding the catalog the in-memory store
// fakes: program 1 (origin https://shop.example, processor account acct_1),
// partner 1 in it, link A and the key svc_live_fuzzkey.
func pgHandler(t testing.TB) http.Handler {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	logger := slog.New(slog.DiscardHandler)
	for _, m := range []func() error{
		func() error { return pg.Migrate(ctx, dsn, "tracking", migrations.FS, logger) },
		func() error { return outbox.Migrate(ctx, dsn, "tracking", logger) },
		func() error { return catalogsync.Migrate(ctx, dsn, "tracking", logger) },
	} {
		if err := m(); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := pg.NewPool(ctx, dsn, pg.Options{Schema: "tracking", MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, q := range []string{
		`INSERT INTO programs (id, advertiser_id, attribution_window_days, lead_auth_policy, payment_tracking_mode, processor_status,
			allowed_origins, catalog_seq, updated_at, processor_account_id)
			VALUES (1, 1, 60, 'server_required', 'processor_connect', 'connected', '{https://shop.example}', 1, now(), 'acct_1')`,
		`INSERT INTO partner_programs (id, partner_id, program_id, approved, created_at, catalog_seq) VALUES (1, 1, 1, true, now(), 1)`,
		`INSERT INTO links (id, program_id, partner_id, code, active, catalog_seq) VALUES (1, 1, 1, 'A', true, 1)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO api_keys (id, program_id, key_hash, test, catalog_seq) VALUES (1, 1, $1, false, 1)`,
		apikey.Hash("svc_live_fuzzkey")); err != nil {
		t.Fatal(err)
	}
	store, err := pgstore.New(pool, pgstore.Config{Schema: "tracking", Now: fuzzNow, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- store.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	return newHandler(t, store, store)
}

const (
	attributionPath   = httpapi.AttributionsPath
	fuzzInternalToken = "fuzz-internal-token-0123456789abcdef"
)

func post(h http.Handler, path, body string, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// salesFixture is a fresh handler, so every fuzz input meets the same state
// and a failure replays from its saved input alone. Its store holds a
// customer of each kind a payment meets: cust_1_2 and cust_1_3 made by
// clicks (cust_1_3 with a provisional browser lead), and, put in directly
// because no request makes them under a fixed clock, one whose click is
// outside the attribution window, one whose partner is not in the program
// and one of another program.
func salesFixture(t testing.TB) http.Handler {
	t.Helper()
	store := newMemStore()
	old := fuzzNow().Add(-90 * 24 * time.Hour)
	other := ingest.Program{ID: 2, AttributionWindowDays: 30, LeadAuthPolicy: "browser_allowed"}
	for _, c := range []ingest.Customer{
		{ID: 100, ClickID: "cust_1_7", ProgramID: 1, Status: "click", Program: fuzzProgram, FirstPartnerID: 1, PartnerLinked: true, FirstClickAt: old},
		{ID: 101, ClickID: "cust_1_8", ProgramID: 1, Status: "click", Program: fuzzProgram, FirstPartnerID: 2, FirstClickAt: fuzzNow()},
		{ID: 102, ClickID: "cust_2_1", ProgramID: 2, Status: "click", Program: other, FirstPartnerID: 1, PartnerLinked: true, FirstClickAt: fuzzNow()},
	} {
		store.customers[c.ClickID] = c
	}
	h := newHandler(t, store, keyStore{})
	browser := http.Header{"Origin": {"https://shop.example"}}
	for _, step := range []struct {
		path, body string
		header     http.Header
		want       string
	}{
		{"/api/v1/track/click", `{"affiliate_url":"https://shop.example/?aff=A","existing_click_id":"cust_1_2"}`, nil, `"click_id":"cust_1_2"`},
		{"/api/v1/track/click", `{"affiliate_url":"https://shop.example/?aff=A","existing_click_id":"cust_1_3"}`, nil, `"click_id":"cust_1_3"`},
		{"/api/v1/track/lead", `{"click_id":"cust_1_3","email":"buyer@shop.example"}`, browser, `"provisional":true`},
	} {
		rec := post(h, step.path, step.body, step.header)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), step.want) {
			t.Fatalf("fixture %s %s: %d %s", step.path, step.body, rec.Code, rec.Body.String())
		}
	}
	return h
}

// attributionSeeds are internal attribution requests: decided, replayed,
// settling, refused (another program; and for salesFixture's customers the
// window, no partner-program record, another program's customer), not
// found, then broken shapes.
var attributionSeeds = []string{
	`{"program_id":1,"transaction_id":"attr_5","click_id":"cust_1_7","amount_cents":1000,"currency":"USD","occurred_at":"2027-01-15T07:00:00Z","source":"api"}`,
	`{"program_id":1,"transaction_id":"attr_6","click_id":"cust_1_8","amount_cents":1000,"currency":"USD","occurred_at":"2027-01-15T07:00:00Z","source":"api"}`,
	`{"program_id":1,"transaction_id":"attr_7","click_id":"cust_2_1","amount_cents":1000,"currency":"USD","occurred_at":"2027-01-15T07:00:00Z","source":"processor"}`,
	`{"program_id":1,"transaction_id":"attr_8","click_id":"cust_9_9","amount_cents":1000,"currency":"USD","occurred_at":"2027-01-15T07:00:00Z","source":"api"}`,
	`{"program_id":1,"transaction_id":"attr_recorded","click_id":"cust_1_2","amount_cents":1,"currency":"VND","occurred_at":"2027-01-15T07:00:00Z","source":"api"}`,
	`{"program_id":1,"transaction_id":"attr_1","click_id":"cust_1_2","amount_cents":1000,"currency":"USD","occurred_at":"2027-01-15T07:00:00Z","source":"api"}`,
	`{"program_id":1,"transaction_id":"attr_2","click_id":"cust_1_3","amount_cents":1000,"currency":"eur","occurred_at":"2027-01-15T07:00:00Z","settle_lead":true,"source":"processor","processor_customer_id":"cus_2"}`,
	`{"program_id":1,"transaction_id":"attr_3","email_hash":"0000000000000000000000000000000000000000000000000000000000000000","customer_key":"k","amount_cents":1,"currency":"VND","occurred_at":"1970-01-01T00:00:00Z","source":"api"}`,
	`{"program_id":2,"transaction_id":"attr_1","click_id":"cust_1_2","amount_cents":1000,"currency":"USD","occurred_at":"2027-01-15T07:00:00Z","source":"api"}`,
	`{"program_id":1,"transaction_id":"attr_4\u0000","amount_cents":1000,"currency":"USD","occurred_at":"2027-01-15T07:00:00Z","source":"api"}`,
	`{"program_id":1e400,"transaction_id":"","amount_cents":-1,"currency":null,"occurred_at":"9999-12-31T23:59:59Z","source":"web"}`,
}

func checkJSON(t *testing.T, what, body string, rec *httptest.ResponseRecorder) *httptest.ResponseRecorder {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("%s %q: %d %s", what, body, rec.Code, rec.Body.String())
	}
	if !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("%s %q: content type %q", what, body, rec.Header().Get("Content-Type"))
	}
	return rec
}

// brokenAuth are Authorization headers the internal route must refuse (a
// program key among them).
var brokenAuth = []string{"Bearer", "Bearer " + fuzzInternalToken + "x", "Bearer svc_live_fuzzkey", "Basic c3ZjOmZ1eno="}

// FuzzAttribution sends any body to the internal attributions route (with
// the internal token, then without one or with a broken one), over
// salesFixture's customers: never a panic, never a 5xx, always JSON; a
// refused token is a 401.
func FuzzAttribution(f *testing.F) {
	for _, s := range attributionSeeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	salesFixture(f) // fail on a broken fixture before fuzzing
	f.Fuzz(func(t *testing.T, body string, brokenKey bool) {
		h := salesFixture(t)
		internal := http.Header{"Authorization": {"Bearer " + fuzzInternalToken}}
		checkJSON(t, "attribution", body, post(h, attributionPath, body, internal))
		anon := http.Header{}
		if brokenKey {
			anon.Set("Authorization", brokenAuth[len(body)%len(brokenAuth)])
		}
		if rec := checkJSON(t, "attribution without the token", body, post(h, attributionPath, body, anon)); rec.Code != http.StatusUnauthorized {
			t.Fatalf("attribution %q with Authorization %q: %d %s", body, anon.Get("Authorization"), rec.Code, rec.Body.String())
		}
	})
}
