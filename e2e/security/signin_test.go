package security_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/auth/oidctest"
)

// signinEnv is a stack behind the local gateway with a test OpenID
// provider; the gateway's address is known before the services start, as
// PUBLIC_URL (the provider's redirect_uri) needs it.
type signinEnv struct {
	*env
	p *oidctest.Provider
}

func startWithProvider(t *testing.T, only ...string) *signinEnv {
	t.Helper()
	p := oidctest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	vars := p.Env()
	vars["PUBLIC_URL"] = base
	st := stacktest.Start(t, vars, only...)
	gw := httptest.NewUnstartedServer(gateway.New(st.Handlers()))
	_ = gw.Listener.Close()
	gw.Listener = ln
	gw.Start()
	t.Cleanup(gw.Close)
	return &signinEnv{env: &env{t: t, Stack: st, Gateway: base}, p: p}
}

// browser is a cookie jar that does not follow redirects, from one address;
// every answer off the admin API is checked against api/openapi.yaml.
type browser struct {
	t  *testing.T
	e  *signinEnv
	ip string
	hc *http.Client
	// accept is the Accept header sent ("": none).
	accept string
}

// browser is a new browser failing t.
func (e *signinEnv) browser(t *testing.T, ip string) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, e: e, ip: ip, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) send(method, path string, form url.Values) reply {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	u := path
	if strings.HasPrefix(path, "/") {
		u = b.e.Gateway + path
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("X-Forwarded-For", b.ip)
	if b.accept != "" {
		req.Header.Set("Accept", b.accept)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(u, b.e.Gateway) {
		validate(b.t, req, resp)
	}
	raw, _ := io.ReadAll(resp.Body)
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

// clientOf is e.client failing t (a subtest) instead of the test.
func (e *env) clientOf(t *testing.T, ip string) *client {
	c := e.client(ip)
	c.t = t
	return c
}

// dashboardSignIn runs the dashboard sign-in from start (with query) to
// the callback's redirect, and returns that redirect's Location.
func (b *browser) dashboardSignIn(query url.Values) string {
	b.t.Helper()
	a := b.send("GET", "/api/v1/dashboard/auth/start?"+query.Encode(), nil).want(b.t, http.StatusFound)
	page := b.send("GET", a.Header.Get("Location"), nil).want(b.t, http.StatusOK)
	action, fields, err := oidctest.FormPost(page.Raw)
	if err != nil {
		b.t.Fatalf("provider page: %v: %s", err, page.Raw)
	}
	cb := b.send("POST", action, fields).want(b.t, http.StatusSeeOther)
	return cb.Header.Get("Location")
}

// Login CSRF: the page keeps a session fragment only when it carries the
// nonce its own tab stored before starting the sign-in (the browser test
// shows the page's side). The server's part: return_to stays under
// /dashboard/, and the tab's nonce (tab_nonce) comes back in the fragment
// beside the session, nowhere else.
func TestDashboardSignInReturnsOnlyToTheDashboardWithTheTabNonce(t *testing.T) {
	t.Parallel()
	e := startWithProvider(t, "accounts")
	e.id("POST", "/admin/v1/advertisers", map[string]any{"name": "Brand", "email": "owner@brand.example"})
	e.sync()
	e.p.SetSignIn(&oidctest.SignIn{Email: "owner@brand.example", EmailVerified: true})

	t.Run("return_to outside /dashboard/ is a 400", func(t *testing.T) {
		for _, rt := range []string{"/", "/dashboard", "/dashboardx/", "/api/v1/cli/programs", "/admin/v1/users",
			"/dashboard/../admin/v1/users", "/dashboard/%2e%2e/admin/v1/users", "/dashboard/..%2fadmin", "/dashboard/%2E%2E",
			"/dashboard/./../x", "/%64ashboard/"} {
			b := e.browser(t, "203.0.113.20")
			a := b.send("GET", "/api/v1/dashboard/auth/start?return_to="+url.QueryEscape(rt), nil)
			if a.Status != 400 || a.str("error", "message") != "return_to must be a path under /dashboard/, like /dashboard/" {
				t.Fatalf("return_to %q: %d %s", rt, a.Status, a.Raw)
			}
			if a.Header.Get("Location") != "" || len(a.Header.Values("Set-Cookie")) != 0 {
				t.Fatalf("return_to %q: refused but redirected or bound: %v", rt, a.Header)
			}
		}
	})

	t.Run("a tab_nonce that is not 16 to 128 URL-safe characters is a 400", func(t *testing.T) {
		for _, n := range []string{"short", strings.Repeat("a", 129), "aaaaaaaaaaaaaaaa&session=x", "aaaaaaaaaaaaaaa%", "aaaaaaaaaaaaaaa\u00e9"} {
			b := e.browser(t, "203.0.113.21")
			a := b.send("GET", "/api/v1/dashboard/auth/start?"+url.Values{"return_to": {"/dashboard/"}, "tab_nonce": {n}}.Encode(), nil)
			if a.Status != 400 || a.str("error", "message") != "tab_nonce must be 16 to 128 letters, digits, '-' or '_'" {
				t.Fatalf("tab_nonce %q: %d %s", n, a.Status, a.Raw)
			}
		}
	})

	t.Run("the tab_nonce comes back in the fragment", func(t *testing.T) {
		nonce := "Tab-nonce_0123456789abcdefXYZ"
		loc := e.browser(t, "203.0.113.22").dashboardSignIn(url.Values{"return_to": {"/dashboard/?program=3"}, "tab_nonce": {nonce}})
		path, frag, _ := strings.Cut(loc, "#")
		q, _ := url.ParseQuery(frag)
		if path != "/dashboard/?program=3" || q.Get("session") == "" || q.Get("expires_at") == "" || q.Get("tab_nonce") != nonce {
			t.Fatalf("callback redirects to %q", loc)
		}
		if strings.Contains(path, nonce) {
			t.Fatalf("the nonce left the fragment: %q", loc)
		}
	})

	t.Run("without a tab_nonce the fragment has none", func(t *testing.T) {
		loc := e.browser(t, "203.0.113.23").dashboardSignIn(url.Values{})
		path, frag, _ := strings.Cut(loc, "#")
		q, _ := url.ParseQuery(frag)
		if path != "/dashboard/" || q.Get("session") == "" || q.Has("tab_nonce") {
			t.Fatalf("callback redirects to %q", loc)
		}
	})
}
