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
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/tracking/internal/endpoints"
	"github.com/svc-dev/svc/services/tracking/internal/httpapi"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// memStore is just enough catalog and customers for the decoders and rules
// to run end to end: the fuzz target checks the transport and domain never
// fail on a body, not persistence (the integration tests cover that).
type memStore struct {
	mu        sync.Mutex
	customers map[string]ingest.Customer
}

var fuzzProgram = ingest.Program{ID: 1, AttributionWindowDays: 60, LeadAuthPolicy: "server_required", AllowedOrigins: []string{"https://shop.example"}}

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
		m.customers[id] = ingest.Customer{ID: int64(len(m.customers) + 1), ClickID: id, ProgramID: 1, Status: "click", Program: fuzzProgram}
	}
	return ingest.ClickResult{EventID: 1, ClickID: id}, nil
}
func (m *memStore) RecordTestClick(context.Context, ingest.TestClickRecord) (int64, error) {
	return 1, nil
}
func (m *memStore) Lead(_ context.Context, ref ingest.LeadRef, _ time.Time, decide func(ingest.Customer) (ingest.LeadDecision, error)) (bool, error) {
	c, ok, _ := m.FindCustomer(context.Background(), ref)
	if !ok {
		return false, nil
	}
	_, err := decide(c)
	return true, err
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

type keyStore struct{}

func (keyStore) LookupKeyByHash(_ context.Context, h []byte) (apikey.Key, error) {
	if string(h) == string(apikey.Hash("svc_live_fuzzkey")) {
		return apikey.Key{ID: 1, ProgramID: 1}, nil
	}
	return apikey.Key{}, apikey.ErrKeyNotFound
}

type noEnrich struct{}

func (noEnrich) Enrich(netip.Addr, string) ingest.Enrichment { return ingest.Enrichment{} }

func newHandler(t testing.TB) http.Handler {
	t.Helper()
	now := func() time.Time { return time.Unix(1_800_000_000, 0) }
	svc, err := ingest.NewService(ingest.Config{Store: &memStore{customers: map[string]ingest.Customer{}}, Enricher: noEnrich{}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ips, err := httpkit.NewIPResolver("127.0.0.1/32")
	if err != nil {
		t.Fatal(err)
	}
	limits := httpapi.Limits{Click: 1 << 30, Lead: 1 << 30, Visit: 1 << 30, Config: 1 << 30}
	routes, err := httpapi.Routes(endpoints.New(svc), httpapi.Config{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: now,
		Keys: &apikey.Authenticator{Store: keyStore{}, Now: now}, IPs: ips, Limits: limits,
		OnLimit: func(string) {}, Origins: svc.OriginAllowedSomewhere,
	})
	if err != nil {
		t.Fatal(err)
	}
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
}

// FuzzClickAndLead sends any body to click and lead (with and without a
// key, with and without an Origin): never a panic, never a 500.
func FuzzClickAndLead(f *testing.F) {
	for _, s := range seeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	h := newHandler(f)
	f.Fuzz(func(t *testing.T, body string, withKey bool) {
		for _, path := range []string{"/api/v1/track/click", "/api/v1/track/lead", "/api/v1/track/visit"} {
			req := httptest.NewRequest("POST", path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if withKey {
				req.Header.Set("Authorization", "Bearer svc_live_fuzzkey")
				req.Header.Set("Origin", "https://shop.example")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s %q: %d %s", path, body, rec.Code, rec.Body.String())
			}
			if !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
				t.Fatalf("%s %q: content type %q", path, body, rec.Header().Get("Content-Type"))
			}
		}
	})
}
