package security_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/auth/oidctest"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// Issue 23, "Sessions cannot be revoked" and "Users are matched by email":
// dashboard sessions are stateless tokens, so a sign-out or a suspension
// must reach every service that accepts them (accounts and analytics), and
// a sign-in must find its account by the provider's issuer and subject,
// never by an email someone else can come to hold.

// signInEnv is a stack (the named services) behind the local gateway with
// a test OpenID provider; PUBLIC_URL is the gateway's address, so the
// dashboard sign-in's callback is reachable, as in production.
type signInEnv struct {
	*env
	p     *oidctest.Provider
	clock *platformtest.Clock
}

func startSignIn(t *testing.T, only ...string) *signInEnv {
	t.Helper()
	clock := platformtest.NewClock(time.Now().UTC().Truncate(time.Second))
	p := oidctest.Start(t, oidctest.WithClock(clock.Now))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	vars := p.Env()
	vars["PUBLIC_URL"] = base
	// A sign-out answers once every replica holds it; make test's loaded
	// stacks can take longer than the product's 5 s to apply an event.
	vars["SIGNOUT_SYNC_TIMEOUT"] = replicaWait.String()
	st := stacktest.StartOn(t, clock, vars, only...)
	gw := httptest.NewUnstartedServer(gateway.New(st.Handlers()))
	_ = gw.Listener.Close()
	gw.Listener = ln
	gw.Start()
	t.Cleanup(gw.Close)
	return &signInEnv{env: &env{t: t, Stack: st, Gateway: base}, p: p, clock: clock}
}

// person is who signs in at the provider: its subject and the email the
// provider currently holds for it.
type person struct{ subject, email string }

// jarClient is a cookie jar that sees redirects instead of following them.
func jarClient(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 40 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// send does one request with c through the gateway and checks the answer
// against api/openapi.yaml.
func (e *signInEnv) send(c *http.Client, req *http.Request) reply {
	e.t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	validate(e.t, req, resp)
	raw, _ := io.ReadAll(resp.Body)
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

// dashboardSignIn signs who in through the dashboard's browser sign-in
// (start, the provider's form post to the callback) and answers the
// callback.
func (e *signInEnv) dashboardSignIn(who person) reply {
	e.t.Helper()
	c := jarClient(e.t)
	req, _ := http.NewRequest("GET", e.Gateway+"/api/v1/dashboard/auth/start?return_to=%2Fdashboard%2F", nil)
	start := e.send(c, req).want(e.t, http.StatusFound)
	ar, err := oidctest.ParseAuthURL(start.Header.Get("Location"))
	if err != nil {
		e.t.Fatal(err)
	}
	idToken := e.p.IDToken(e.t, oidctest.Claims{Subject: who.subject, Email: who.email, EmailVerified: true, Nonce: ar.Nonce})
	form := url.Values{"state": {ar.State}, "id_token": {idToken}}
	req, _ = http.NewRequest("POST", e.Gateway+"/api/v1/dashboard/auth/callback", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return e.send(c, req)
}

// dashboardSession signs who in and returns the session token of the
// callback's redirect.
func (e *signInEnv) dashboardSession(who person) string {
	e.t.Helper()
	r := e.dashboardSignIn(who).want(e.t, http.StatusSeeOther)
	_, frag, _ := strings.Cut(r.Header.Get("Location"), "#")
	q, err := url.ParseQuery(frag)
	if err != nil || q.Get("session") == "" {
		e.t.Fatalf("no session in %q", r.Header.Get("Location"))
	}
	return q.Get("session")
}

// me is accounts' answer to who the session belongs to.
func (e *signInEnv) me(token string) reply {
	e.t.Helper()
	return e.client("198.51.100.7").withKey(token).do("GET", "/api/v1/dashboard/me", nil)
}

// workspace is an advertiser's program with its owner as a member
// (tracking:read and tracking:write), replicated everywhere.
func (e *signInEnv) workspace(owner int64) int64 {
	e.t.Helper()
	adv := e.id("POST", "/admin/v1/advertisers", map[string]any{"name": "Brand", "email": "brand@brand.example"})
	prog := e.id("POST", "/admin/v1/programs", map[string]any{"advertiser_id": adv, "name": "Shop", "domain": "shop.example",
		"commission_type": "fixed", "commission_rate": 5})
	e.admin("POST", "/admin/v1/programs/"+strconv.FormatInt(prog, 10)+"/members",
		map[string]any{"user_id": owner, "active": true, "permissions": []string{"tracking:read", "tracking:write"}})
	e.sync()
	return prog
}

// access is what each service answers a session on the program: accounts'
// me and settings, analytics' performance and status, and, when the stack
// runs commissions, its console commissions list (Status 0 otherwise).
type access struct{ me, settings, performance, status, commissions reply }

func (e *signInEnv) access(token string, prog int64) access {
	e.t.Helper()
	c := e.client("198.51.100.7").withKey(token)
	id := strconv.FormatInt(prog, 10)
	a := access{
		me:          c.do("GET", "/api/v1/dashboard/me", nil),
		settings:    c.do("GET", "/api/v1/programs/"+id+"/settings", nil),
		performance: c.do("GET", "/api/tracking/performance/"+id, nil),
		status:      c.do("GET", "/api/tracking/status/"+id, nil),
	}
	if e.Stack.Instance("commissions") != nil {
		a.commissions = c.do("GET", "/api/v1/programs/"+id+"/commissions", nil)
	}
	return a
}

// commissionsOpen: commissions serves the session, or is not in the stack.
func (a access) commissionsOpen() bool {
	return a.commissions.Status == 0 || a.commissions.Status == 200
}

func (a access) open() bool {
	return a.me.Status == 200 && a.settings.Status == 200 && a.performance.Status == 200 && a.status.Status == 200 && a.commissionsOpen()
}

// wantOpen fails unless every service serves the session.
func (a access) wantOpen(t *testing.T) {
	t.Helper()
	for name, r := range map[string]reply{"me": a.me, "settings": a.settings, "performance": a.performance, "status": a.status, "commissions": a.commissions} {
		if r.Status != 200 && (name != "commissions" || r.Status != 0) {
			t.Fatalf("%s: %d %s, want 200", name, r.Status, r.Raw)
		}
	}
}

// wantMessage fails unless r is status with that error.message.
func wantMessage(t *testing.T, name string, r reply, status int, message string) {
	t.Helper()
	if r.Status != status || r.str("error", "message") != message {
		t.Fatalf("%s: %d %s, want %d %q", name, r.Status, r.Raw, status, message)
	}
}

// wantSignedOut fails unless every service refuses the session as one
// that has to sign in again.
func (a access) wantSignedOut(t *testing.T) {
	t.Helper()
	wantMessage(t, "me", a.me, 401, "Invalid session token. Sign in again.")
	wantMessage(t, "settings", a.settings, 401, "Invalid session token. Sign in again.")
	wantMessage(t, "performance", a.performance, 403, "You do not have access to this program")
	wantMessage(t, "status", a.status, 401, "Missing or invalid session token. Sign in again.")
	if a.commissions.Status != 0 {
		wantMessage(t, "commissions", a.commissions, 401, "Invalid session token. Sign in again.")
	}
}

// count is a row count in service's schema.
func (e *signInEnv) count(service, query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.Stack.Instance(service).Platform().Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %s: %v", service, query, err)
	}
	return n
}

func (e *signInEnv) signOut(headers ...string) reply {
	e.t.Helper()
	return e.client("198.51.100.7").do("POST", "/api/v1/dashboard/auth/signout", nil, headers...)
}

// A signed-out session stops working at once on every service (the
// sign-out answers once every replica has it), other sessions of the same
// user keep working, and the sign-out keeps its contract (204, whatever
// the token).
func TestSignOutEndsTheSessionEverywhere(t *testing.T) {
	t.Parallel()
	e := startSignIn(t, "accounts", "analytics", "commissions")
	owner := person{subject: "sub-owner", email: "owner@brand.example"}
	laptop := e.dashboardSession(owner)
	phone := e.dashboardSession(owner)
	uid := int64(e.me(laptop).want(t, 200).get("data", "user", "id").(float64))
	prog := e.workspace(uid)
	e.access(laptop, prog).wantOpen(t)
	e.access(phone, prog).wantOpen(t)

	r := e.signOut("Authorization", "Bearer "+laptop).want(t, http.StatusNoContent)
	if r.Raw != "" {
		t.Fatalf("sign-out body %q", r.Raw)
	}
	// No barrier here: the sign-out's answer is the promise.
	e.access(laptop, prog).wantSignedOut(t)
	e.access(phone, prog).wantOpen(t)
	if n := e.count("accounts", `SELECT count(*) FROM session_revocations WHERE user_id = $1`, uid); n != 1 {
		t.Fatalf("accounts keeps %d revocations of user %d, want 1", n, uid)
	}
	for _, svc := range []string{"analytics", "commissions"} {
		if n := e.count(svc, `SELECT count(*) FROM session_revocations WHERE user_id = $1`, uid); n != 1 {
			t.Fatalf("%s keeps %d revocations of user %d, want 1", svc, n, uid)
		}
	}

	t.Run("signing out again, without a token or with a foreign one is a 204 that writes nothing", func(t *testing.T) {
		e.signOut("Authorization", "Bearer "+laptop).want(t, http.StatusNoContent)
		e.signOut().want(t, http.StatusNoContent)
		e.signOut("Authorization", "Bearer not-a-session").want(t, http.StatusNoContent)
		e.signOut("Authorization", "Basic x").want(t, http.StatusNoContent)
		if n := e.count("accounts", `SELECT count(*) FROM session_revocations`); n != 1 {
			t.Fatalf("accounts keeps %d revocations, want 1", n)
		}
		e.access(phone, prog).wantOpen(t)
	})

	t.Run("signing in again opens a new session", func(t *testing.T) {
		e.access(e.dashboardSession(owner), prog).wantOpen(t)
	})

	t.Run("revocations are forgotten once their token has expired", func(t *testing.T) {
		e.clock.Advance(13 * time.Hour)
		// Both sessions are past their 12 hours: refused as expired.
		wantMessage(t, "me", e.me(phone), 401, "Session expired. Sign in again.")
		wantMessage(t, "me", e.me(laptop), 401, "Session expired. Sign in again.")
		// The next sign-out sweeps what no token can use any more, on
		// every service.
		fresh := e.dashboardSession(owner)
		e.signOut("Authorization", "Bearer "+fresh).want(t, http.StatusNoContent)
		for _, svc := range []string{"accounts", "analytics", "commissions"} {
			if n := e.count(svc, `SELECT count(*) FROM session_revocations`); n != 1 {
				t.Fatalf("%s keeps %d revocations after the sweep, want 1 (the fresh one)", svc, n)
			}
		}
		e.access(fresh, prog).wantSignedOut(t)
	})
}

// A suspended user's sessions are refused by every service once the
// operator's PATCH reaches its catalog replica, and work again once
// restored. Accounts refuses at once; analytics as soon as its replica
// applies catalog.user.upserted, which takes well under the required 5 s
// on an idle stack (the test logs it). The test allows replicaWait: make
// test runs race-built stacks side by side on two cores, where a consumer
// has taken over 10 s to apply an event, and a flaky bound proves nothing.
// Catalog lag in production is watched by the catalog lag alerts.
// replicaWait is how long a test waits for a catalog replica to apply an
// event (the catalog barrier's own window).
const replicaWait = 25 * time.Second

func TestSuspendedUserIsRefusedEverywhere(t *testing.T) {
	t.Parallel()
	e := startSignIn(t, "accounts", "analytics", "commissions")
	owner := person{subject: "sub-owner", email: "owner@brand.example"}
	tok := e.dashboardSession(owner)
	uid := int64(e.me(tok).want(t, 200).get("data", "user", "id").(float64))
	prog := e.workspace(uid)
	e.access(tok, prog).wantOpen(t)
	user := "/admin/v1/users/" + strconv.FormatInt(uid, 10)

	began := time.Now()
	u := e.admin("PATCH", user, map[string]any{"blocked": true})
	if u["blocked"] != true || u["id"] != float64(uid) || u["email"] != owner.email {
		t.Fatalf("PATCH %s: %v", user, u)
	}
	var a access
	for {
		a = e.access(tok, prog)
		if a.me.Status == 403 && a.settings.Status == 403 && a.performance.Status == 403 && a.status.Status == 401 && a.commissions.Status == 401 {
			break
		}
		if time.Since(began) > replicaWait {
			t.Fatalf("%s after the suspension: me %d, settings %d, performance %d, status %d", replicaWait, a.me.Status, a.settings.Status, a.performance.Status, a.status.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("suspension refused on every service %s after the PATCH", time.Since(began).Round(time.Millisecond))
	wantMessage(t, "me", a.me, 403, "Your account has been suspended.")
	wantMessage(t, "settings", a.settings, 403, "Your account has been suspended.")
	wantMessage(t, "performance", a.performance, 403, "You do not have access to this program")
	wantMessage(t, "status", a.status, 401, "Missing or invalid session token. Sign in again.")
	wantMessage(t, "commissions", a.commissions, 401, "Invalid session token. Sign in again.")
	if n := e.count("analytics", `SELECT count(*) FROM users WHERE id = $1 AND blocked`, uid); n != 1 {
		t.Fatalf("analytics' users replica: %d blocked rows for user %d", n, uid)
	}
	// A suspended person cannot sign in for a fresh session either.
	wantMessage(t, "sign-in", e.dashboardSignIn(owner), 403, "Your account has been suspended.")

	restored := e.admin("PATCH", user, map[string]any{"blocked": false})
	if restored["blocked"] != false {
		t.Fatalf("PATCH %s: %v", user, restored)
	}
	began = time.Now()
	for !e.access(tok, prog).open() {
		if time.Since(began) > replicaWait {
			e.access(tok, prog).wantOpen(t)
		}
		time.Sleep(50 * time.Millisecond)
	}

	t.Run("the admin route refuses what it cannot apply", func(t *testing.T) {
		c := e.client("").withAuth("Bearer " + stacktest.AdminToken)
		for _, tc := range []struct {
			path string
			body any
			want int
		}{
			{user, map[string]any{}, 400},
			{user, map[string]any{"blocked": "yes"}, 400},
			{user, map[string]any{"blocked": true, "email": "x@y.example"}, 400},
			{"/admin/v1/users/999999", map[string]any{"blocked": true}, 404},
			{"/admin/v1/users/abc", map[string]any{"blocked": true}, 404},
		} {
			if r := c.do("PATCH", tc.path, tc.body); r.Status != tc.want {
				t.Errorf("PATCH %s %v: %d %s, want %d", tc.path, tc.body, r.Status, r.Raw, tc.want)
			}
		}
		e.access(tok, prog).wantOpen(t)
	})
}
