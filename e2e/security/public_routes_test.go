package security_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	analytics "github.com/svc-dev/svc/services/analytics/server"
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

// keyedProgram is a program of its own advertiser with a live key, made
// through the admin API (not yet synced).
type keyedProgram struct {
	id  int64
	key string
}

func (e *env) keyedProgram(name string, extra map[string]any) keyedProgram {
	e.t.Helper()
	adv := e.id("POST", "/admin/v1/advertisers", map[string]any{"name": name, "email": strings.ToLower(name) + "@brand.example"})
	body := map[string]any{"advertiser_id": adv, "name": name, "domain": strings.ToLower(name) + ".example",
		"commission_type": "percent", "commission_rate": 10}
	for k, v := range extra {
		body[k] = v
	}
	p := keyedProgram{id: e.id("POST", "/admin/v1/programs", body)}
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
	p := e.keyedProgram("Guarded", nil)
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

// signedSession is a dashboard session of user, signed with the stack's
// fixed session key (stacktest.Defaults) as accounts signs them.
func signedSession(t *testing.T, user int64) string {
	t.Helper()
	issuer, err := session.NewIssuer(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize)), analytics.SessionIssuer, time.Hour, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := issuer.Issue(user, session.KindDashboard)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// waitFor polls cond until it holds or 30 seconds pass (events reach
// the other services through Kafka).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// countRows runs a count(*) in service's schema.
func (e *env) countRows(service, query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.Stack.Instance(service).Platform().Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %s: %v", service, query, err)
	}
	return n
}

// "Only a test event sent with the program API key counts toward
// integration verification": a key-less test click or lead naming
// someone else's program is stored (the spec lets test mode go without a
// key) but completes nothing, on the dashboard's status, readiness and
// the CLI's status alike; the same events sent with the program's key
// count once each.
func TestOnlyKeyedTestEventsCountTowardVerification(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{"TRACK_CLICK_RATE_LIMIT": "1000", "TRACK_LEAD_RATE_LIMIT": "1000"}, "tracking", "analytics", "accounts")
	victim := e.keyedProgram("Victim", map[string]any{"payment_tracking_mode": "s2s"})
	owner := e.id("POST", "/admin/v1/users", map[string]any{"email": "owner@victim.example", "name": "Owner"})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/members", victim.id), map[string]any{"user_id": owner, "active": true, "permissions": []string{"tracking:read"}})
	vPartner := e.id("POST", "/admin/v1/partners", map[string]any{"name": "VP", "email": "vp@partners.example"})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", victim.id), map[string]any{"partner_id": vPartner, "approved": true})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/links", victim.id), map[string]any{"partner_id": vPartner, "code": "VICTIM", "active": true})
	// The attacker's own program and link: a test click needs a link, not
	// one of the program it names.
	attacker := e.keyedProgram("Attacker", map[string]any{"allowed_origins": []string{"https://evil.example"}})
	aPartner := e.id("POST", "/admin/v1/partners", map[string]any{"name": "AP", "email": "ap@partners.example"})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", attacker.id), map[string]any{"partner_id": aPartner, "approved": true})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/links", attacker.id), map[string]any{"partner_id": aPartner, "code": "EVIL", "active": true})
	e.sync()

	evil := e.client("203.0.113.66")
	testMode := map[string]any{"test_mode": true, "program_id": victim.id}
	r := evil.do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://evil.example/?via=EVIL", "additional_data": testMode},
		"Origin", "https://evil.example").want(t, 200)
	if r.get("data", "programId") != float64(victim.id) || r.get("data", "test_mode") != true {
		t.Fatalf("key-less test click: %s", r.Raw)
	}
	r = evil.do("POST", "/api/v1/track/lead", map[string]any{"additional_data": testMode}).want(t, 200)
	if r.get("data", "programId") != float64(victim.id) || r.get("data", "test_mode") != true {
		t.Fatalf("key-less test lead: %s", r.Raw)
	}
	// Stored, as the spec's test mode asks, without the key.
	if n := e.countRows("tracking", `SELECT count(*) FROM affiliate_click_events WHERE program_id = $1 AND is_test`, victim.id); n != 1 {
		t.Fatalf("%d test clicks stored", n)
	}
	if n := e.countRows("tracking", `SELECT count(*) FROM lead_events WHERE program_id = $1 AND is_test AND NOT via_api_key`, victim.id); n != 1 {
		t.Fatalf("%d key-less test leads stored", n)
	}

	owners := e.client("198.51.100.7").withKey(signedSession(t, owner))
	status := func() reply {
		return owners.do("GET", fmt.Sprintf("/api/tracking/status/%d", victim.id), nil).want(t, 200)
	}
	brand := e.client("198.51.100.8").withKey(victim.key)
	readiness := func() map[string]string {
		r := brand.do("GET", "/api/v1/programs/me/readiness", nil).want(t, 200)
		out := map[string]string{}
		checks, _ := r.get("data", "checks").([]any)
		for _, c := range checks {
			m, _ := c.(map[string]any)
			out[fmt.Sprint(m["name"])] = fmt.Sprint(m["status"])
		}
		return out
	}
	cliStatus := func() reply { return brand.do("GET", "/api/v1/cli/status", nil).want(t, 200) }

	// The program's key sends a test click: events of one program keep
	// their order on the topic, so once it counts, the key-less ones
	// before it have been seen too.
	brand.do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://victim.example/?via=VICTIM",
		"additional_data": map[string]any{"test_mode": true}}).want(t, 200)
	waitFor(t, "the keyed test click on the dashboard and the CLI", func() bool {
		return status().get("data", "stepStatuses", "pageview") == "complete" && cliStatus().get("data", "stepStatuses", "pageview") == "complete"
	})
	for name, r := range map[string]reply{"dashboard": status(), "cli": cliStatus()} {
		if n := r.get("data", "statistics", "pageview", "testEventCount"); n != 1.0 {
			t.Errorf("%s: pageview testEventCount %v, want 1 (the keyed click only): %s", name, n, r.Raw)
		}
		if got := r.get("data", "stepStatuses", "referrals"); got != "pending" {
			t.Errorf("%s: referrals %v after a key-less test lead only: %s", name, got, r.Raw)
		}
		if n := r.get("data", "statistics", "referrals", "testEventCount"); n != 0.0 {
			t.Errorf("%s: referrals testEventCount %v", name, n)
		}
	}
	if got := readiness(); got["tracker"] != "pass" || got["leads"] != "fail" {
		t.Errorf("readiness after a keyed test click and a key-less test lead: %v", got)
	}
	if n := e.countRows("analytics", `SELECT count(*) FROM test_events WHERE program_id = $1`, victim.id); n != 1 {
		t.Errorf("analytics keeps %d test events, want the keyed click only", n)
	}
	if n := e.countRows("accounts", `SELECT count(*) FROM integration_test_events WHERE program_id = $1`, victim.id); n != 1 {
		t.Errorf("accounts keeps %d test events, want the keyed click only", n)
	}

	// The program's key sends a test lead: now it counts, once.
	brand.do("POST", "/api/v1/track/lead", map[string]any{"additional_data": map[string]any{"test_mode": true}}).want(t, 200)
	waitFor(t, "the keyed test lead on the dashboard and the CLI", func() bool {
		return status().get("data", "stepStatuses", "referrals") == "complete" && cliStatus().get("data", "stepStatuses", "referrals") == "complete"
	})
	for name, r := range map[string]reply{"dashboard": status(), "cli": cliStatus()} {
		if n := r.get("data", "statistics", "referrals", "testEventCount"); n != 1.0 {
			t.Errorf("%s: referrals testEventCount %v, want 1", name, n)
		}
	}
	if got := readiness(); got["tracker"] != "pass" || got["leads"] != "pass" {
		t.Errorf("readiness after keyed test events: %v", got)
	}
}

// The `svc test` fixture partner (made by the CLI's test events) is no
// partner of the program's: it counts neither in status's hasPartners nor
// in performance's partners and totalPartners, as in the CLI's status; a
// real approved partner still counts.
func TestFixturePartnerIsNoPartner(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{"TRACK_CLICK_RATE_LIMIT": "1000"}, "tracking", "analytics", "accounts")
	p := e.keyedProgram("Fixtures", nil)
	owner := e.id("POST", "/admin/v1/users", map[string]any{"email": "owner@fixtures.example", "name": "Owner"})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/members", p.id), map[string]any{"user_id": owner, "active": true, "permissions": []string{"tracking:read"}})
	e.sync()

	brand := e.client("198.51.100.30").withKey(p.key)
	r := brand.do("POST", "/api/v1/cli/test-event", map[string]any{"event_type": "click"}).want(t, 200)
	if r.get("data", "test_mode") != true {
		t.Fatalf("test click: %s", r.Raw)
	}
	// The fixture exists: accounts made the partner and its approved
	// enrolment, and analytics has both.
	fixture := e.countRows("accounts", `SELECT count(*) FROM partners WHERE email = $1`, fmt.Sprintf("test-partner+%d@svc.invalid", p.id))
	if fixture != 1 {
		t.Fatalf("%d fixture partners in accounts", fixture)
	}
	e.sync()
	if n := e.countRows("analytics", `SELECT count(*) FROM partner_programs WHERE program_id = $1 AND approved`, p.id); n != 1 {
		t.Fatalf("analytics has %d approved enrolments, want the fixture's", n)
	}

	owners := e.client("198.51.100.31").withKey(signedSession(t, owner))
	status := owners.do("GET", fmt.Sprintf("/api/tracking/status/%d", p.id), nil).want(t, 200)
	cli := brand.do("GET", "/api/v1/cli/status", nil).want(t, 200)
	perf := owners.do("GET", fmt.Sprintf("/api/tracking/performance/%d?period=7d", p.id), nil).want(t, 200)
	partnersOf := func(perf reply) (total any, days float64) {
		rows, _ := perf.get("data").([]any)
		for _, d := range rows {
			n, _ := d.(map[string]any)["partners"].(float64)
			days += n
		}
		return perf.get("metrics", "totalPartners"), days
	}
	if got := status.get("data", "hasPartners"); got != false {
		t.Errorf("dashboard status hasPartners %v with only the fixture partner", got)
	}
	if got := cli.get("data", "hasPartners"); got != false {
		t.Errorf("CLI status hasPartners %v with only the fixture partner", got)
	}
	if total, days := partnersOf(perf); total != 0.0 || days != 0 {
		t.Errorf("performance with only the fixture partner: totalPartners %v, days' partners %v", total, days)
	}
	if got := perf.get("metrics", "partnersTrend", "trendDirection"); got != "stable" {
		t.Errorf("partnersTrend %v", got)
	}

	// A real partner counts.
	real := e.id("POST", "/admin/v1/partners", map[string]any{"name": "Real", "email": "real@partners.example"})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", p.id), map[string]any{"partner_id": real, "approved": true})
	e.sync()
	status = owners.do("GET", fmt.Sprintf("/api/tracking/status/%d", p.id), nil).want(t, 200)
	cli = brand.do("GET", "/api/v1/cli/status", nil).want(t, 200)
	perf = owners.do("GET", fmt.Sprintf("/api/tracking/performance/%d?period=7d", p.id), nil).want(t, 200)
	if status.get("data", "hasPartners") != true || cli.get("data", "hasPartners") != true {
		t.Errorf("a real partner: dashboard hasPartners %v, CLI %v", status.get("data", "hasPartners"), cli.get("data", "hasPartners"))
	}
	if total, days := partnersOf(perf); total != 1.0 || days != 1 {
		t.Errorf("a real partner: totalPartners %v, days' partners %v", total, days)
	}
	// The same in another time zone (the buckets' query).
	perf = owners.do("GET", fmt.Sprintf("/api/tracking/performance/%d?period=7d&timezone=Asia/Kolkata", p.id), nil).want(t, 200)
	if total, days := partnersOf(perf); total != 1.0 || days != 1 {
		t.Errorf("in Asia/Kolkata: totalPartners %v, days' partners %v", total, days)
	}
}

// existing_click_id: "when no customer has the id, a new customer is
// created with it", for any id of 1 to 128 characters from A-Z a-z 0-9
// and . _ ~ - (an id another tool or an older tracker set), not only ids
// of the product's own shape; the customer is then reused by that id and
// leads find it. An id outside that set is ignored: the click gets a new
// id, never a refusal.
func TestExistingClickIDOfAnyDocumentedShape(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{"TRACK_CLICK_RATE_LIMIT": "1000", "TRACK_LEAD_RATE_LIMIT": "1000"}, "tracking", "accounts")
	p := e.keyedProgram("Adopt", nil)
	var partners [2]int64
	for i, code := range []string{"ADOPT1", "ADOPT2"} {
		partners[i] = e.id("POST", "/admin/v1/partners", map[string]any{"name": code, "email": strings.ToLower(code) + "@partners.example"})
		e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", p.id), map[string]any{"partner_id": partners[i], "approved": true})
		e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/links", p.id), map[string]any{"partner_id": partners[i], "code": code, "active": true})
	}
	e.sync()
	visitor := e.client("198.51.100.40")
	customers := func(clickID string) int {
		return e.countRows("tracking", `SELECT count(*) FROM customers WHERE click_id = $1`, clickID)
	}

	for _, id := range []string{"rwf_9f8e7d6c-5b4a-4c3d-8e2f-1a0b9c8d7e6f", "ABC.def_123~x", "x", strings.Repeat("a", 128)} {
		t.Run(id, func(t *testing.T) {
			r := visitor.do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://adopt.example/?via=ADOPT1", "existing_click_id": id}).want(t, 200)
			if r.str("click_id") != id {
				t.Fatalf("click_id %q, want the visitor's %q: %s", r.str("click_id"), id, r.Raw)
			}
			var first int64
			var status string
			if err := e.Stack.Instance("tracking").Platform().Pool.QueryRow(context.Background(),
				`SELECT first_partner_id, status FROM customers WHERE click_id = $1 AND program_id = $2`, id, p.id).Scan(&first, &status); err != nil {
				t.Fatal(err)
			}
			if first != partners[0] || status != "click" {
				t.Fatalf("customer: first partner %d, status %s", first, status)
			}
			// The same id through the other partner's link: the customer is
			// reused and keeps its first partner; the click is recorded.
			r = visitor.do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://adopt.example/?via=ADOPT2", "existing_click_id": id}).want(t, 200)
			if r.str("click_id") != id || customers(id) != 1 {
				t.Fatalf("second click: %s; %d customers", r.Raw, customers(id))
			}
			if n := e.countRows("tracking", `SELECT count(*) FROM affiliate_click_events WHERE click_id = $1`, id); n != 2 {
				t.Fatalf("%d clicks recorded under %q", n, id)
			}
			// A lead finds the customer by that id.
			visitor.withKey(p.key).do("POST", "/api/v1/track/lead", map[string]any{"click_id": id, "customer_key": "user-" + id[:1]}).want(t, 200)
			if n := e.countRows("tracking", `SELECT count(*) FROM customers WHERE click_id = $1 AND status = 'lead'`, id); n != 1 {
				t.Fatalf("the lead did not settle the adopted customer")
			}
		})
	}
	for _, id := range []string{"has space", "slash/y", "quote\"d", "semi;colon", "é-accent", strings.Repeat("b", 129)} {
		t.Run("ignored "+id[:min(len(id), 12)], func(t *testing.T) {
			r := visitor.do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://adopt.example/?via=ADOPT1", "existing_click_id": id}).want(t, 200)
			if got := r.str("click_id"); got == id || !strings.HasPrefix(got, "cust_") {
				t.Fatalf("click_id %q for an id outside the documented set", got)
			}
			if customers(id) != 0 {
				t.Fatalf("a customer was made with %q", id)
			}
		})
	}
}
