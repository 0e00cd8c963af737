package security_test

import (
	"context"
	"crypto/sha256"
	"html"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/auth/oidctest"
)

var (
	userCodeShape = regexp.MustCompile(`^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$`)
	confirmForm   = regexp.MustCompile(`<form method="post" action="([^"]*)">`)
	confirmField  = regexp.MustCompile(`<input type="hidden" name="confirm_token" value="([^"]*)">`)
)

// Phishing the command-line sign-in: whoever calls auth/start can send its
// link to someone else and poll for that person's login token. Device-flow
// pattern: start shows a short user code (the CLI prints it), the page the
// sign-in lands on shows the same code, and the token is released only
// once the person has confirmed there, with a one-time value only that
// page holds, that the codes match.
func TestCLISignInReleasesTheTokenOnlyAfterThePersonConfirmsTheCode(t *testing.T) {
	t.Parallel()
	e := startWithProvider(t, "accounts")
	pool := e.Stack.Instance("accounts").Platform().Pool
	tokensOf := func(t *testing.T, email string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM cli_login_tokens t JOIN users u ON u.id = t.user_id
			WHERE lower(u.email) = lower($1)`, email).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	start := func(t *testing.T) (state, code string, link oidctest.AuthRequest) {
		t.Helper()
		r := e.clientOf(t, "198.51.100.30").do("POST", "/api/v1/cli/auth/start", map[string]any{}).want(t, 201)
		link, err := oidctest.ParseAuthURL(r.str("data", "url"))
		if err != nil {
			t.Fatalf("start: %s: %v", r.Raw, err)
		}
		code = r.str("data", "user_code")
		if !userCodeShape.MatchString(code) {
			t.Fatalf("start shows no user code: %s", r.Raw)
		}
		return r.str("data", "state"), code, link
	}
	poll := func(t *testing.T, state string) reply {
		t.Helper()
		return e.clientOf(t, "198.51.100.30").do("GET", "/api/v1/cli/auth/poll?state="+url.QueryEscape(state), nil).want(t, 200)
	}

	t.Run("signed in but not confirmed: the poller gets no token", func(t *testing.T) {
		state, code, link := start(t)
		attacker, victim := e.clientOf(t, "198.51.100.30"), e.clientOf(t, "203.0.113.31")
		cb := victim.do("POST", "/api/v1/cli/auth/callback", map[string]any{"state": state,
			"id_token": e.p.IDToken(t, oidctest.Claims{Email: "victim@brand.example", EmailVerified: true, Nonce: link.Nonce})}).want(t, 200)
		if cb.str("data", "status") != "confirmation_required" || cb.str("data", "user_code") != code || cb.str("data", "confirm_token") == "" ||
			!strings.Contains(cb.str("data", "message"), code) {
			t.Fatalf("callback: %s", cb.Raw)
		}
		for i := 0; i < 3; i++ {
			if r := poll(t, state); r.Raw != `{"data":{"status":"pending"}}` {
				t.Fatalf("poll before confirmation: %s", r.Raw)
			}
		}
		if n := tokensOf(t, "victim@brand.example"); n != 0 {
			t.Fatalf("%d login tokens before confirmation", n)
		}
		// The poller holds the state, not the page's one-time value.
		for _, body := range []map[string]any{{"confirm_token": state}, {"confirm_token": "guess"}} {
			r := attacker.do("POST", "/api/v1/cli/auth/confirm", body).want(t, 404)
			if r.str("error", "message") != "Confirmation not found or already used" {
				t.Fatalf("confirm with %v: %s", body, r.Raw)
			}
		}
		r := attacker.do("POST", "/api/v1/cli/auth/confirm", map[string]any{}).want(t, 400)
		if r.str("error", "message") != "Missing required fields: confirm_token" {
			t.Fatalf("confirm without a value: %s", r.Raw)
		}
		if r := poll(t, state); r.str("data", "status") != "pending" || r.str("data", "token") != "" {
			t.Fatalf("poll after refused confirmations: %s", r.Raw)
		}

		// The person confirms: then, and only then, the token.
		ok := victim.do("POST", "/api/v1/cli/auth/confirm", map[string]any{"confirm_token": cb.str("data", "confirm_token")}).want(t, 200)
		if ok.str("data", "status") != "confirmed" {
			t.Fatalf("confirm: %s", ok.Raw)
		}
		got := poll(t, state)
		if got.str("data", "status") != "complete" || !strings.HasPrefix(got.str("data", "token"), "svc_cli_") {
			t.Fatalf("poll after confirmation: %s", got.Raw)
		}
		if n := tokensOf(t, "victim@brand.example"); n != 1 {
			t.Fatalf("%d login tokens after confirmation", n)
		}
		// One time only.
		victim.do("POST", "/api/v1/cli/auth/confirm", map[string]any{"confirm_token": cb.str("data", "confirm_token")}).want(t, 404)
	})

	t.Run("the browser's landing page shows the code and confirms with a one-time form", func(t *testing.T) {
		state, code, link := start(t)
		b := e.browser(t, "203.0.113.32")
		form := url.Values{"state": {state}, "id_token": {e.p.IDToken(t, oidctest.Claims{Email: "person@brand.example", EmailVerified: true, Nonce: link.Nonce})}}
		page := b.sendHTML("POST", "/api/v1/cli/auth/callback", form).want(t, 200)
		if ct := page.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Fatalf("landing page is %s: %s", ct, page.Raw)
		}
		csp := page.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "form-action 'self'") ||
			page.Header.Get("Cache-Control") != "no-store" || page.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Fatalf("landing page headers %v", page.Header)
		}
		if !strings.Contains(page.Raw, code) || !strings.Contains(page.Raw, "svc login") {
			t.Fatalf("landing page does not show the code %s: %s", code, page.Raw)
		}
		action, field := confirmForm.FindStringSubmatch(page.Raw), confirmField.FindStringSubmatch(page.Raw)
		if action == nil || field == nil || html.UnescapeString(action[1]) != "/api/v1/cli/auth/confirm" {
			t.Fatalf("no confirm form: %s", page.Raw)
		}
		if r := poll(t, state); r.str("data", "status") != "pending" {
			t.Fatalf("poll before confirmation: %s", r.Raw)
		}
		// Someone else's page posting a made-up value confirms nothing.
		b.sendHTML("POST", "/api/v1/cli/auth/confirm", url.Values{"confirm_token": {"x" + html.UnescapeString(field[1])}}).want(t, 404)
		done := b.sendHTML("POST", "/api/v1/cli/auth/confirm", url.Values{"confirm_token": {html.UnescapeString(field[1])}}).want(t, 200)
		if !strings.HasPrefix(done.Header.Get("Content-Type"), "text/html") || !strings.Contains(done.Raw, "terminal") {
			t.Fatalf("confirmed page: %v %s", done.Header, done.Raw)
		}
		if r := poll(t, state); r.str("data", "status") != "complete" || r.str("data", "token") == "" {
			t.Fatalf("poll after confirmation: %s", r.Raw)
		}
		b.sendHTML("POST", "/api/v1/cli/auth/confirm", url.Values{"confirm_token": {html.UnescapeString(field[1])}}).want(t, 404)
	})

	t.Run("the value is stored hashed", func(t *testing.T) {
		state, _, link := start(t)
		cb := e.clientOf(t, "203.0.113.33").do("POST", "/api/v1/cli/auth/callback", map[string]any{"state": state,
			"id_token": e.p.IDToken(t, oidctest.Claims{Email: "hashed@brand.example", EmailVerified: true, Nonce: link.Nonce})}).want(t, 200)
		sum := sha256.Sum256([]byte(cb.str("data", "confirm_token")))
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM cli_login_sessions WHERE confirm_hash = $1 AND confirmed_at IS NULL`, sum[:]).Scan(&n); err != nil || n != 1 {
			t.Fatalf("sessions with the value's hash: %d, %v", n, err)
		}
	})
}

// sendHTML is send as a browser navigation: it asks for a page.
func (b *browser) sendHTML(method, path string, form url.Values) reply {
	b.t.Helper()
	old := b.accept
	b.accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
	defer func() { b.accept = old }()
	return b.send(method, path, form)
}
