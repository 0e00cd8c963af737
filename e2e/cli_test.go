package e2e

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The command-line sign-in as `svc login` runs it against `make run`:
// start, the provider's sign-in page (the local stack's stand-in, which
// completes the callback through the gateway), poll for the login token,
// then init and programs with it.
func TestCommandLineSignInThroughTheGateway(t *testing.T) {
	t.Parallel()
	s := startStack(t, newStackConfig(t))
	c := newClient(t, s, "203.0.113.200")

	start := c.do("POST", "/api/v1/cli/auth/start", map[string]any{}).want(t, 201)
	state, signIn := start.str("data", "state"), start.str("data", "url")
	if state == "" || !strings.HasPrefix(signIn, "http://127.0.0.1:") {
		t.Fatalf("auth/start: %s", start.raw)
	}
	if r := c.do("GET", "/api/v1/cli/auth/poll?state="+url.QueryEscape(state), nil).want(t, 200); r.str("data", "status") != "pending" {
		t.Fatalf("poll before sign-in: %s", r.raw)
	}

	// The browser opens the link; the sign-in page posts the id_token to
	// the callback through the gateway and shows its answer.
	resp, err := http.Get(signIn)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("sign-in page: %d %s", resp.StatusCode, page)
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
