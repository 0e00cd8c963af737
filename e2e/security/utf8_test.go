package security_test

import (
	"context"
	"strings"
	"testing"

	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/auth/oidctest"
)

// Issue 23, "Bad input is never a 5xx", its first three findings (fixed
// before: tracking's click cleans the header, the platform's ValidURL
// refuses URLs that are not UTF-8), checked here through the gateway with
// the issue's own requests.
func TestInvalidUTF8(t *testing.T) {
	vars := oidctest.Start(t).Env()
	vars["PUBLIC_URL"] = "http://gateway.test"
	e := start(t, vars, "accounts", "tracking", "commissions", "analytics")
	fx := newFuzzFixture(e)
	c := e.client("198.51.100.20")

	t.Run("a User-Agent that is not UTF-8: the click is recorded with U+FFFD", func(t *testing.T) {
		r := c.do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://brand.example/?via=FUZZ"}, "User-Agent", "x\xff").want(t, 200)
		var ua string
		if err := e.Stack.Instance("tracking").Platform().Pool.QueryRow(context.Background(),
			"SELECT user_agent FROM tracking.affiliate_click_events WHERE click_id = $1", r.str("click_id")).Scan(&ua); err != nil {
			t.Fatal(err)
		}
		if ua != "x\uFFFD" {
			t.Fatalf("user_agent stored %q", ua)
		}
	})
	// JSON text is UTF-8: a body with a byte that is not is refused on every
	// route that reads one (encoding/json alone would store U+FFFD in place
	// of the byte), and writes nothing.
	t.Run("a body that is not UTF-8: 400, nothing written", func(t *testing.T) {
		admin := e.client("").withAuth("Bearer " + stacktest.AdminToken)
		for _, tc := range []struct {
			c            *client
			method, path string
			body         string
			headers      []string
		}{
			{c, "POST", "/api/v1/track/click", "{\"affiliate_url\":\"https://brand.example/?via=FUZZ&x=\xff\"}", []string{"User-Agent", "utf8-body-click"}},
			{c.withKey(fx.key), "POST", "/api/v1/track/lead", "{\"email\":\"utf8\xe9@brand.example\",\"customer_key\":\"utf8-body\"}", nil},
			{c.withKey(fx.key), "POST", "/api/v1/track/sale", "{\"transaction_id\":\"utf8-body\xc3\",\"amount_cents\":100,\"currency\":\"USD\"}", nil},
			{c.withKey(fx.key), "POST", "/api/v1/track/refund", "{\"transaction_id\":\"utf8-body\",\"refund_amount_cents\":1,\"refund_id\":\"r\x80\"}", nil},
			{c.withKey(fx.session), "PATCH", "/api/v1/programs/" + fx.params["spare_program"] + "/settings", "{\"allowed_origins\":[\"https://sh\xffop.example\"]}", nil},
			{admin, "POST", "/admin/v1/advertisers", "{\"name\":\"utf8-body \xff\",\"email\":\"utf8-body@brand.example\"}", nil},
		} {
			r := tc.c.do(tc.method, tc.path, tc.body, tc.headers...)
			if r.Status != 400 || r.str("error", "message") != "Request body is not valid UTF-8" {
				t.Errorf("%s %s: %d %s", tc.method, tc.path, r.Status, r.Raw)
			}
		}
		for _, q := range []string{
			`SELECT count(*) FROM accounts.advertisers WHERE email = 'utf8-body@brand.example'`,
			`SELECT count(*) FROM commissions.sales WHERE transaction_id LIKE 'utf8-body%'`,
			`SELECT count(*) FROM tracking.affiliate_click_events WHERE user_agent = 'utf8-body-click'`,
			`SELECT count(*) FROM accounts.programs WHERE EXISTS (SELECT 1 FROM unnest(allowed_origins) o WHERE strpos(o, chr(65533)) > 0)`,
		} {
			var n int
			if err := e.Stack.Instance("accounts").Platform().Pool.QueryRow(context.Background(), q).Scan(&n); err != nil || n != 0 {
				t.Errorf("%s: %d, %v; want nothing written", q, n, err)
			}
		}
	})
	t.Run("a query value that is not UTF-8: 400", func(t *testing.T) {
		r := c.do("GET", "/api/v1/dashboard/auth/start?return_to=%2Fdashboard%2F%FF", nil).want(t, 400)
		if r.str("error", "message") != "Request URL must be valid UTF-8" {
			t.Fatalf("%s", r.Raw)
		}
	})
	t.Run("a path parameter that is not UTF-8: 400, in the route's envelope", func(t *testing.T) {
		admin := e.client("").withAuth("Bearer " + stacktest.AdminToken)
		admin.do("GET", "/admin/v1/sales/%C0%AF", nil).want(t, 400)
		r := c.withKey(fx.key).do("POST", "/api/v1/track/sale?x=%C0%AF", map[string]any{"transaction_id": "t", "amount_cents": 1, "currency": "USD"}).want(t, 400)
		if r.str("error", "code") != "invalid_request" {
			t.Fatalf("sale: %s", r.Raw)
		}
	})
	// The spec puts X-RateLimit-* on every answer of its limited routes:
	// their limiter counts the request and sets its headers, then refuses
	// the URL (httpkit.DeferURLCheck). Nothing runs behind it.
	t.Run("a limited route's 400 for a URL that is not UTF-8 carries its X-RateLimit-* headers", func(t *testing.T) {
		sale := map[string]any{"transaction_id": "utf8-limited", "amount_cents": 100, "currency": "USD"}
		for _, tc := range []struct {
			c            *client
			method, path string
			body         any
			headers      []string
		}{
			{c, "POST", "/api/v1/track/click?x=%FF", map[string]any{"affiliate_url": "https://brand.example/?via=FUZZ"}, nil},
			{c, "POST", "/api/v1/track/visit?x=%FF", map[string]any{"url": "https://brand.example/"}, nil},
			{c, "GET", "/api/v1/track/config?x=%FF", nil, nil},
			{c, "OPTIONS", "/api/v1/track/click?x=%FF", nil, []string{"Origin", "https://shop.example", "Access-Control-Request-Method", "POST"}},
			{c.withKey(fx.key), "POST", "/api/v1/track/lead?x=%FF", map[string]any{"email": "a@b.example"}, nil},
			{c.withKey(fx.key), "POST", "/api/v1/track/sale?x=%FF", sale, nil},
			{c.withKey(fx.key), "POST", "/api/v1/track/refund?x=%FF", map[string]any{"transaction_id": "utf8-limited", "amount_cents": 100}, nil},
			{c.withKey(fx.key), "GET", "/api/v1/programs/me/readiness?x=%FF", nil, nil},
			{c.withKey(fx.key), "GET", "/api/v1/programs/me/analytics/sources?x=%FF", nil, nil},
			{c.withKey(fx.key), "GET", "/api/v1/cli/status?x=%FF", nil, nil},
			{c, "GET", "/api/v1/cli/auth/poll?state=%FF", nil, nil},
			{c.withKey(fx.session), "GET", "/api/v1/programs/" + fx.params["program"] + "/settings?x=%FF", nil, nil},
		} {
			r := tc.c.do(tc.method, tc.path, tc.body, tc.headers...)
			if r.Status != 400 || r.Header.Get("X-RateLimit-Limit") == "" || r.Header.Get("X-RateLimit-Remaining") == "" || r.Header.Get("X-RateLimit-Reset") == "" {
				t.Errorf("%s %s: %d, X-RateLimit-Limit %q: %s", tc.method, tc.path, r.Status, r.Header.Get("X-RateLimit-Limit"), r.Raw)
				continue
			}
			if !strings.Contains(r.Raw, "Request URL must be valid UTF-8") {
				t.Errorf("%s %s: %s", tc.method, tc.path, r.Raw)
			}
		}
	})
}
