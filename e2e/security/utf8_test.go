package security_test

import (
	"context"
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
	e := start(t, vars, "accounts", "tracking", "commissions")
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
	t.Run("a query value that is not UTF-8: 400", func(t *testing.T) {
		r := c.do("GET", "/api/v1/dashboard/auth/start?return_to=%2Fdashboard%2F%FF", nil).want(t, 400)
		if r.str("error", "message") != "Request URL must be valid UTF-8" {
			t.Fatalf("%s", r.Raw)
		}
	})
	t.Run("a path parameter that is not UTF-8: 400, in the route's envelope", func(t *testing.T) {
		admin := e.client("").withAuth("Bearer " + stacktest.AdminToken)
		admin.do("GET", "/admin/v1/sales/%C0%AF", nil).want(t, 400)
		// Outside the document on purpose: this refusal comes before the
		// route's limiter, so it lacks the X-RateLimit-* headers the spec
		// puts on every sale answer (a gap of the earlier fix, reported).
		r := c.withKey(fx.key).outsideTheDocument().do("POST", "/api/v1/track/sale?x=%C0%AF", map[string]any{"transaction_id": "t", "amount_cents": 1, "currency": "USD"}).want(t, 400)
		if r.str("error", "code") != "invalid_request" {
			t.Fatalf("sale: %s", r.Raw)
		}
	})
}
