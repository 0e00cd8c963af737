package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

const origin = "http://localhost:8000" // one of the demo program's allowed origins

// Every public route, driven through the gateway as integrators and
// browsers reach it, each from its own client address.
func TestRoutesThroughTheGateway(t *testing.T) {
	t.Parallel()
	s := startStack(t, newStackConfig(t))
	ip := 0
	next := func() *client { // a new client address per use
		ip++
		return newClient(t, s, fmt.Sprintf("203.0.113.%d", ip))
	}
	affiliateURL := "https://demo-brand.example/pricing?via=" + s.LinkCode

	t.Run("click, lead, sale: the customer converts", func(t *testing.T) {
		browser := next()
		r := browser.click(map[string]any{"affiliate_url": affiliateURL, "program_id": s.ProgramID}, "Origin", origin).want(t, 200)
		clickID := r.str("click_id")
		if clickID == "" || r.body["success"] != true {
			t.Fatalf("click: %s", r.raw)
		}
		if r.header.Get("Access-Control-Allow-Origin") != origin || r.header.Get("X-Request-ID") == "" || r.header.Get("X-RateLimit-Limit") != "60" {
			t.Fatalf("click headers: %v", r.header)
		}
		email := uniqueID("buyer") + "@example.com"
		browser.lead(map[string]any{"click_id": clickID, "customer_key": email, "email": email, "program_id": s.ProgramID}, "Origin", origin).want(t, 200)
		browser.do("POST", "/api/v1/track/visit", map[string]any{"program_id": s.ProgramID, "page_url": "https://demo-brand.example/thanks", "click_id": clickID}, "Origin", origin).want(t, 200)

		brand := next().withKey(s.LiveKey)
		txn := uniqueID("txn")
		sale := brand.sale(map[string]any{"transaction_id": txn, "amount_cents": 4900, "currency": "USD", "customer_key": email}).want(t, 200)
		if sale.body["success"] != true || sale.str("customer_status") != "conversion" {
			t.Fatalf("sale: %s", sale.raw)
		}
		dup := brand.sale(map[string]any{"transaction_id": txn, "amount_cents": 4900, "currency": "USD", "customer_key": email})
		dup.wantPlatformError(t, 409, "ConflictError", "Duplicate transaction_id. This sale has already been recorded.")
		if dup.str("error", "code") != "duplicate_transaction" || dup.get("error", "details", "sale_id") == nil {
			t.Fatalf("409: %s", dup.raw)
		}
		// The demo program pays 20% with no hold: an approved commission
		// of 9.80; refunding 10.00 of 49.00 takes back 2.00 of it.
		if sale.str("commission", "status") != "approved" || sale.get("commission", "amount") != 9.8 || sale.str("commission", "currency") != "USD" {
			t.Fatalf("sale commission: %s", sale.raw)
		}
		commissionID := sale.get("commission", "id")
		refundID := uniqueID("re")
		ref := brand.refund(map[string]any{"transaction_id": txn, "refund_amount_cents": 1000, "refund_id": refundID, "reason": "refund"}).want(t, 200)
		if ref.body["success"] != true || ref.str("status") != "refunded" || ref.get("deductionAmount") != 2.0 || ref.get("commission_id") != commissionID {
			t.Fatalf("refund: %s", ref.raw)
		}
		again := brand.refund(map[string]any{"transaction_id": txn, "refund_amount_cents": 1000, "refund_id": refundID}).want(t, 200)
		if again.str("status") != "skipped" || again.str("reason") != "refund already applied" || again.get("commission_id") != commissionID {
			t.Fatalf("refund again: %s", again.raw)
		}
		brand.refund(map[string]any{"transaction_id": uniqueID("txn")}).wantPlatformError(t, 404, "NotFoundError", "Sale not found for transaction_id")
		brand.refund(map[string]any{"transaction_id": txn, "reason": "oops"}).wantPlatformError(t, 400, "BadRequestError", "reason must be refund or chargeback")
		test := next().withKey(s.TestKey).do("POST", "/api/v1/track/refund", `not even json`).want(t, 200)
		if test.body["success"] != true || test.body["test"] != true || len(test.body) != 2 {
			t.Fatalf("test key refund: %s", test.raw)
		}
	})

	t.Run("track click error rows", func(t *testing.T) {
		c := next()
		c.click(map[string]any{}).wantPlatformError(t, 400, "BadRequestError", "affiliate_url is required")
		c.click(map[string]any{"affiliate_url": "not a url"}).wantPlatformError(t, 400, "BadRequestError", "Invalid affiliate_url")
		c.click(map[string]any{"affiliate_url": "https://demo-brand.example/"}).wantPlatformError(t, 400, "BadRequestError", "No aff parameter found in affiliate_url")
		c.click(map[string]any{"affiliate_url": "https://demo-brand.example/?via=nope-" + uniqueID("x")}).wantPlatformError(t, 400, "BadRequestError", "Referral link not found")
		c.do("POST", "/api/v1/track/click", `{"affiliate_url":`).wantPlatformError(t, 400, "BadRequestError", "Request body is not valid JSON")
	})

	t.Run("another method on a route's path: 405 naming the methods it takes", func(t *testing.T) {
		c := next().withKey(s.LiveKey).outsideTheDocument()
		for _, tc := range []struct{ method, path, allow string }{
			{"GET", "/api/v1/track/click", "POST, OPTIONS"},
			{"GET", "/api/v1/track/sale", "POST"},
			{"DELETE", "/api/v1/track/refund", "POST"},
		} {
			r := c.do(tc.method, tc.path, nil)
			r.wantPlatformError(t, 405, "MethodNotAllowedError", "Method "+tc.method+" is not allowed for "+tc.path)
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
			}
		}
		if r := c.do("GET", "/api/v1/track/nothing", nil).want(t, 404); r.header.Get("Allow") != "" {
			t.Errorf("an unknown path names methods: %q", r.header.Get("Allow"))
		}
	})

	t.Run("a wrong Content-Type is a 400 on every JSON route", func(t *testing.T) {
		c := next().withKey(s.LiveKey)
		for _, path := range []string{"/api/v1/track/click", "/api/v1/track/lead", "/api/v1/track/visit", "/api/v1/track/sale", "/api/v1/track/refund", "/api/v1/cli/init", "/api/v1/cli/test-event"} {
			r := c.do("POST", path, nil, "Content-Type", "text/plain")
			if r.status == 200 {
				t.Fatalf("%s accepted text/plain without a body: %s", path, r.raw)
			}
			r = c.do("POST", path, `x=1`, "Content-Type", "text/plain")
			if r.status == 401 { // routes that check the credential first
				continue
			}
			r.wantPlatformError(t, 400, "BadRequestError", "Content-Type must be application/json")
		}
	})

	t.Run("track lead error rows", func(t *testing.T) {
		c := next()
		c.lead(map[string]any{"program_id": s.ProgramID}, "Origin", origin).wantPlatformError(t, 400, "BadRequestError", "click_id or customer_key is required")
		c.lead(map[string]any{"customer_key": "k1", "program_id": s.ProgramID}, "Origin", origin).wantPlatformError(t, 400, "BadRequestError", "click_id is required when no API key is sent")
		c.lead(map[string]any{"click_id": "cust_1_1", "customer_key": "k1"}, "Authorization", "Bearer svc_live_"+strings.Repeat("0", 43)).want(t, 401)
		// Authentication rule 3: only a missing header or an empty token
		// is browser mode; a header of another scheme is a 401.
		c.lead(map[string]any{"click_id": "cust_1_1", "program_id": s.ProgramID}, "Authorization", "Basic "+s.LiveKey, "Origin", origin).
			wantPlatformError(t, 401, "UnauthorizedError", "Missing or malformed Authorization header. Expected: Bearer <token>")
	})

	t.Run("track sale: authentication and validation rows", func(t *testing.T) {
		body := map[string]any{"transaction_id": uniqueID("txn"), "amount_cents": 100, "currency": "USD", "customer_key": "nobody"}
		c := next()
		for _, tc := range []struct{ auth, code, msg string }{
			{"", "unauthorized", "Missing or malformed Authorization header. Expected: Bearer <token>"},
			{"Token abc", "unauthorized", "Missing or malformed Authorization header. Expected: Bearer <token>"},
			{"Bearer ", "unauthorized", "Missing API token"},
			{"Bearer svc_live_" + strings.Repeat("1", 43), "unauthorized", "Invalid API token"},
		} {
			r := c.withAuth(tc.auth).sale(body)
			r.wantPlatformError(t, 401, "UnauthorizedError", tc.msg)
			if r.str("error", "code") != tc.code {
				t.Fatalf("%q: %s", tc.auth, r.raw)
			}
		}
		brand := c.withKey(s.LiveKey)
		r := brand.sale(map[string]any{"amount_cents": 100, "currency": "USD", "customer_key": "x"})
		r.wantPlatformError(t, 400, "BadRequestError", "transaction_id is required and must be a string")
		r = brand.sale(map[string]any{"transaction_id": uniqueID("txn"), "amount_cents": 100, "currency": "GBP", "customer_key": "x"})
		r.wantPlatformError(t, 422, "UnprocessableEntityError", "currency GBP is not supported")
		r = brand.sale(map[string]any{"transaction_id": uniqueID("txn"), "amount_cents": 100, "currency": "USD", "customer_key": "nobody-" + uniqueID("k")})
		r.wantPlatformError(t, 400, "BadRequestError", "Customer not found. Provide customer_key or click_id.")
		// A test key answers in test mode.
		next().withKey(s.TestKey).sale(map[string]any{"amount_cents": 100, "currency": "USD", "customer_key": "x"}).want(t, 200)
	})

	t.Run("track config and svc.js", func(t *testing.T) {
		c := next()
		r := c.do("GET", "/api/v1/track/config?program_id="+s.ProgramID, nil, "Origin", origin).want(t, 200)
		if r.header.Get("X-RateLimit-Limit") != "60" {
			t.Fatalf("config headers %v", r.header)
		}
		c.do("GET", "/api/v1/track/config", nil).wantPlatformError(t, 400, "BadRequestError", "program_id is required")
		js := c.do("GET", "/svc.js", nil).want(t, 200)
		if !strings.Contains(js.header.Get("Content-Type"), "javascript") || !strings.Contains(js.raw, "svc_click_id") {
			t.Fatalf("svc.js: %s %.80s", js.header.Get("Content-Type"), js.raw)
		}
	})

	t.Run("payment processor webhook", func(t *testing.T) {
		c := next()
		body := fmt.Sprintf(`{"id":"%s","type":"customer.created","created":%d,"livemode":true,"data":{"object":{"id":"cus_e2e"}}}`, uniqueID("evt"), time.Now().Unix())
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		m := hmac.New(sha256.New, []byte("whsec_local_dev"))
		m.Write([]byte(ts + "." + body))
		sig := "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
		c.do("POST", "/api/v1/webhooks/processor", body, "Processor-Signature", sig).want(t, 200)
		c.do("POST", "/api/v1/webhooks/processor", body, "Processor-Signature", sig).want(t, 200) // redelivery
		c.do("POST", "/api/v1/webhooks/processor", body, "Processor-Signature", "t="+ts+",v1=00").want(t, 400)
	})

	t.Run("command-line routes", func(t *testing.T) {
		c := next()
		start := c.do("POST", "/api/v1/cli/auth/start", map[string]any{}).want(t, 201)
		if start.str("data", "state") == "" && start.str("state") == "" {
			t.Fatalf("auth/start: %s", start.raw)
		}
		c.do("GET", "/api/v1/cli/auth/poll", nil).wantPlatformError(t, 400, "BadRequestError", "Missing state parameter")
		c.do("GET", "/api/v1/cli/auth/poll?state=nope", nil).wantPlatformError(t, 404, "NotFoundError", "Session not found")
		c.do("POST", "/api/v1/cli/auth/callback", map[string]any{}).wantPlatformError(t, 400, "BadRequestError", "Missing required fields: state, id_token")
		if r := c.do("GET", "/api/v1/cli/programs", nil); r.status != 401 {
			t.Fatalf("programs without a token: %s", r.raw)
		}
		if r := c.do("POST", "/api/v1/cli/init", map[string]any{}); r.status != 401 {
			t.Fatalf("init without a token: %s", r.raw)
		}
		status := c.withKey(s.LiveKey).do("GET", "/api/v1/cli/status", nil).want(t, 200)
		if status.header.Get("X-Request-ID") != "" {
			t.Fatalf("CLI GET status 200 carries no X-Request-ID: %v", status.header)
		}
		c.withKey(s.LiveKey).do("POST", "/api/v1/cli/test-event", map[string]any{"event_type": "nope"}).
			wantPlatformError(t, 400, "BadRequestError", "Invalid event_type: nope. Valid: click, lead, sale")
		c.withKey(s.TestKey).do("POST", "/api/v1/cli/test-event", map[string]any{"event_type": "click"}).want(t, 200)
		c.do("POST", "/api/v1/cli/stripe-connect", map[string]any{}).want(t, 410)
	})

	t.Run("admin: commissions' ledger routes reach commissions, the rest accounts", func(t *testing.T) {
		admin := next().withKey(adminToken)
		email := uniqueID("partner") + "@example.com"
		created := admin.do("POST", "/admin/v1/partners", map[string]any{"name": "Ledger", "email": email}).want(t, 201)
		id := fmt.Sprint(created.get("data", "id"))
		// accounts: commissions has no /admin/v1/partners route.
		found := admin.do("GET", "/admin/v1/partners?email="+url.QueryEscape(email), nil).want(t, 200)
		if list, _ := found.get("data").([]any); len(list) != 1 {
			t.Fatalf("GET /admin/v1/partners?email=: %s", found.raw)
		}
		// commissions: accounts has no such routes (it would answer 404).
		for _, path := range []string{"/admin/v1/partners/" + id + "/balances", "/admin/v1/partners/" + id + "/withdrawals"} {
			got := admin.do("GET", path, nil).want(t, 200)
			if list, ok := got.get("data").([]any); !ok || len(list) != 0 {
				t.Fatalf("GET %s: %s, want commissions' empty list", path, got.raw)
			}
		}
		admin.do("GET", "/admin/v1/partners/"+id+"/balancesX", nil).want(t, 404)
	})

	t.Run("program settings with a dashboard session", func(t *testing.T) {
		admin := next().withKey(adminToken)
		user := admin.do("GET", "/admin/v1/users?email="+url.QueryEscape("owner@demo-brand.example"), nil).want(t, 200)
		uid := user.get("data", "id")
		sess := admin.do("POST", "/admin/v1/sessions", map[string]any{"user_id": uid}).want(t, 201)
		member := next().withKey(sess.str("data", "token"))
		path := "/api/v1/programs/" + s.ProgramID + "/settings"
		got := member.do("GET", path, nil).want(t, 200)
		if got.get("data") == nil {
			t.Fatalf("settings: %s", got.raw)
		}
		patched := member.do("PATCH", path, map[string]any{"allowed_origins": []string{origin, "http://localhost:3000", "http://127.0.0.1:8000"}}).want(t, 200)
		if !strings.Contains(patched.raw, "http://127.0.0.1:8000") {
			t.Fatalf("settings PATCH: %s", patched.raw)
		}
		member.do("PATCH", path, map[string]any{"allowed_origins": "nope"}).want(t, 400)
		// Only what can equal a browser's Origin header is an origin,
		// stored as the browser sends it; nothing is written otherwise.
		for _, bad := range []string{"https://(!$).example", "https://x.example:99999", "https://x.example:"} {
			member.do("PATCH", path, map[string]any{"allowed_origins": []string{origin, bad}}).
				wantPlatformError(t, 400, "BadRequestError", "allowed_origins must be a list of origins like https://shop.example.com")
		}
		if got := member.do("GET", path, nil).want(t, 200); strings.Contains(got.raw, "x.example") {
			t.Fatalf("a refused PATCH wrote: %s", got.raw)
		}
		norm := member.do("PATCH", path, map[string]any{"allowed_origins": []string{origin, "https://Shop.EXAMPLE:443", "http://localhost:3000"}}).want(t, 200)
		if !strings.Contains(norm.raw, `"https://shop.example"`) || strings.Contains(norm.raw, ":443") {
			t.Fatalf("settings PATCH kept an origin no browser sends: %s", norm.raw)
		}
		next().do("GET", path, nil).wantPlatformError(t, 401, "UnauthorizedError", "Missing or malformed Authorization header. Expected: Bearer <session_token>")
		next().withKey(s.LiveKey).do("GET", path, nil).want(t, 401) // program keys are refused
	})

	t.Run("the API description is served", func(t *testing.T) {
		r := next().do("GET", "/api/openapi.json", nil).want(t, 200)
		if !strings.HasPrefix(fmt.Sprint(r.body["openapi"]), "3.1") || r.body["paths"] == nil {
			t.Fatalf("openapi.json: %.200s", r.raw)
		}
	})

	t.Run("unknown path", func(t *testing.T) {
		next().outsideTheDocument().do("GET", "/api/v1/nope", nil).wantPlatformError(t, 404, "NotFoundError", "No route for /api/v1/nope")
	})
}

// inOneWindow runs burst, which sends n requests expected to pass and
// returns their answers, then over, the one past the limit. The limits are
// per calendar minute, and the stack under test runs on the real clock: a
// burst that straddles two minutes meets a fresh allowance. When the
// answers show the window changed (X-RateLimit-Reset moved), the burst is
// run once more, from the start of the new window, with fresh means
// (attempt picks them); twice in a row cannot happen in a burst of seconds.
func inOneWindow(t *testing.T, burst func(attempt int) (passed []reply, over reply)) {
	t.Helper()
	for attempt := 0; attempt < 2; attempt++ {
		passed, over := burst(attempt)
		reset := passed[0].header.Get("X-RateLimit-Reset")
		rolled := over.header.Get("X-RateLimit-Reset") != reset
		for _, r := range passed {
			rolled = rolled || r.header.Get("X-RateLimit-Reset") != reset
		}
		if !rolled {
			return
		}
		t.Logf("the rate-limit window changed during burst %d; running it again", attempt+1)
	}
	t.Fatal("the rate-limit window changed during two bursts in a row")
}

// The spec's per-IP limits hold per client behind the trusted hop: one
// client's flood is refused, another client's requests are not.
func TestRateLimitsPerClient(t *testing.T) {
	t.Parallel()
	s := startStack(t, newStackConfig(t))
	body := map[string]any{"affiliate_url": "https://demo-brand.example/?via=" + s.LinkCode}
	var over reply
	var passed []reply
	inOneWindow(t, func(attempt int) ([]reply, reply) {
		flooder := newClient(t, s, fmt.Sprintf("192.0.2.%d", 10+attempt*100))
		passed = passed[:0]
		for i := 0; i < 60; i++ {
			passed = append(passed, flooder.click(body).want(t, 200))
		}
		over = flooder.click(body)
		return passed, over
	})
	for i, r := range passed {
		if got, want := r.header.Get("X-RateLimit-Remaining"), strconv.Itoa(59-i); got != want {
			t.Fatalf("click %d: remaining %s, want %s", i+1, got, want)
		}
	}
	over.wantRateLimited(t, "60")
	newClient(t, s, "192.0.2.11").click(body).want(t, 200)
	newClient(t, s, "2001:db8::11").click(body).want(t, 200)

	lead := map[string]any{"program_id": s.ProgramID}
	inOneWindow(t, func(attempt int) ([]reply, reply) {
		leads := newClient(t, s, fmt.Sprintf("192.0.2.%d", 20+attempt*100))
		passed = passed[:0]
		for i := 0; i < 30; i++ {
			passed = append(passed, leads.lead(lead, "Origin", origin).want(t, 400)) // refused input still counts
		}
		over = leads.lead(lead, "Origin", origin)
		return passed, over
	})
	over.wantRateLimited(t, "30")
	newClient(t, s, "192.0.2.21").lead(lead, "Origin", origin).want(t, 400)
}

// Sales are limited per API key (120 a minute), whatever client sends them.
func TestSaleLimitPerKey(t *testing.T) {
	t.Parallel()
	s := startStack(t, newStackConfig(t))
	body := func() map[string]any {
		return map[string]any{"transaction_id": uniqueID("txn"), "amount_cents": 100, "currency": "USD", "customer_key": "nobody"}
	}
	var over reply
	inOneWindow(t, func(attempt int) ([]reply, reply) {
		if attempt > 0 {
			// The key is the program's only live key, and the first burst
			// already spent part of this window's allowance: start when
			// the window the server announced is over.
			reset, err := strconv.ParseInt(over.header.Get("X-RateLimit-Reset"), 10, 64)
			if err != nil {
				t.Fatalf("X-RateLimit-Reset %q", over.header.Get("X-RateLimit-Reset"))
			}
			time.Sleep(time.Until(time.Unix(reset, 0)) + 100*time.Millisecond)
		}
		var passed []reply
		for i := 0; i < 120; i++ {
			c := newClient(t, s, fmt.Sprintf("198.51.100.%d", i%200+1)).withKey(s.LiveKey)
			// Sales and refunds share the key's one bucket.
			var r reply
			want := 400
			if i%2 == 0 {
				r = c.sale(body())
			} else {
				r, want = c.refund(map[string]any{"transaction_id": uniqueID("txn")}), 404
			}
			if r.status != want || r.header.Get("X-RateLimit-Limit") != "120" {
				t.Fatalf("call %d: %d %v %s", i+1, r.status, r.header, r.raw)
			}
			passed = append(passed, r)
		}
		over = newClient(t, s, "198.51.100.250").withKey(s.LiveKey).sale(body())
		return passed, over
	})
	over.wantRateLimited(t, "120")
	newClient(t, s, "198.51.100.250").withKey(s.TestKey).sale(body()).want(t, 200) // another key, its own bucket
}
