package security_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/auth/oidctest"
)

// svc listen with the CLI's login token (issue 22: "authenticated with the
// login token or the program key"): a person signs the CLI in (start, the
// provider's callback, the confirmation, the poll), and the opaque
// svc_cli_ token webhooks cannot read itself is verified through accounts'
// internal route: it starts and polls a listener of a program the person
// is a member of, gets 403 on another program, and a token accounts does
// not know gets 401, as does the token once its user is suspended.
func TestWebhooksListenWithTheLoginToken(t *testing.T) {
	t.Parallel()
	e := startWithProvider(t, "accounts", "webhooks")
	adv := e.id("POST", "/admin/v1/advertisers", map[string]any{"name": "Listen Login", "email": "owner@listen-login.example"})
	prog := func(name string) int64 {
		return e.id("POST", "/admin/v1/programs", map[string]any{"advertiser_id": adv, "name": name, "domain": "listen-login.example",
			"commission_type": "percent", "commission_rate": 10})
	}
	a, b := prog("Mine"), prog("Theirs")
	dev := e.id("POST", "/admin/v1/users", map[string]any{"email": "dev@listen-login.example"})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/members", a), map[string]any{"user_id": dev, "active": true, "permissions": []string{"tracking:read"}})
	e.sync()

	// The CLI's sign-in, as svc login does it.
	c := e.clientOf(t, "198.51.100.140")
	started := c.do("POST", "/api/v1/cli/auth/start", map[string]any{}).want(t, 201)
	link, err := oidctest.ParseAuthURL(started.str("data", "url"))
	if err != nil {
		t.Fatal(err)
	}
	state := started.str("data", "state")
	cb := c.do("POST", "/api/v1/cli/auth/callback", map[string]any{"state": state,
		"id_token": e.p.IDToken(t, oidctest.Claims{Email: "dev@listen-login.example", EmailVerified: true, Nonce: link.Nonce})}).want(t, 200)
	c.do("POST", "/api/v1/cli/auth/confirm", map[string]any{"confirm_token": cb.str("data", "confirm_token")}).want(t, 200)
	token := c.do("GET", "/api/v1/cli/auth/poll?state="+url.QueryEscape(state), nil).want(t, 200).str("data", "token")
	if !strings.HasPrefix(token, "svc_cli_") {
		t.Fatalf("no login token: %q", token)
	}

	withToken := e.client("198.51.100.141").withKey(token)
	r := withToken.do("POST", fmt.Sprintf("/api/v1/programs/%d/webhooks/listen", a), map[string]any{}).want(t, 201)
	id := int64(r.get("data", "id").(float64))
	withToken.do("GET", fmt.Sprintf("/api/v1/programs/%d/webhooks/listen/%d/events?after=0&wait=0", a, id), nil).want(t, 200)
	if r := withToken.do("POST", fmt.Sprintf("/api/v1/programs/%d/webhooks/listen", b), map[string]any{}).want(t, 403); r.str("error", "message") == "" {
		t.Fatalf("403 without a message: %s", r.Raw)
	}
	unknown := "svc_cli_" + strings.Repeat("q", len(token)-len("svc_cli_"))
	e.client("198.51.100.142").withKey(unknown).do("POST", fmt.Sprintf("/api/v1/programs/%d/webhooks/listen", a), map[string]any{}).want(t, 401)
	withToken.do("DELETE", fmt.Sprintf("/api/v1/programs/%d/webhooks/listen/%d", a, id), nil).want(t, 204)

	// Suspended: refused as soon as the replica knows, though accounts'
	// verdict on the token is still cached (it was asked a moment ago).
	e.admin("PATCH", fmt.Sprintf("/admin/v1/users/%d", dev), map[string]any{"blocked": true})
	e.sync()
	withToken.do("POST", fmt.Sprintf("/api/v1/programs/%d/webhooks/listen", a), map[string]any{}).want(t, 401)
}
