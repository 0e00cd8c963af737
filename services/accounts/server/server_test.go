package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/obs/obstest"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	"github.com/svc-dev/svc/services/accounts/server"
)

const adminToken = "test-admin-token-0123456789abcdef0123"

var testSeed = bytes.Repeat([]byte{7}, ed25519.SeedSize)

type stack struct {
	t    *testing.T
	base string
	pool *pgxpool.Pool
}

// start runs the real accounts service on a fresh database and an embedded
// broker, with extra environment on top.
func start(t *testing.T, extra map[string]string, opts ...platform.Option) *stack {
	t.Helper()
	env := platformtest.With(platformtest.Env(t), map[string]string{
		"ADMIN_TOKEN":         adminToken,
		"SESSION_SIGNING_KEY": base64.StdEncoding.EncodeToString(testSeed),
	})
	inst := platformtest.Start(t, server.Spec(), platformtest.With(env, extra), opts...)
	return &stack{t: t, base: "http://" + inst.Addr(), pool: inst.Platform().Pool}
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (s *stack) do(method, path, token, contentType, body string) reply {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
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

func (s *stack) admin(method, path, body string) reply {
	s.t.Helper()
	return s.do(method, path, adminToken, "application/json", body)
}

func (s *stack) count(table string) int {
	s.t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

func dataID(t *testing.T, r reply) int64 {
	t.Helper()
	data, ok := r.body["data"].(map[string]any)
	if !ok {
		t.Fatalf("no data in %s", r.raw)
	}
	id, ok := data["id"].(float64)
	if !ok {
		t.Fatalf("no data.id in %s", r.raw)
	}
	return int64(id)
}

func wantError(t *testing.T, r reply, status int, name, message string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	if r.body["data"] != nil || !hasKey(r.body, "data") {
		t.Fatalf("platform envelope needs data:null: %s", r.raw)
	}
	e, _ := r.body["error"].(map[string]any)
	if e == nil || e["status"] != float64(status) || e["name"] != name || e["message"] != message {
		t.Fatalf("error %v, want status %d name %s message %q", e, status, name, message)
	}
	if _, ok := e["details"].(map[string]any); !ok {
		t.Fatalf("details must be an object: %s", r.raw)
	}
}

func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }

type catalogIDs struct{ advertiser, program, partner, link, key int64 }

func (s *stack) seedCatalog() catalogIDs {
	t := s.t
	t.Helper()
	var ids catalogIDs
	r := s.admin("POST", "/admin/v1/advertisers", `{"name":"Brand","email":"owner@brand.example"}`)
	if r.status != 201 {
		t.Fatalf("advertiser: %d %s", r.status, r.raw)
	}
	ids.advertiser = dataID(t, r)
	r = s.admin("POST", "/admin/v1/programs", `{"advertiser_id":`+itoa(ids.advertiser)+`,"name":"Prog","domain":"brand.example","commission_type":"percent","commission_rate":15}`)
	if r.status != 201 {
		t.Fatalf("program: %d %s", r.status, r.raw)
	}
	ids.program = dataID(t, r)
	r = s.admin("POST", "/admin/v1/partners", `{"name":"P","email":"p@partner.example"}`)
	ids.partner = dataID(t, r)
	r = s.admin("POST", "/admin/v1/programs/"+itoa(ids.program)+"/links", `{"partner_id":`+itoa(ids.partner)+`,"code":"CODE1"}`)
	if r.status != 201 {
		t.Fatalf("link: %d %s", r.status, r.raw)
	}
	ids.link = dataID(t, r)
	r = s.admin("POST", "/admin/v1/programs/"+itoa(ids.program)+"/keys", `{"test":true}`)
	if r.status != 201 {
		t.Fatalf("key: %d %s", r.status, r.raw)
	}
	ids.key = dataID(t, r)
	return ids
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestAdminRequiresToken(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	cases := []struct{ name, token, header, msg string }{
		{"missing header", "", "", "Missing or malformed Authorization header. Expected: Bearer <admin_token>"},
		{"wrong token", "nope", "", "Invalid admin token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do("POST", "/admin/v1/advertisers", tc.token, "application/json", `{"name":"A","email":"a@b.example"}`)
			wantError(t, r, 401, "UnauthorizedError", tc.msg)
		})
	}
	if n := s.count("advertisers"); n != 0 {
		t.Fatalf("refused requests wrote %d advertisers", n)
	}
}

func TestCreateProgramDefaultsAndSeqHeader(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	ids := s.seedCatalog()
	r := s.admin("GET", "/admin/v1/programs/"+itoa(ids.program), "")
	if r.status != 200 {
		t.Fatalf("get program: %d %s", r.status, r.raw)
	}
	p := r.body["data"].(map[string]any)
	want := map[string]any{
		"lead_auth_policy": "server_required", "attribution_window_days": float64(60),
		"payment_tracking_mode": "processor_connect", "commission_rate": float64(15), "duration_months": float64(0),
		"hold_days": float64(30), "cookie_duration": nil,
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%s = %v, want %v", k, p[k], v)
		}
	}
	if pc := p["processor_connection"].(map[string]any); pc["status"] != "not_connected" {
		t.Errorf("processor status %v", pc["status"])
	}
	// Every write answers its catalog sequence; six writes so far.
	r = s.admin("PATCH", "/admin/v1/programs/"+itoa(ids.program), `{"lead_auth_policy":"browser_allowed","allowed_origins":["https://brand.example"],
		"processor_connection":{"status":"connected","account_id":"acct_1","charges_enabled":true,"payouts_enabled":true,"details_submitted":true,"connected_at":"2026-11-01T10:00:00Z"}}`)
	if r.status != 200 || r.header.Get("X-Catalog-Seq") != "6" {
		t.Fatalf("patch: %d seq %q %s", r.status, r.header.Get("X-Catalog-Seq"), r.raw)
	}
	var policy, status string
	var origins []string
	if err := s.pool.QueryRow(context.Background(), `SELECT lead_auth_policy, processor_status, allowed_origins FROM programs WHERE id=$1`, ids.program).
		Scan(&policy, &status, &origins); err != nil {
		t.Fatal(err)
	}
	if policy != "browser_allowed" || status != "connected" || len(origins) != 1 {
		t.Fatalf("stored %s %s %v", policy, status, origins)
	}
	// One outbox row per write, all on the catalog topic.
	var events int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE topic = 'accounts.catalog.v1'`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 6 {
		t.Fatalf("%d catalog events, want 6", events)
	}
}

func TestAdminValidationWritesNothing(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	ids := s.seedCatalog()
	prog := "/admin/v1/programs/" + itoa(ids.program)
	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		errName, msg                    string
		table                           string
	}{
		{"malformed json", "POST", "/admin/v1/partners", "application/json", `{"name":`, 400, "BadRequestError", "Request body is not valid JSON", "partners"},
		{"wrong content type", "POST", "/admin/v1/partners", "text/plain", `{"name":"x","email":"x@y.example"}`, 400, "BadRequestError", "Content-Type must be application/json", "partners"},
		{"name wrong type", "POST", "/admin/v1/partners", "application/json", `{"name":5,"email":"x@y.example"}`, 400, "BadRequestError", "name must be a string", "partners"},
		{"bad email", "POST", "/admin/v1/advertisers", "application/json", `{"name":"A","email":"nope"}`, 400, "BadRequestError", "email must be a valid email address", "advertisers"},
		{"rate too high", "POST", "/admin/v1/programs", "application/json", `{"advertiser_id":` + itoa(ids.advertiser) + `,"name":"x","domain":"x.example","commission_type":"percent","commission_rate":101}`, 400, "BadRequestError", "commission_rate is a percentage for this type and cannot exceed 100", "programs"},
		{"unknown advertiser", "POST", "/admin/v1/programs", "application/json", `{"advertiser_id":999,"name":"x","domain":"x.example","commission_type":"fixed","commission_rate":5}`, 404, "NotFoundError", "advertiser not found", "programs"},
		{"unknown program for link", "POST", "/admin/v1/programs/999/links", "application/json", `{"partner_id":` + itoa(ids.partner) + `,"code":"X"}`, 404, "NotFoundError", "program not found", "links"},
		{"duplicate link code", "POST", prog + "/links", "application/json", `{"partner_id":` + itoa(ids.partner) + `,"code":"CODE1"}`, 409, "ConflictError", "a link with this code already exists in this program", "links"},
		{"unknown link", "PATCH", "/admin/v1/links/999", "application/json", `{"active":false}`, 404, "NotFoundError", "link 999 not found", "links"},
		{"link active missing", "PATCH", "/admin/v1/links/" + itoa(ids.link), "application/json", `{}`, 400, "BadRequestError", "active is required", "links"},
		{"rotation bad deadline", "POST", "/admin/v1/keys/" + itoa(ids.key) + "/rotation", "application/json", `{"deadline":"tomorrow"}`, 400, "BadRequestError", "deadline is required and must be an ISO 8601 time with offset", "api_keys"},
		{"unknown key rotation", "POST", "/admin/v1/keys/999/rotation", "application/json", `{"deadline":"2030-01-01T00:00:00Z"}`, 404, "NotFoundError", "api key 999 not found", "api_keys"},
		{"member without user", "POST", prog + "/members", "application/json", `{"active":true}`, 400, "BadRequestError", "user_id is required", "memberships"},
		{"session unknown user", "POST", "/admin/v1/sessions", "application/json", `{"user_id":42}`, 404, "NotFoundError", "user 42 not found", "users"},
		{"too large", "POST", "/admin/v1/partners", "application/json", `{"name":"` + strings.Repeat("a", 70<<10) + `","email":"x@y.example"}`, 413, "PayloadTooLargeError", "", "partners"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := s.count(tc.table)
			outboxBefore := s.count("outbox")
			r := s.do(tc.method, tc.path, adminToken, tc.ctype, tc.body)
			if tc.msg == "" {
				if r.status != tc.status {
					t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.raw)
				}
				e, _ := r.body["error"].(map[string]any)
				if e == nil || e["name"] != tc.errName {
					t.Fatalf("error %s, want name %s", r.raw, tc.errName)
				}
			} else {
				wantError(t, r, tc.status, tc.errName, tc.msg)
			}
			if r.header.Get("X-Catalog-Seq") != "" {
				t.Fatal("a refused write must not answer a catalog sequence")
			}
			if after := s.count(tc.table); after != before {
				t.Fatalf("%s rows %d -> %d", tc.table, before, after)
			}
			if after := s.count("outbox"); after != outboxBefore {
				t.Fatalf("outbox rows %d -> %d", outboxBefore, after)
			}
		})
	}
}

func TestKeysStoredOnlyAsHashes(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	ids := s.seedCatalog()
	r := s.admin("POST", "/admin/v1/programs/"+itoa(ids.program)+"/keys", `{}`)
	key, _ := r.body["data"].(map[string]any)["key"].(string)
	if !strings.HasPrefix(key, "svc_live_") {
		t.Fatalf("live key %q", key)
	}
	var found int
	if err := s.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM api_keys WHERE encode(key_hash,'escape') LIKE '%'||$1||'%' OR prefix = $1`, key).Scan(&found); err != nil {
		t.Fatal(err)
	}
	if found != 0 {
		t.Fatal("the plain key is stored")
	}
	var payloads int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE position(convert_to($1,'UTF8') in payload) > 0`, key).Scan(&payloads); err != nil {
		t.Fatal(err)
	}
	if payloads != 0 {
		t.Fatal("the plain key is in a catalog event")
	}
}

func TestRotationPastDeadlineRetiresAtOnce(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	ids := s.seedCatalog()
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	r := s.admin("POST", "/admin/v1/keys/"+itoa(ids.key)+"/rotation", `{"deadline":"`+past+`"}`)
	if r.status != 200 {
		t.Fatalf("rotation: %d %s", r.status, r.raw)
	}
	var deadline, marked time.Time
	if err := s.pool.QueryRow(context.Background(), `SELECT rotation_deadline, rotation_marked_at FROM api_keys WHERE id=$1`, ids.key).Scan(&deadline, &marked); err != nil {
		t.Fatal(err)
	}
	if !deadline.Before(time.Now()) || marked.IsZero() {
		t.Fatalf("deadline %v marked %v", deadline, marked)
	}
}

func TestSessionTokenVerifiesWithPublicKeyOnly(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	r := s.admin("POST", "/admin/v1/users", `{"email":"dash@brand.example","name":"D"}`)
	uid := dataID(t, r)
	r = s.admin("POST", "/admin/v1/sessions", `{"user_id":`+itoa(uid)+`}`)
	if r.status != 201 {
		t.Fatalf("session: %d %s", r.status, r.raw)
	}
	tok := r.body["data"].(map[string]any)["token"].(string)
	pub := ed25519.NewKeyFromSeed(testSeed).Public().(ed25519.PublicKey)
	v, err := session.NewVerifier(pub, server.SessionIssuer, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := v.Verify(tok)
	if err != nil || claims.UserID != uid {
		t.Fatalf("verify: %+v %v", claims, err)
	}
}

func TestCatalogSyncBarrier(t *testing.T) {
	t.Parallel()
	t.Run("no consumers answers at once", func(t *testing.T) {
		t.Parallel()
		s := start(t, nil)
		r := s.admin("GET", "/admin/v1/catalog/sync?seq=5&timeout=1s", "")
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	})
	t.Run("absent consumer times out with 504", func(t *testing.T) {
		t.Parallel()
		s := start(t, map[string]string{"CATALOG_CONSUMERS": "ghost"})
		r := s.admin("POST", "/admin/v1/partners", `{"name":"P","email":"p@x.example"}`)
		seq := r.header.Get("X-Catalog-Seq")
		r = s.admin("GET", "/admin/v1/catalog/sync?seq="+seq+"&timeout=200ms", "")
		if r.status != 504 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		e := r.body["error"].(map[string]any)
		if e["name"] != "GatewayTimeoutError" || r.body["data"] != nil {
			t.Fatalf("envelope %s", r.raw)
		}
	})
	t.Run("a wait ends with 503 when the service shuts down", func(t *testing.T) {
		t.Parallel()
		// A wait may last 60 s; the shutdown grace is shorter. The waiting
		// client is told to retry, not left to a cut connection or a 504
		// from a process that has stopped serving.
		env := platformtest.With(platformtest.Env(t), map[string]string{
			"ADMIN_TOKEN": adminToken, "SESSION_SIGNING_KEY": base64.StdEncoding.EncodeToString(testSeed),
			"CATALOG_CONSUMERS": "ghost", "SHUTDOWN_GRACE": "2s",
		})
		inst := platformtest.Start(t, server.Spec(), env)
		s := &stack{t: t, base: "http://" + inst.Addr(), pool: inst.Platform().Pool}
		seq := s.admin("POST", "/admin/v1/partners", `{"name":"P","email":"p@x.example"}`).header.Get("X-Catalog-Seq")
		got := make(chan reply, 1)
		go func() { got <- s.admin("GET", "/admin/v1/catalog/sync?seq="+seq+"&timeout=60s", "") }()
		waiting := func() bool {
			return obstest.Metric(t, inst.Platform().Registry, "http_requests_in_flight", "route", "admin_catalog_sync") == 1
		}
		for deadline := time.Now().Add(10 * time.Second); !waiting(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the sync request never started waiting")
			}
		}
		if err := inst.Stop(); err != nil {
			t.Fatalf("stop: %v", err)
		}
		r := <-got
		if r.status != 503 || r.body["data"] != nil {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		e := r.body["error"].(map[string]any)
		if e["name"] != "ServiceUnavailableError" || !strings.Contains(e["message"].(string), "shutting down") {
			t.Fatalf("envelope %s", r.raw)
		}
	})
	t.Run("bad parameters", func(t *testing.T) {
		t.Parallel()
		s := start(t, nil)
		wantError(t, s.admin("GET", "/admin/v1/catalog/sync?seq=x", ""), 400, "BadRequestError", "seq is required and must be a whole number")
		wantError(t, s.admin("GET", "/admin/v1/catalog/sync?seq=1&timeout=2h", ""), 400, "BadRequestError", "timeout must be a duration such as 5s or 500ms, at most 60s")
	})
}

func TestAdminRateLimited(t *testing.T) {
	t.Parallel()
	// A frozen clock: a burst must not straddle two minute windows.
	s := start(t, map[string]string{"ADMIN_RATE_LIMIT": "2"}, platform.WithClock(platformtest.NewClock(time.Now()).Now))
	for i := 0; i < 2; i++ {
		r := s.admin("POST", "/admin/v1/partners", `{"name":"P","email":"p@x.example"}`)
		if r.status != 201 || r.header.Get("X-RateLimit-Limit") != "2" || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(1-i) {
			t.Fatalf("request %d: %d %v", i, r.status, r.header)
		}
		if r.header.Get("Retry-After") != "" {
			t.Fatal("Retry-After only on 429")
		}
	}
	r := s.admin("POST", "/admin/v1/partners", `{"name":"P","email":"p@x.example"}`)
	if r.status != 429 || r.header.Get("Retry-After") == "" {
		t.Fatalf("third request: %d %v", r.status, r.header)
	}
	e, _ := r.body["error"].(map[string]any)
	if e["code"] != "rate_limited" || hasKey(r.body, "data") {
		t.Fatalf("429 body %s", r.raw)
	}
	if n := s.count("partners"); n != 2 {
		t.Fatalf("refused request wrote: %d partners", n)
	}
}
