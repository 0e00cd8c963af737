package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/auth/oidctest"
	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	"github.com/svc-dev/svc/services/accounts/server"
)

// dash is the stack (accounts only) behind the local gateway, with a test
// OpenID provider and an injected clock, and a browser: a cookie jar and a
// client that does not follow redirects.
type dash struct {
	t       *testing.T
	base    string
	p       *oidctest.Provider
	clock   *platformtest.Clock
	pool    *pgxpool.Pool
	browser *http.Client
	verify  *session.Verifier
}

// startDash starts it; extra variables (SIGNUP=invite) replace the
// stack's.
func startDash(t *testing.T, extra ...map[string]string) *dash {
	t.Helper()
	clock := platformtest.NewClock(time.Now().UTC().Truncate(time.Second))
	p := oidctest.Start(t, oidctest.WithClock(clock.Now))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	env := p.Env()
	env["PUBLIC_URL"] = base
	for _, e := range extra {
		for k, v := range e {
			env[k] = v
		}
	}
	st := stacktest.StartOn(t, clock, env, "accounts")
	gw := httptest.NewUnstartedServer(gateway.New(st.Handlers()))
	_ = gw.Listener.Close()
	gw.Listener = ln
	gw.Start()
	t.Cleanup(gw.Close)

	seed, _ := stacktestSeed()
	v, err := session.NewVerifier(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey), server.SessionIssuer, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	d := &dash{t: t, base: base, p: p, clock: clock, pool: st.Instance("accounts").Platform().Pool, verify: v}
	d.browser = d.newBrowser()
	return d
}

func stacktestSeed() ([]byte, error) {
	return bytes.Repeat([]byte{1}, ed25519.SeedSize), nil
}

func (d *dash) newBrowser() *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		d.t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (d *dash) send(c *http.Client, req *http.Request) answer {
	d.t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func (d *dash) get(c *http.Client, rawURL, bearer string) answer {
	d.t.Helper()
	req, err := http.NewRequest("GET", rawURL, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	return d.send(c, req)
}

func (d *dash) postForm(c *http.Client, rawURL string, form url.Values) answer {
	d.t.Helper()
	req, err := http.NewRequest("POST", rawURL, strings.NewReader(form.Encode()))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return d.send(c, req)
}

func (d *dash) admin(method, path, body string) answer {
	d.t.Helper()
	req, err := http.NewRequest(method, d.base+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+stacktest.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	a := d.send(http.DefaultClient, req)
	if a.status != 201 {
		d.t.Fatalf("%s %s: %d %s", method, path, a.status, a.raw)
	}
	return a
}

func (d *dash) id(a answer) int64 {
	return int64(a.body["data"].(map[string]any)["id"].(float64))
}

// start begins a sign-in in c and returns the provider's request.
func (d *dash) start(c *http.Client, returnTo string) oidctest.AuthRequest {
	d.t.Helper()
	a := d.get(c, d.base+"/api/v1/dashboard/auth/start?return_to="+url.QueryEscape(returnTo), "")
	if a.status != http.StatusFound {
		d.t.Fatalf("start: %d %s", a.status, a.raw)
	}
	loc := a.header.Get("Location")
	if !strings.HasPrefix(loc, d.p.AuthURL()+"?") {
		d.t.Fatalf("start redirects to %s, want the provider's %s", loc, d.p.AuthURL())
	}
	req, err := oidctest.ParseAuthURL(loc)
	if err != nil {
		d.t.Fatal(err)
	}
	if req.ResponseMode != "form_post" || req.ResponseType != "id_token" || req.RedirectURI != d.base+"/api/v1/dashboard/auth/callback" {
		d.t.Fatalf("provider request %+v", req)
	}
	return req
}

// callback posts what the provider's page would.
func (d *dash) callback(c *http.Client, state, idToken string) answer {
	d.t.Helper()
	return d.postForm(c, d.base+"/api/v1/dashboard/auth/callback", url.Values{"state": {state}, "id_token": {idToken}})
}

func (d *dash) token(email string, nonce string) string {
	return d.p.IDToken(d.t, oidctest.Claims{Email: email, EmailVerified: true, Nonce: nonce})
}

// sessionFrom reads the session token from a callback's redirect.
func (d *dash) sessionFrom(a answer, wantPath string) string {
	d.t.Helper()
	if a.status != http.StatusSeeOther {
		d.t.Fatalf("callback: %d %s", a.status, a.raw)
	}
	loc := a.header.Get("Location")
	path, frag, ok := strings.Cut(loc, "#")
	if !ok || path != wantPath {
		d.t.Fatalf("callback redirects to %q, want %s#session=…", loc, wantPath)
	}
	q, err := url.ParseQuery(frag)
	if err != nil || q.Get("session") == "" {
		d.t.Fatalf("no session in the fragment of %q", loc)
	}
	return q.Get("session")
}

func wantRefusal(t *testing.T, a answer, status int, message, code string) {
	t.Helper()
	e, _ := a.body["error"].(map[string]any)
	if a.status != status || e == nil || e["message"] != message {
		t.Fatalf("got %d %s, want %d %q", a.status, a.raw, status, message)
	}
	if code != "" {
		if det, _ := e["details"].(map[string]any); det == nil || det["code"] != code {
			t.Fatalf("details of %s, want code %s", a.raw, code)
		}
	}
}

func TestDashboardSignIn(t *testing.T) {
	d := startDash(t)
	adv := d.id(d.admin("POST", "/admin/v1/advertisers", `{"name":"Brand","email":"brand@brand.example"}`))
	owner := d.id(d.admin("POST", "/admin/v1/users", `{"email":"owner@brand.example","name":"Owner","advertiser_id":`+strconv.FormatInt(adv, 10)+`}`))
	prog := d.id(d.admin("POST", "/admin/v1/programs", `{"advertiser_id":`+strconv.FormatInt(adv, 10)+`,"name":"Shop","domain":"shop.example","commission_type":"fixed","commission_rate":5}`))
	other := d.id(d.admin("POST", "/admin/v1/programs", `{"advertiser_id":`+strconv.FormatInt(adv, 10)+`,"name":"Inactive","domain":"two.example","commission_type":"fixed","commission_rate":5}`))
	d.admin("POST", "/admin/v1/programs/"+strconv.FormatInt(prog, 10)+"/members", `{"user_id":`+strconv.FormatInt(owner, 10)+`,"active":true,"permissions":["tracking:read","tracking:write"]}`)
	d.admin("POST", "/admin/v1/programs/"+strconv.FormatInt(other, 10)+"/members", `{"user_id":`+strconv.FormatInt(owner, 10)+`,"active":false,"permissions":["tracking:read"]}`)
	d.admin("POST", "/admin/v1/users", `{"email":"blocked@brand.example","blocked":true}`)

	t.Run("happy path through the provider's form-post page", func(t *testing.T) {
		c := d.newBrowser()
		req := d.start(c, "/dashboard/?program=1")
		d.p.SetSignIn(&oidctest.SignIn{Email: "owner@brand.example", EmailVerified: true})
		page := d.get(c, d.p.AuthURL()+"?"+mustQuery(t, req), "")
		action, fields, err := oidctest.FormPost(page.raw)
		if err != nil || action != d.base+"/api/v1/dashboard/auth/callback" {
			t.Fatalf("provider page: %v %s %s", err, action, page.raw)
		}
		a := d.postForm(c, action, fields)
		if a.header.Get("Referrer-Policy") != "no-referrer" || a.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("callback headers %v", a.header)
		}
		tok := d.sessionFrom(a, "/dashboard/?program=1")
		claims, err := d.verify.VerifyKind(tok, session.KindDashboard)
		if err != nil || claims.UserID != owner {
			t.Fatalf("session %+v %v, want a dashboard session of user %d", claims, err, owner)
		}
		// Only hashes are stored, and the sign-in is used up.
		var n int
		if err := d.pool.QueryRow(context.Background(), `SELECT count(*) FROM dashboard_signin_sessions WHERE state_hash = sha256($1::bytea) AND consumed_at IS NOT NULL`, []byte(req.State)).Scan(&n); err != nil || n != 1 {
			t.Fatalf("consumed rows by hash %d %v", n, err)
		}
		// The programs route: active memberships only, with permissions,
		// and the owner's workspace.
		me := d.get(http.DefaultClient, d.base+"/api/v1/dashboard/me", tok)
		want := `{"data":{"programs":[{"advertiser_id":` + strconv.FormatInt(adv, 10) + `,"domain":"shop.example","id":` + strconv.FormatInt(prog, 10) + `,"name":"Shop","permissions":["tracking:read","tracking:write"]}],"user":{"email":"owner@brand.example","id":` + strconv.FormatInt(owner, 10) + `,"name":"Owner"},"workspaces":[{"id":` + strconv.FormatInt(adv, 10) + `,"name":"Brand","owner":true}]}}`
		if me.status != 200 || strings.TrimSpace(me.raw) != want {
			t.Fatalf("me: %d %s\nwant %s", me.status, me.raw, want)
		}
		// The settings route takes the same session.
		if s := d.get(http.DefaultClient, d.base+"/api/v1/programs/"+strconv.FormatInt(prog, 10)+"/settings", tok); s.status != 200 {
			t.Fatalf("settings with the dashboard session: %d %s", s.status, s.raw)
		}
		// Replayed: the same state again, even with the cookie back.
		c.Jar.SetCookies(mustURL(t, d.base+"/api/v1/dashboard/auth/"), []*http.Cookie{{Name: "svc_dashboard_signin", Value: req.State, Path: "/api/v1/dashboard/auth/"}})
		wantRefusal(t, d.callback(c, req.State, d.token("owner@brand.example", req.Nonce)), 404, "Sign-in not found or already used. Sign in again.", "")
	})

	t.Run("default return_to is DASHBOARD_URL", func(t *testing.T) {
		c := d.newBrowser()
		req := d.start(c, "")
		d.sessionFrom(d.callback(c, req.State, d.token("owner@brand.example", req.Nonce)), "/dashboard/")
	})

	t.Run("a new user is created with a workspace and has no programs (SIGNUP=open, the local stack's)", func(t *testing.T) {
		c := d.newBrowser()
		req := d.start(c, "/dashboard/")
		tok := d.sessionFrom(d.callback(c, req.State, d.token("new@brand.example", req.Nonce)), "/dashboard/")
		me := d.get(http.DefaultClient, d.base+"/api/v1/dashboard/me", tok)
		if me.status != 200 || !strings.Contains(me.raw, `"programs":[]`) || !strings.Contains(me.raw, `"name":"new@brand.example","owner":true}]`) {
			t.Fatalf("me: %d %s", me.status, me.raw)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		cases := []struct {
			name          string
			token         func(req oidctest.AuthRequest) string
			state         func(req oidctest.AuthRequest) string
			noCookie      bool
			status        int
			message, code string
		}{
			{name: "unknown state", state: func(oidctest.AuthRequest) string { return "nope" }, status: 404, message: "Sign-in not found or already used. Sign in again."},
			{name: "missing id_token", token: func(oidctest.AuthRequest) string { return "" }, status: 400, message: "Missing required fields: state, id_token"},
			{name: "bad id_token", token: func(oidctest.AuthRequest) string { return "not.a.jwt" }, status: 401, message: "Invalid id_token"},
			{name: "wrong nonce", token: func(oidctest.AuthRequest) string { return d.token("owner@brand.example", "other") }, status: 401, message: "Invalid id_token"},
			{name: "unverified email", token: func(r oidctest.AuthRequest) string {
				return d.p.IDToken(t, oidctest.Claims{Email: "owner@brand.example", EmailVerified: false, Nonce: r.Nonce})
			}, status: 403, message: "Your email address is not verified with your sign-in provider. Verify it there, then try again.", code: "PROVIDER_EMAIL_NOT_VERIFIED"},
			{name: "blocked user", token: func(r oidctest.AuthRequest) string { return d.token("blocked@brand.example", r.Nonce) }, status: 403, message: "Your account has been suspended.", code: "ACCOUNT_BLOCKED"},
			{name: "finished in another browser", noCookie: true, status: 400, message: "This sign-in was started in another browser. Sign in again.", code: "SIGNIN_BROWSER_MISMATCH"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c := d.newBrowser()
				req := d.start(c, "/dashboard/")
				state, tok := req.State, d.token("owner@brand.example", req.Nonce)
				if tc.state != nil {
					state = tc.state(req)
					c.Jar.SetCookies(mustURL(t, d.base+"/api/v1/dashboard/auth/"), []*http.Cookie{{Name: "svc_dashboard_signin", Value: state, Path: "/api/v1/dashboard/auth/"}})
				}
				if tc.token != nil {
					tok = tc.token(req)
				}
				if tc.noCookie {
					c = d.newBrowser()
				}
				a := d.callback(c, state, tok)
				wantRefusal(t, a, tc.status, tc.message, tc.code)
				if strings.Contains(a.header.Get("Location"), "session=") {
					t.Fatalf("a refusal handed out a session: %v", a.header)
				}
			})
		}
	})

	t.Run("expired state", func(t *testing.T) {
		c := d.newBrowser()
		req := d.start(c, "/dashboard/")
		tok := d.token("owner@brand.example", req.Nonce)
		d.clock.Advance(5 * time.Minute)
		wantRefusal(t, d.callback(c, req.State, tok), 400, "Sign-in expired. Sign in again.", "")
	})

	t.Run("open redirects refused", func(t *testing.T) {
		for _, rt := range []string{"https://evil.example/", "//evil.example/", "/\\evil.example", "/%2F%2Fevil.example", "/%5cevil.example", "javascript:alert(1)", "dashboard/", "/dashboard/#x", "/dash\nboard"} {
			a := d.get(d.newBrowser(), d.base+"/api/v1/dashboard/auth/start?return_to="+url.QueryEscape(rt), "")
			wantRefusal(t, a, 400, "return_to must be a path under /dashboard/, like /dashboard/", "")
			if a.header.Get("Location") != "" || len(a.header.Values("Set-Cookie")) != 0 {
				t.Fatalf("%q: refused but redirected or bound: %v", rt, a.header)
			}
		}
	})

	t.Run("me refuses what is not a dashboard session", func(t *testing.T) {
		issuer, err := session.NewIssuer(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize)), server.SessionIssuer, time.Hour, d.clock.Now)
		if err != nil {
			t.Fatal(err)
		}
		cliKind, _, _ := issuer.Issue(owner, session.KindCLI)
		expired, _, _ := issuer.Issue(owner, session.KindDashboard)
		for _, tc := range []struct{ name, bearer, message string }{
			{"no session", "", "Missing or malformed Authorization header. Expected: Bearer <session_token>"},
			{"CLI login token", d.cliLogin("owner@brand.example"), "Invalid session token. Sign in again."},
			{"CLI-kind session token", cliKind, "Invalid session token. Sign in again."},
			{"program API key", "svc_live_" + strings.Repeat("a", 43), "Invalid session token. Sign in again."},
		} {
			t.Run(tc.name, func(t *testing.T) {
				wantRefusal(t, d.get(http.DefaultClient, d.base+"/api/v1/dashboard/me", tc.bearer), 401, tc.message, "")
			})
		}
		d.clock.Advance(2 * time.Hour)
		wantRefusal(t, d.get(http.DefaultClient, d.base+"/api/v1/dashboard/me", expired), 401, "Session expired. Sign in again.", "")
	})

	t.Run("me refuses a user blocked after signing in", func(t *testing.T) {
		c := d.newBrowser()
		req := d.start(c, "/dashboard/")
		tok := d.sessionFrom(d.callback(c, req.State, d.token("later@brand.example", req.Nonce)), "/dashboard/")
		if _, err := d.pool.Exec(context.Background(), `UPDATE users SET blocked = true WHERE email = $1`, "later@brand.example"); err != nil {
			t.Fatal(err)
		}
		wantRefusal(t, d.get(http.DefaultClient, d.base+"/api/v1/dashboard/me", tok), 403, "Your account has been suspended.", "ACCOUNT_BLOCKED")
	})

	t.Run("sign-out clears the sign-in cookie", func(t *testing.T) {
		req, _ := http.NewRequest("POST", d.base+"/api/v1/dashboard/auth/signout", nil)
		a := d.send(d.newBrowser(), req)
		if a.status != 204 || !strings.Contains(a.header.Get("Set-Cookie"), "svc_dashboard_signin=;") {
			t.Fatalf("signout: %d %v", a.status, a.header)
		}
	})
}

// cliLogin runs the command-line sign-in through the gateway and returns
// its login token (svc_cli_…).
func (d *dash) cliLogin(email string) string {
	d.t.Helper()
	req, _ := http.NewRequest("POST", d.base+"/api/v1/cli/auth/start", nil)
	a := d.send(http.DefaultClient, req)
	link, err := oidctest.ParseAuthURL(a.body["data"].(map[string]any)["url"].(string))
	if err != nil {
		d.t.Fatalf("cli start %d %s: %v", a.status, a.raw, err)
	}
	body, _ := json.Marshal(map[string]string{"state": link.State, "id_token": d.token(email, link.Nonce)})
	req, _ = http.NewRequest("POST", d.base+"/api/v1/cli/auth/callback", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	cb := d.send(http.DefaultClient, req)
	cbData, _ := cb.body["data"].(map[string]any)
	confirm, _ := cbData["confirm_token"].(string)
	if cb.status != 200 || confirm == "" {
		d.t.Fatalf("cli callback %d %s", cb.status, cb.raw)
	}
	body, _ = json.Marshal(map[string]string{"confirm_token": confirm})
	req, _ = http.NewRequest("POST", d.base+"/api/v1/cli/auth/confirm", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if a := d.send(http.DefaultClient, req); a.status != 200 {
		d.t.Fatalf("cli confirm %d %s", a.status, a.raw)
	}
	a = d.get(http.DefaultClient, d.base+"/api/v1/cli/auth/poll?state="+url.QueryEscape(link.State), "")
	tok, _ := a.body["data"].(map[string]any)["token"].(string)
	if !strings.HasPrefix(tok, "svc_cli_") {
		d.t.Fatalf("cli poll %d %s", a.status, a.raw)
	}
	// The login token works where it belongs.
	if p := d.get(http.DefaultClient, d.base+"/api/v1/cli/programs", tok); p.status != 200 {
		d.t.Fatalf("cli programs %d %s", p.status, p.raw)
	}
	return tok
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func mustQuery(t *testing.T, r oidctest.AuthRequest) string {
	return url.Values{"client_id": {r.ClientID}, "response_type": {r.ResponseType}, "response_mode": {r.ResponseMode},
		"scope": {r.Scope}, "state": {r.State}, "nonce": {r.Nonce}, "redirect_uri": {r.RedirectURI}}.Encode()
}

// Through the gateway, with a session from the real sign-in: a member
// holding tracking:read only reads the program's settings, and every change
// (payment tracking mode, browser leads, origins, window) is 403 and
// changes nothing; the same change by a tracking:write member is applied.
func TestSettingsChangesNeedTrackingWrite(t *testing.T) {
	d := startDash(t)
	adv := d.id(d.admin("POST", "/admin/v1/advertisers", `{"name":"Brand","email":"brand@rw.example"}`))
	prog := d.id(d.admin("POST", "/admin/v1/programs", `{"advertiser_id":`+strconv.FormatInt(adv, 10)+`,"name":"Shop","domain":"shop.example","commission_type":"fixed","commission_rate":5}`))
	member := func(email string, permissions string) string {
		uid := d.id(d.admin("POST", "/admin/v1/users", `{"email":"`+email+`"}`))
		d.admin("POST", "/admin/v1/programs/"+strconv.FormatInt(prog, 10)+"/members", `{"user_id":`+strconv.FormatInt(uid, 10)+`,"active":true,"permissions":`+permissions+`}`)
		c := d.newBrowser()
		req := d.start(c, "")
		return d.sessionFrom(d.callback(c, req.State, d.token(email, req.Nonce)), "/dashboard/")
	}
	reader := member("reader@rw.example", `["tracking:read"]`)
	writer := member("writer@rw.example", `["tracking:read","tracking:write"]`)
	path := d.base + "/api/v1/programs/" + strconv.FormatInt(prog, 10) + "/settings"
	patch := func(tok, body string) answer {
		req, err := http.NewRequest("PATCH", path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		return d.send(http.DefaultClient, req)
	}
	if r := d.get(http.DefaultClient, path, reader); r.status != 200 {
		t.Fatalf("reader GET: %d %s", r.status, r.raw)
	}
	for _, body := range []string{`{"payment_tracking_mode":"s2s"}`, `{"lead_auth_policy":"browser_allowed"}`,
		`{"allowed_origins":["https://evil.example"]}`, `{"attribution_window_days":1}`} {
		r := patch(reader, body)
		e, _ := r.body["error"].(map[string]any)
		if r.status != 403 || e == nil || e["name"] != "ForbiddenError" || e["message"] != "You do not have permission to change this program's settings" {
			t.Fatalf("reader PATCH %s: %d %s", body, r.status, r.raw)
		}
	}
	var mode string
	if err := d.pool.QueryRow(context.Background(), `SELECT payment_tracking_mode FROM programs WHERE id = $1`, prog).Scan(&mode); err != nil || mode != "processor_connect" {
		t.Fatalf("mode %q %v after the reader's PATCH", mode, err)
	}
	if r := patch(writer, `{"payment_tracking_mode":"s2s"}`); r.status != 200 || !strings.Contains(r.raw, `"payment_tracking_mode":"s2s"`) {
		t.Fatalf("writer PATCH: %d %s", r.status, r.raw)
	}
}

// A query value that is not UTF-8 (here return_to) is a 400 before the
// route runs, through the gateway: it used to reach Postgres as a 500
// `Failed to start sign-in`.
func TestDashboardSignInQueryNotUTF8(t *testing.T) {
	d := startDash(t)
	r := d.get(d.newBrowser(), d.base+"/api/v1/dashboard/auth/start?return_to=%2Fdashboard%2F%FF", "")
	e, _ := r.body["error"].(map[string]any)
	if r.status != 400 || e == nil || e["message"] != "Request URL must be valid UTF-8" {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	var n int
	if err := d.pool.QueryRow(context.Background(), `SELECT count(*) FROM dashboard_signin_sessions`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d sign-in sessions written (%v)", n, err)
	}
}
