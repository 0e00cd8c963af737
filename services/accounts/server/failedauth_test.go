package server_test

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// from sends a request as client ip (X-Forwarded-For through the trusted
// loopback peer) with a raw Authorization value.
func (s *stack) from(ip, method, path, authorization, body string) reply {
	s.t.Helper()
	req, err := newRequest(method, s.base+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Forwarded-For", ip)
	return s.send(req)
}

// metric reads one sample of the service's /metrics, 0 when absent.
func (s *stack) metric(sample string) int {
	s.t.Helper()
	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return 0
}

// One failed-authentication allowance per client IP covers every route
// that checks a token (admin token, CLI login token, program API key,
// dashboard session); once used up, the IP is refused 429 before any
// lookup, valid credentials included, while other IPs and the per-token
// buckets are untouched.
func TestFailedAuthIsLimitedPerIPBeforeTheLookup(t *testing.T) {
	t.Parallel()
	// A frozen clock: the refusals must all fall in one minute window.
	s := start(t, map[string]string{"FAILED_AUTH_RATE_LIMIT": "3"}, platform.WithClock(platformtest.NewClock(time.Now()).Now))
	f := s.settingsFixture()
	const attacker, other = "203.0.113.80", "198.51.100.80"
	settingsPath := "/api/v1/programs/" + itoa(f.program) + "/settings"
	programPath := "/admin/v1/programs/" + itoa(f.program)
	const invalidKeys = `apikey_lookups_total{outcome="invalid"}`

	wantLimit := func(t *testing.T, r reply, status int, remaining string) {
		t.Helper()
		if r.status != status || r.header.Get("X-RateLimit-Limit") != "3" || r.header.Get("X-RateLimit-Remaining") != remaining {
			t.Fatalf("%d %v %s, want %d with remaining %s", r.status, r.header, r.raw, status, remaining)
		}
	}
	t.Run("three failures on three route families use the allowance up", func(t *testing.T) {
		wantLimit(t, s.from(attacker, "GET", programPath, "Bearer guess", ""), 401, "2")
		wantLimit(t, s.from(attacker, "GET", "/api/v1/cli/programs", "Bearer guess", ""), 401, "1")
		before := s.metric(invalidKeys)
		wantLimit(t, s.from(attacker, "GET", "/api/v1/cli/status", "Bearer svc_live_guess", ""), 401, "0")
		if got := s.metric(invalidKeys) - before; got != 1 {
			t.Fatalf("%d key lookups, want 1", got)
		}
	})
	t.Run("then every token route refuses that IP before any lookup", func(t *testing.T) {
		before := s.metric(invalidKeys)
		for _, r := range []reply{
			s.from(attacker, "GET", "/api/v1/cli/status", "Bearer svc_live_guess2", ""),
			s.from(attacker, "POST", "/api/v1/cli/test-event", "Bearer svc_live_guess3", `{"event_type":"click"}`),
			s.from(attacker, "GET", settingsPath, "Bearer "+f.member, ""),
			s.from(attacker, "GET", programPath, "Bearer "+adminToken, ""),
			s.from(attacker, "GET", "/api/v1/cli/programs", "Bearer guess", ""),
		} {
			wantLimit(t, r, 429, "0")
			if e, _ := r.body["error"].(map[string]any); e["code"] != "rate_limited" || r.header.Get("Retry-After") == "" {
				t.Fatalf("%s", r.raw)
			}
		}
		if got := s.metric(invalidKeys) - before; got != 0 {
			t.Fatalf("%d key lookups while limited", got)
		}
	})
	t.Run("another IP keeps its own allowance and the tokens their buckets", func(t *testing.T) {
		if r := s.from(other, "GET", settingsPath, "Bearer "+f.member, ""); r.status != 200 || r.header.Get("X-RateLimit-Limit") != "30" || r.header.Get("X-RateLimit-Remaining") != "29" {
			t.Fatalf("settings: %d %v %s", r.status, r.header, r.raw)
		}
		if r := s.from(other, "GET", programPath, "Bearer "+adminToken, ""); r.status != 200 || r.header.Get("X-RateLimit-Limit") != "1200" {
			t.Fatalf("admin: %d %v %s", r.status, r.header, r.raw)
		}
		wantLimit(t, s.from(other, "GET", "/api/v1/cli/status", "Bearer svc_live_guess", ""), 401, "2")
	})
	t.Run("key-less CLI routes are not guarded and count per IP", func(t *testing.T) {
		r := s.from(attacker, "POST", "/api/v1/cli/stripe-connect", "Bearer anything", `{}`)
		if r.status != 410 || r.header.Get("X-RateLimit-Limit") != "60" {
			t.Fatalf("%d %v", r.status, r.header)
		}
	})
	t.Run("an IPv6 client is one client per /64", func(t *testing.T) {
		for i, ip := range []string{"2001:db8:5:6::1", "2001:db8:5:6::2", "2001:db8:5:6:ffff::3"} {
			wantLimit(t, s.from(ip, "GET", programPath, "Bearer guess", ""), 401, strconv.Itoa(2-i))
		}
		wantLimit(t, s.from("2001:db8:5:6::99", "GET", programPath, "Bearer "+adminToken, ""), 429, "0")
		wantLimit(t, s.from("2001:db8:5:7::1", "GET", programPath, "Bearer guess", ""), 401, "2")
	})
}
