package security_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// Abuse of the public routes (issue 23, "Abuse of public routes"): what a
// client with no credential, or with a key of its own, can make the
// product do to other programs or to the service.

// statementLog is a pgx.QueryTracer on every service's pool counting the
// statements each schema runs, by text: a test asks how many times a
// lookup reached the database.
type statementLog struct {
	mu     sync.Mutex
	counts map[string]int // schema + "\x00" + sql
}

func (l *statementLog) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	key := conn.Config().RuntimeParams["search_path"] + "\x00" + d.SQL
	l.mu.Lock()
	l.counts[key]++
	l.mu.Unlock()
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// count is how many statements of schema containing fragment ran so far.
func (l *statementLog) count(schema, fragment string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k, c := range l.counts {
		s, sql, _ := strings.Cut(k, "\x00")
		if s == schema && strings.Contains(sql, fragment) {
			n += c
		}
	}
	return n
}

// startTraced is start with every statement of the services counted.
func startTraced(t *testing.T, vars map[string]string, only ...string) (*env, *statementLog) {
	t.Helper()
	log := &statementLog{counts: map[string]int{}}
	all := platformtest.With(platformtest.With(platformtest.Env(t), stacktest.Defaults()), vars)
	st, err := stack.Start(context.Background(), stack.Options{
		Env:      func(k string) string { return all[k] },
		Only:     only,
		Platform: []platform.Option{platform.WithQueryTracer(log)},
	})
	if err != nil {
		t.Fatalf("start the stack: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	gw := httptest.NewServer(gateway.New(st.Handlers()))
	t.Cleanup(gw.Close)
	return &env{t: t, Stack: st, Gateway: gw.URL}, log
}

// program is a program of its own advertiser with a live key, made
// through the admin API (not yet synced).
type program struct {
	id  int64
	key string
}

func (e *env) program(name string, extra map[string]any) program {
	e.t.Helper()
	adv := e.id("POST", "/admin/v1/advertisers", map[string]any{"name": name, "email": strings.ToLower(name) + "@brand.example"})
	body := map[string]any{"advertiser_id": adv, "name": name, "domain": strings.ToLower(name) + ".example",
		"commission_type": "percent", "commission_rate": 10}
	for k, v := range extra {
		body[k] = v
	}
	p := program{id: e.id("POST", "/admin/v1/programs", body)}
	p.key, _ = e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/keys", p.id), map[string]any{"test": false})["key"].(string)
	return p
}

// wantRateHeaders fails unless r carries the X-RateLimit-* headers of a
// bucket of limit with remaining left.
func wantRateHeaders(t *testing.T, r reply, limit, remaining int) {
	t.Helper()
	if got := r.Header.Get("X-RateLimit-Limit"); got != strconv.Itoa(limit) {
		t.Errorf("%d: X-RateLimit-Limit %q, want %d", r.Status, got, limit)
	}
	if got := r.Header.Get("X-RateLimit-Remaining"); got != strconv.Itoa(remaining) {
		t.Errorf("%d: X-RateLimit-Remaining %q, want %d", r.Status, got, remaining)
	}
	if reset, err := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64); err != nil || reset <= 0 {
		t.Errorf("%d: X-RateLimit-Reset %q", r.Status, r.Header.Get("X-RateLimit-Reset"))
	}
}

// Readiness and the key's sources guard their key lookup as sale and
// refund do: every 401 carries the failed-authentication bucket's
// X-RateLimit-* headers and counts against the client IP; once the IP's
// allowance is used up, the route answers 429 before looking any key up
// (even a valid one), while other addresses and the valid key elsewhere
// are unaffected.
func TestKeyRoutesGuardTheKeyLookup(t *testing.T) {
	t.Parallel()
	const failedAuth = 3
	e, stmts := startTraced(t, map[string]string{"FAILED_AUTH_RATE_LIMIT": strconv.Itoa(failedAuth)}, "accounts", "analytics")
	p := e.program("Guarded", nil)
	e.sync()
	lookups := func() int { return stmts.count("analytics", "FROM api_keys WHERE key_hash") }

	for i, route := range []string{"/api/v1/programs/me/readiness", "/api/v1/programs/me/analytics/sources"} {
		t.Run(route, func(t *testing.T) {
			guesser := e.client(fmt.Sprintf("198.51.100.%d", 10+i))
			before := lookups()
			for n := 1; n <= failedAuth; n++ {
				r := guesser.withKey(fmt.Sprintf("guess-%d-0123456789abcdef", n)).do("GET", route, nil).want(t, 401)
				if r.str("error", "code") != "invalid_key" || r.str("error", "message") != "Invalid API token." {
					t.Fatalf("guess %d: %s", n, r.Raw)
				}
				wantRateHeaders(t, r, failedAuth, failedAuth-n)
			}
			if got := lookups() - before; got != failedAuth {
				t.Fatalf("%d key lookups for %d guesses", got, failedAuth)
			}
			// The allowance is used up: refused before the lookup, even
			// with the program's real key.
			before = lookups()
			r := guesser.withKey(p.key).do("GET", route, nil).want(t, 429)
			if r.str("error", "code") != "rate_limited" || r.get("error", "retry_after_seconds") == nil || r.Header.Get("Retry-After") == "" {
				t.Fatalf("after the allowance: %s %v", r.Raw, r.Header)
			}
			wantRateHeaders(t, r, failedAuth, 0)
			guesser.withKey("guess-more-0123456789abcdef").do("GET", route, nil).want(t, 429)
			if got := lookups() - before; got != 0 {
				t.Fatalf("%d key lookups after the allowance was used up", got)
			}

			// No header at all: a 401 with the headers, counted.
			other := e.client(fmt.Sprintf("198.51.100.%d", 20+i))
			r = other.do("GET", route, nil).want(t, 401)
			if r.str("error", "code") != "invalid_key" || r.str("error", "message") != "Missing or malformed Authorization header. Expected: Bearer <api_token>." {
				t.Fatalf("no header: %s", r.Raw)
			}
			wantRateHeaders(t, r, failedAuth, failedAuth-1)
			// The real key from another address: the route's own bucket
			// (30 a minute per key), not the failed-auth one.
			r = other.withKey(p.key).do("GET", route, nil).want(t, 200)
			if got := r.Header.Get("X-RateLimit-Limit"); got != "30" {
				t.Fatalf("a valid key: X-RateLimit-Limit %q, want the route's 30", got)
			}
		})
	}
}
