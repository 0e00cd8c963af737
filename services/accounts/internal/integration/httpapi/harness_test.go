package httpapi_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	devstack "github.com/svc-dev/svc/deploy/devstack/stack"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	accounts "github.com/svc-dev/svc/services/accounts/server"
	tracking "github.com/svc-dev/svc/services/tracking/server"
)

const adminToken = "integration-test-admin-token-0123456789abcdef"

// commissionsName is the commissions service's name in the stack
// (commissions' server.Name; not imported: accounts does not build on
// commissions).
const commissionsName = "commissions"

// stack is the real tracking, commissions and accounts services in-process
// on a fresh database and an embedded broker; accounts reaches tracking at
// TRACKING_URL and commissions (the sale route) at COMMISSIONS_URL like in
// production.
type stack struct {
	t          *testing.T
	accounts   string
	tracking   string
	accPool    *pgxpool.Pool // accounts' schema
	trkPool    *pgxpool.Pool // tracking's schema
	comPool    *pgxpool.Pool // commissions' schema
	seq        int64
	noTracking bool
}

// startStack starts the stack's services as `make run` does (tracking and
// commissions first: accounts needs their addresses), with accountsEnv on
// top. withTracking false starts accounts alone with TRACKING_URL and
// COMMISSIONS_URL pointing at nothing that answers.
func startStack(t *testing.T, withTracking bool, accountsEnv map[string]string) *stack {
	t.Helper()
	return startStackOn(t, nil, withTracking, accountsEnv)
}

// startStackOn is startStack with every service on clock (nil: the real
// one).
func startStackOn(t *testing.T, clock *platformtest.Clock, withTracking bool, accountsEnv map[string]string) *stack {
	t.Helper()
	env := map[string]string{
		"ADMIN_TOKEN":         adminToken,
		"SESSION_SIGNING_KEY": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, ed25519.SeedSize)),
	}
	for k, v := range accountsEnv {
		env[k] = v
	}
	s := &stack{t: t, noTracking: !withTracking}
	var st *devstack.Stack
	if withTracking {
		st = stacktest.StartOn(t, clock, env)
		trk := st.Instance(tracking.Name)
		s.tracking, s.trkPool = "http://"+trk.Addr(), trk.Platform().Pool
		s.comPool = st.Instance(commissionsName).Platform().Pool
	} else {
		// A port nothing listens on: every call to tracking or commissions
		// fails.
		env["TRACKING_URL"] = "http://127.0.0.1:1"
		env["COMMISSIONS_URL"] = "http://127.0.0.1:1"
		st = stacktest.StartOn(t, clock, env, accounts.Name)
	}
	a := st.Instance(accounts.Name)
	s.accounts, s.accPool = "http://"+a.Addr(), a.Platform().Pool
	return s
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
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

// status calls GET /api/v1/cli/status with key (no header when "").
func (s *stack) status(key string) reply {
	s.t.Helper()
	if key == "" {
		return s.send(s.accounts, "GET", "/api/v1/cli/status", "")
	}
	return s.send(s.accounts, "GET", "/api/v1/cli/status", "", "Authorization", "Bearer "+key)
}

// testEvent calls POST /api/v1/cli/test-event with key and body.
func (s *stack) testEvent(key, body string) reply {
	s.t.Helper()
	return s.send(s.accounts, "POST", "/api/v1/cli/test-event", body, "Authorization", "Bearer "+key)
}

// admin calls the accounts admin API and returns data.
func (s *stack) admin(method, path string, body any) map[string]any {
	s.t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	r := s.send(s.accounts, method, path, string(b), "Authorization", "Bearer "+adminToken)
	if r.status >= 300 {
		s.t.Fatalf("%s %s: %d %s", method, path, r.status, r.raw)
	}
	if n, err := strconv.ParseInt(r.header.Get("X-Catalog-Seq"), 10, 64); err == nil && n > s.seq {
		s.seq = n
	}
	data, _ := r.body["data"].(map[string]any)
	return data
}

func (s *stack) id(method, path string, body any) int64 {
	s.t.Helper()
	return int64(s.admin(method, path, body)["id"].(float64))
}

// sync waits on the catalog barrier for everything written so far.
func (s *stack) sync() {
	s.t.Helper()
	if !s.noTracking {
		s.admin("GET", fmt.Sprintf("/admin/v1/catalog/sync?seq=%d&timeout=10s", s.seq), nil)
	}
}

// program makes an advertiser, a program and a live key; extra program
// fields on top.
func (s *stack) program(extra map[string]any) (int64, string) {
	s.t.Helper()
	adv := s.id("POST", "/admin/v1/advertisers", map[string]any{"name": "Brand", "email": "b@brand.example"})
	body := map[string]any{"advertiser_id": adv, "name": "Shop", "domain": "shop.example", "commission_type": "percent", "commission_rate": 10}
	for k, v := range extra {
		body[k] = v
	}
	prog := s.id("POST", "/admin/v1/programs", body)
	key, _ := s.key(prog)
	s.sync()
	return prog, key
}

func (s *stack) key(prog int64) (string, int64) {
	s.t.Helper()
	d := s.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/keys", prog), map[string]any{})
	return d["key"].(string), int64(d["id"].(float64))
}

// count runs a count query on pool.
func (s *stack) count(pool *pgxpool.Pool, sql string, args ...any) int {
	s.t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		s.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s; last: %s", what, last)
		}
		time.Sleep(20 * time.Millisecond) // a poll interval, not a wait for an outcome
	}
}

// path reads a nested value of a decoded JSON body: path("data", "x").
func path(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
