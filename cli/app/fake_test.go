package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/cli/app"
	"github.com/svc-dev/svc/cli/internal/config"
)

// The fake follows the contract of the /api/v1/cli/* routes (the spec plus
// the accounts service's choices): auth/start → {state,url,expires_at,user_code};
// auth/poll → pending | expired | complete {token,expires_at,user}, then 400
// "Session already consumed"; init → {program, api_key}; programs → [...];
// status → the tracking status shape; test-event → {...}.
const (
	fakeState    = "state-123"
	fakeUserCode = "BDFG-HJKL"
	fakeToken    = "svc_cli_logintokensecretvalue0123456789"
	fakeKey      = "svc_live_ABCDnewkeysecretpartxxxxxxxxxxxxxxxxxxxxxxxxx"
	fakeEmail    = "owner@brand.example"
)

type recorded struct {
	Method, Path, Query, Auth, Body string
}

type fake struct {
	t   *testing.T
	srv *httptest.Server

	mu    sync.Mutex
	reqs  []recorded
	polls int
	// pending is how many polls answer "pending" before the final one.
	pending int
	// final is the status answered after the pending polls: "complete"
	// (default) or "expired".
	final string
	// hold keeps answering pending until release is called.
	hold     bool
	consumed bool
	// override answers a route ("POST /api/v1/cli/init") instead of the
	// default; it gets the request number of that route, from 0.
	override map[string]func(w http.ResponseWriter, r *http.Request, n int)
	counts   map[string]int
	validKey string
}

func newFake(t *testing.T) *fake {
	f := &fake{t: t, final: "complete", override: map[string]func(http.ResponseWriter, *http.Request, int){}, counts: map[string]int{}, validKey: fakeKey}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) URL() string { return f.srv.URL }

// set changes the fake's behaviour under its lock.
func (f *fake) set(fn func(f *fake)) {
	f.mu.Lock()
	fn(f)
	f.mu.Unlock()
}

func (f *fake) release() {
	f.mu.Lock()
	f.hold = false
	f.mu.Unlock()
}

func (f *fake) on(route string, fn func(w http.ResponseWriter, r *http.Request, n int)) {
	f.mu.Lock()
	f.override[route] = fn
	f.mu.Unlock()
}

func (f *fake) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func (f *fake) routeRequests(route string) []recorded {
	var out []recorded
	for _, r := range f.requests() {
		if r.Method+" "+r.Path == route {
			out = append(out, r)
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func platformErr(w http.ResponseWriter, status int, msg string, details map[string]any) {
	if details == nil {
		details = map[string]any{}
	}
	writeJSON(w, status, map[string]any{"data": nil, "error": map[string]any{
		"status": status, "name": "Error", "message": msg, "details": details,
	}})
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	route := r.Method + " " + r.URL.Path
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), string(b)})
	n := f.counts[route]
	f.counts[route]++
	fn := f.override[route]
	f.mu.Unlock()
	w.Header().Set("X-Request-ID", fmt.Sprintf("req-%d", len(f.requests())))
	if fn != nil {
		fn(w, r, n)
		return
	}
	switch route {
	case "POST /api/v1/cli/auth/start":
		writeJSON(w, 200, map[string]any{"data": map[string]any{
			"state": fakeState, "url": f.URL() + "/cli/sign-in?state=" + fakeState,
			"expires_at": time.Now().Add(5 * time.Minute).UTC().Format(time.RFC3339), "user_code": fakeUserCode,
		}})
	case "GET /api/v1/cli/auth/poll":
		f.poll(w, r)
	case "POST /api/v1/cli/init":
		if r.Header.Get("Authorization") != "Bearer "+fakeToken {
			platformErr(w, 401, "Invalid or expired token", nil)
			return
		}
		var in map[string]any
		_ = json.Unmarshal(b, &in)
		prog := map[string]any{"id": 7, "name": in["name"], "domain": in["domain"], "commission_type": in["commission_type"],
			"commission_rate": in["commission_rate"], "duration_months": 0, "cookie_duration": 60}
		writeJSON(w, 201, map[string]any{"data": map[string]any{"program": prog, "api_key": fakeKey}})
	case "GET /api/v1/cli/programs":
		if r.Header.Get("Authorization") != "Bearer "+fakeToken {
			platformErr(w, 401, "Invalid or expired token", nil)
			return
		}
		writeJSON(w, 200, map[string]any{"data": []any{
			map[string]any{"id": 7, "name": "Acme", "domain": "acme.example", "commission_type": "percent", "commission_rate": 12.5, "duration_months": 0},
			map[string]any{"id": 9, "name": "Beta", "domain": "beta.example", "commission_type": "fixed", "commission_rate": 500, "duration_months": 6},
		}})
	case "GET /api/v1/cli/status":
		if !f.keyOK(w, r) {
			return
		}
		writeJSON(w, 200, map[string]any{"data": statusBody()})
	case "POST /api/v1/cli/test-event":
		if !f.keyOK(w, r) {
			return
		}
		var in map[string]any
		_ = json.Unmarshal(b, &in)
		if et, ok := in["event_type"].(string); ok && et != "click" && et != "lead" && et != "sale" {
			platformErr(w, 400, "Invalid event_type: "+et+". Valid: click, lead, sale", nil)
			return
		}
		if in["type"] == "chain" {
			writeJSON(w, 200, map[string]any{"data": map[string]any{"type": "chain", "programId": 7, "test_mode": true, "chain": []any{
				map[string]any{"step": "click", "status": "recorded", "eventId": 21},
				map[string]any{"step": "lead", "status": "recorded", "eventId": 22},
				map[string]any{"step": "sale", "status": "recorded", "eventId": 23},
			}}})
			return
		}
		writeJSON(w, 200, map[string]any{"data": map[string]any{"event_type": in["event_type"], "eventId": 12, "programId": 7,
			"test_mode": true, "message": "Test " + in["event_type"].(string) + " recorded"}})
	default:
		platformErr(w, 404, "Not found", nil)
	}
}

func (f *fake) keyOK(w http.ResponseWriter, r *http.Request) bool {
	h := r.Header.Get("Authorization")
	if !strings.HasPrefix(h, "Bearer ") {
		platformErr(w, 401, "Missing or malformed Authorization header. Expected: Bearer <token>", nil)
		return false
	}
	if strings.TrimPrefix(h, "Bearer ") != f.validKey {
		platformErr(w, 401, "Invalid API token", nil)
		return false
	}
	return true
}

func (f *fake) poll(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("state") == "" {
		platformErr(w, 400, "Missing state parameter", nil)
		return
	}
	if r.URL.Query().Get("state") != fakeState {
		platformErr(w, 404, "Session not found", nil)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.polls++
	switch {
	case f.consumed:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		_, _ = io.WriteString(w, `{"data":null,"error":{"status":400,"name":"BadRequestError","message":"Session already consumed","details":{}}}`)
	case f.hold || f.polls <= f.pending:
		writeJSON(w, 200, map[string]any{"data": map[string]any{"status": "pending"}})
	case f.final == "expired":
		writeJSON(w, 200, map[string]any{"data": map[string]any{"status": "expired"}})
	default:
		f.consumed = true
		writeJSON(w, 200, map[string]any{"data": map[string]any{
			"status": "complete", "token": fakeToken,
			"expires_at": time.Now().Add(30 * 24 * time.Hour).UTC().Format(time.RFC3339),
			"user":       map[string]any{"id": 3, "email": fakeEmail},
		}})
	}
}

func statusBody() map[string]any {
	step := func(n int) map[string]any {
		s := map[string]any{"testEventCount": n, "hasTestEvents": n > 0, "latestTestEvent": nil}
		if n > 0 {
			s["latestTestEvent"] = map[string]any{"id": "e1", "timestamp": "2030-01-01T00:00:00.000Z", "createdAt": "2030-01-01T00:00:00.000Z"}
		}
		return s
	}
	return map[string]any{
		"programId":    "7",
		"stepStatuses": map[string]any{"pageview": "complete", "referrals": "pending", "payments": "pending"},
		"statistics": map[string]any{
			"pageview":  step(2),
			"referrals": step(0),
			"payments": map[string]any{"paymentTrackingMode": "processor_connect", "methodReady": false,
				"processorConnectionStatus": "", "isProcessorConnected": false, "processorAccountId": nil,
				"chargesEnabled": false, "payoutsEnabled": false, "detailsSubmitted": false, "connectionDate": nil},
		},
		"hasPartners": false,
		"lastUpdated": "2030-01-01T00:00:00.000Z",
	}
}

// cli runs the client in-process.
type cli struct {
	t      *testing.T
	dir    string
	env    map[string]string
	stdin  string
	tty    bool
	openFn func(url string) error
	// ctx is the context Run gets (Background when nil).
	ctx context.Context
	// noHTTPClient leaves Options.HTTPClient nil, so the client builds
	// its own from SVC_HTTP_TIMEOUT.
	noHTTPClient bool

	mu     sync.Mutex
	opened []string
	sleeps []time.Duration
}

type result struct {
	code           int
	stdout, stderr string
}

func newCLI(t *testing.T, base string) *cli {
	dir := t.TempDir()
	return &cli{t: t, dir: dir, env: map[string]string{app.EnvConfigDir: dir, app.EnvBaseURL: base, app.EnvPollInterval: "5ms"}}
}

func (c *cli) store() config.Store { return config.Store{Dir: c.dir} }

func (c *cli) run(args ...string) result {
	c.t.Helper()
	var out, errb bytes.Buffer
	stdin := strings.NewReader(c.stdin)
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	var hc *http.Client
	if !c.noHTTPClient {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	code := app.Run(ctx, args, app.Options{
		HTTPClient: hc,
		Stdin:      stdin, Stdout: &out, Stderr: &errb,
		Getenv:     func(k string) string { return c.env[k] },
		IsTerminal: func(s any) bool { return c.tty && (s == stdin || s == &errb) },
		OpenURL: func(_ context.Context, u string) error {
			c.mu.Lock()
			c.opened = append(c.opened, u)
			c.mu.Unlock()
			if c.openFn != nil {
				return c.openFn(u)
			}
			return nil
		},
		Sleep: func(ctx context.Context, d time.Duration) error {
			c.mu.Lock()
			c.sleeps = append(c.sleeps, d)
			c.mu.Unlock()
			return ctx.Err()
		},
		UserConfigDir: func() (string, error) { return "", errors.New("tests set SVC_CONFIG_DIR") },
		Version:       "test",
	})
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// login stores credentials as `svc login` would.
func (c *cli) login(base string) {
	c.t.Helper()
	if err := c.store().SaveCredentials(config.Credentials{BaseURL: base, Token: fakeToken, ExpiresAt: time.Now().Add(time.Hour), User: json.RawMessage(`{"email":"` + fakeEmail + `"}`)}); err != nil {
		c.t.Fatal(err)
	}
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Fatalf("%s does not contain %q:\n%s", what, w, got)
		}
	}
}

func mustNotContain(t *testing.T, what, got string, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(got, b) {
			t.Fatalf("%s contains %q:\n%s", what, b, got)
		}
	}
}

func fileMode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}
