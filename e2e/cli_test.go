package e2e

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The command-line sign-in as `svc login` runs it against `make run`:
// start (its code), the provider's sign-in page in a browser (the local
// stack's stand-in, whose form posts itself to the callback through the
// gateway), the page the sign-in lands on (the same code, and a confirm
// button the person presses once they have compared it), poll for the
// login token, then init and programs with it.
func TestCommandLineSignInThroughTheGateway(t *testing.T) {
	t.Parallel()
	s := startStack(t, newStackConfig(t))
	c := newClient(t, s, "203.0.113.200")

	start := c.do("POST", "/api/v1/cli/auth/start", map[string]any{}).want(t, 201)
	state, signIn, code := start.str("data", "state"), start.str("data", "url"), start.str("data", "user_code")
	if state == "" || !strings.HasPrefix(signIn, "http://127.0.0.1:") || len(code) != 9 {
		t.Fatalf("auth/start: %s", start.raw)
	}
	if r := c.do("GET", "/api/v1/cli/auth/poll?state="+url.QueryEscape(state), nil).want(t, 200); r.str("data", "status") != "pending" {
		t.Fatalf("poll before sign-in: %s", r.raw)
	}

	// The browser opens the link; the sign-in page's form posts the
	// id_token to the callback through the gateway.
	browse := func(method, u string, form url.Values) string {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, u, body)
		req.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("%s %s: %d %s", method, u, resp.StatusCode, page)
		}
		return string(page)
	}
	submit := func(page string) (string, url.Values) {
		t.Helper()
		m := formAction.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no form in %s", page)
		}
		form := url.Values{}
		for _, f := range formField.FindAllStringSubmatch(page, -1) {
			form.Set(html.UnescapeString(f[1]), html.UnescapeString(f[2]))
		}
		return html.UnescapeString(m[1]), form
	}
	action, form := submit(browse("GET", signIn, nil))
	landing := browse("POST", action, form)
	// The person compares the page's code with the terminal's; until they
	// confirm, the poller gets nothing.
	if !strings.Contains(landing, `data-testid="user-code">`+code+`<`) {
		t.Fatalf("the landing page does not show %s: %s", code, landing)
	}
	if r := c.do("GET", "/api/v1/cli/auth/poll?state="+url.QueryEscape(state), nil).want(t, 200); r.str("data", "status") != "pending" {
		t.Fatalf("poll before confirmation: %s", r.raw)
	}
	confirmPath, confirm := submit(landing)
	if done := browse("POST", s.Gateway+confirmPath, confirm); !strings.Contains(done, "Return to your terminal") {
		t.Fatalf("confirmed page: %s", done)
	}

	poll := c.do("GET", "/api/v1/cli/auth/poll?state="+url.QueryEscape(state), nil).want(t, 200)
	token := poll.str("data", "token")
	if poll.str("data", "status") != "complete" || !strings.HasPrefix(token, "svc_cli_") {
		t.Fatalf("poll after sign-in: %s", poll.raw)
	}
	c.do("GET", "/api/v1/cli/auth/poll?state="+url.QueryEscape(state), nil).
		wantPlatformError(t, 400, "BadRequestError", "Session already consumed")

	cli := c.withKey(token)
	name := uniqueID("E2E Program")
	created := cli.do("POST", "/api/v1/cli/init", map[string]any{
		"name": name, "domain": "e2e-brand.example", "commission_type": "percent", "commission_rate": 15,
	}).want(t, 201)
	if created.get("data") == nil {
		t.Fatalf("init: %s", created.raw)
	}
	cli.do("POST", "/api/v1/cli/init", map[string]any{
		"name": "x", "domain": "x.example", "commission_type": "percent", "commission_rate": 101,
	}).wantPlatformError(t, 400, "BadRequestError", "commission_rate is a percentage for this type and cannot exceed 100")
	list := cli.do("GET", "/api/v1/cli/programs", nil).want(t, 200)
	if !strings.Contains(list.raw, name) || !strings.Contains(list.raw, "Demo Program") {
		t.Fatalf("programs lacks the new or the demo program: %s", list.raw)
	}
}
