package e2e

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

var (
	formAction = regexp.MustCompile(`<form method="post" action="([^"]*)">`)
	formField  = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)
)

// The dashboard link `make run` prints signs the demo owner in: start →
// the local stand-in provider's page (which a browser submits by itself;
// here its form is posted) → the callback's redirect to /dashboard/ with
// the session in the fragment → the owner's programs with that session.
// Every answer of accounts is checked against api/openapi.yaml.
func TestDashboardSignInThroughTheGateway(t *testing.T) {
	t.Parallel()
	s := startStack(t, newStackConfig(t))
	link := s.Gateway + "/api/v1/dashboard/auth/start?return_to=/dashboard/"
	if !strings.Contains(s.output(), link) {
		t.Fatalf("make run did not print the dashboard link %s:\n%s", link, s.output())
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(req *http.Request, documented bool) (*http.Response, string) {
		t.Helper()
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if documented {
			validateAgainstOpenAPI(t, req, resp)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(raw)
	}

	req, _ := http.NewRequest("GET", link, nil)
	resp, raw := send(req, true)
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("start: %d %s", resp.StatusCode, raw)
	}
	req, _ = http.NewRequest("GET", resp.Header.Get("Location"), nil)
	resp, page := send(req, false) // the provider's page, not ours
	m := formAction.FindStringSubmatch(page)
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("provider page %d: %s", resp.StatusCode, page)
	}
	form := url.Values{}
	for _, f := range formField.FindAllStringSubmatch(page, -1) {
		form.Set(html.UnescapeString(f[1]), html.UnescapeString(f[2]))
	}
	req, _ = http.NewRequest("POST", html.UnescapeString(m[1]), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, raw = send(req, true)
	path, frag, _ := strings.Cut(resp.Header.Get("Location"), "#")
	q, _ := url.ParseQuery(frag)
	if resp.StatusCode != http.StatusSeeOther || path != "/dashboard/" || q.Get("session") == "" {
		t.Fatalf("callback %d %q %s", resp.StatusCode, resp.Header.Get("Location"), raw)
	}

	c := newClient(t, s, "203.0.113.201")
	me := c.withKey(q.Get("session")).do("GET", "/api/v1/dashboard/me", nil).want(t, 200)
	found := false
	progs, _ := me.get("data", "programs").([]any)
	for _, p := range progs {
		if pm, _ := p.(map[string]any); pm != nil && fmt.Sprint(pm["id"]) == s.ProgramID {
			found = true
		}
	}
	if me.str("data", "user", "email") != "owner@demo-brand.example" || !found {
		t.Fatalf("me: %s (demo program %s)", me.raw, s.ProgramID)
	}
	c.do("GET", "/api/v1/dashboard/me", nil).
		wantPlatformError(t, 401, "UnauthorizedError", "Missing or malformed Authorization header. Expected: Bearer <session_token>")
	c.withKey(s.TestKey).do("GET", "/api/v1/dashboard/me", nil).
		wantPlatformError(t, 401, "UnauthorizedError", "Invalid session token. Sign in again.")
	// A replayed callback is refused.
	req, _ = http.NewRequest("POST", html.UnescapeString(m[1]), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, raw = send(req, true); resp.StatusCode != 400 || !strings.Contains(raw, "SIGNIN_BROWSER_MISMATCH") {
		t.Fatalf("replayed callback without the cleared cookie: %d %s", resp.StatusCode, raw)
	}
}
