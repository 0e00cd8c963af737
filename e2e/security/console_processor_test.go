package security_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/deploy/devstack/processorstub"
)

// TestConsoleProcessor drives the console's payment processor connection
// against the stand-in processor make run starts: connect, approve on its
// page, the callback through the gateway, the dashboard status route's
// payments fields, a test payment recorded as a sale and a commission of
// the program, and disconnect; and what a hostile caller gets.
func TestConsoleProcessor(t *testing.T) {
	t.Parallel()
	const hookSecret = "whsec_console_processor_0123456789abcdef"
	stub := processorstub.New(processorstub.Config{ClientID: "ca_console_test", Secret: "sk_console_test_platform_secret", WebhookSecret: hookSecret})
	ps := httptest.NewServer(stub.Handler())
	t.Cleanup(ps.Close)
	vars := stub.Env(ps.URL)
	// The callback's address as the processor is told it; the test takes
	// the redirect's query to the real gateway.
	vars["PUBLIC_URL"] = "http://console.test"
	vars["PROCESSOR_WEBHOOK_SECRET"] = hookSecret
	vars["SETTINGS_RATE_LIMIT"] = "500"
	e := start(t, vars, "accounts", "tracking", "commissions", "analytics")
	stub.SetWebhook(e.Gateway + "/api/v1/webhooks/processor")
	f := consolePartners{e.consoleKeys()}
	a, b := f.a.id, f.b.id

	noFollow := &http.Client{Timeout: 40 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// callback sends the processor's redirect (raw query) to the gateway.
	callback := func(rawQuery string) reply {
		t.Helper()
		c := e.client("203.0.113.90")
		c.hc = noFollow
		r := c.do("GET", "/api/v1/processor/connect/callback?"+rawQuery, nil)
		if n, err := strconv.ParseInt(r.Header.Get("X-Catalog-Seq"), 10, 64); err == nil {
			for cur := e.seq.Load(); n > cur && !e.seq.CompareAndSwap(cur, n); cur = e.seq.Load() {
			}
		}
		return r
	}
	type conn struct {
		status, account         string
		charges, payouts, given bool
		at                      bool
	}
	connection := func(prog int64) conn {
		t.Helper()
		var c conn
		if err := e.Stack.Instance("accounts").Platform().Pool.QueryRow(context.Background(), `SELECT processor_status, processor_account_id,
			charges_enabled, payouts_enabled, details_submitted, connected_at IS NOT NULL FROM accounts.programs WHERE id = $1`, prog).
			Scan(&c.status, &c.account, &c.charges, &c.payouts, &c.given, &c.at); err != nil {
			t.Fatal(err)
		}
		return c
	}
	states := func() int { return e.countRows("accounts", "SELECT count(*) FROM accounts.processor_connect_states") }
	events := func() int { return e.countRows("accounts", "SELECT count(*) FROM accounts.outbox") }
	connect := func(token string, prog int64) reply { return f.call(token, "POST", prog, "/processor/connect", nil) }
	// approve answers the processor's redirect query after the Approve
	// click on its page for the authorize URL u.
	approve := func(u string, decision string) url.Values {
		t.Helper()
		au, err := url.Parse(u)
		if err != nil || !strings.HasPrefix(u, ps.URL+"/oauth/authorize?") {
			t.Fatalf("authorize url %q", u)
		}
		q := au.Query()
		if q.Get("client_id") != "ca_console_test" || q.Get("redirect_uri") != "http://console.test/api/v1/processor/connect/callback" ||
			q.Get("response_type") != "code" || len(q.Get("state")) < 40 {
			t.Fatalf("authorize url %q", u)
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), ">Approve</button>") {
			t.Fatalf("authorize page %d: %s", resp.StatusCode, body)
		}
		resp, err = noFollow.PostForm(ps.URL+"/oauth/authorize", url.Values{"redirect_uri": {q.Get("redirect_uri")}, "state": {q.Get("state")}, "decision": {decision}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		back, err := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusFound || err != nil || !strings.HasPrefix(back.String(), "http://console.test/api/v1/processor/connect/callback?") {
			t.Fatalf("approve: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		return back.Query()
	}
	wantPage := func(r reply, status int, text string) {
		t.Helper()
		if r.Status != status || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") || !strings.Contains(r.Raw, text) {
			t.Fatalf("got %d %q %s, want %d page with %q", r.Status, r.Header.Get("Content-Type"), r.Raw, status, text)
		}
	}
	const badState = "This connection link is invalid, has expired or was already used. Start again from the dashboard: Settings &gt; Payments."
	const malformed = "This connection link is incomplete or malformed."
	status := func(prog int64) reply {
		return e.client("203.0.113.91").withKey(f.owner).do("GET", fmt.Sprintf("/api/tracking/status/%d", prog), nil).want(t, 200)
	}
	notConnected := conn{status: "not_connected"}

	t.Run("readers, non-members, the second tenant and API keys are refused and write nothing", func(t *testing.T) {
		before, ev := states(), events()
		for _, c := range []struct{ who, message string }{
			{f.reader, "You do not have permission to change this program's payment processor"},
			{f.outsider, "You do not have access to this program"},
			{f.ownerB, "You do not have access to this program"},
		} {
			wantRefusal(t, connect(c.who, a), 403, c.message)
			wantRefusal(t, f.call(c.who, "DELETE", a, "/processor", nil), 403, c.message)
		}
		for _, tok := range []string{f.a.key, f.b.key, ""} {
			wantRefusal(t, connect(tok, a), 401, "Invalid session token. Sign in again.")
			wantRefusal(t, f.call(tok, "DELETE", a, "/processor", nil), 401, "Invalid session token. Sign in again.")
		}
		if states() != before || events() != ev || connection(a) != notConnected {
			t.Fatal("a refused request wrote something")
		}
	})

	var account string
	t.Run("connect, approve, callback: the account and its flags are stored and the status route follows", func(t *testing.T) {
		before := states()
		r := connect(f.owner, a).want(t, 200)
		u := r.str("data", "url")
		if r.Header.Get("X-RateLimit-Limit") != "500" || states() != before+1 {
			t.Fatalf("connect: %s %v", r.Raw, r.Header)
		}
		state, _ := url.Parse(u)
		st := state.Query().Get("state")
		// Only a hash of the state is kept.
		h := sha256.Sum256([]byte(st))
		if e.countRows("accounts", "SELECT count(*) FROM accounts.processor_connect_states WHERE state_hash = $1 AND program_id = $2 AND used_at IS NULL", h[:], a) != 1 ||
			e.countRows("accounts", "SELECT count(*) FROM accounts.processor_connect_states WHERE state_hash = $1", []byte(st)) != 0 {
			t.Fatal("the state is not kept as its hash")
		}
		back := approve(u, "approve")
		ev := events()
		r = callback(back.Encode())
		if r.Status != http.StatusFound || r.Header.Get("Location") != "/dashboard/#settings" || r.Header.Get("X-Catalog-Seq") == "" {
			t.Fatalf("callback: %d %v %s", r.Status, r.Header, r.Raw)
		}
		c := connection(a)
		account = c.account
		if c.status != "connected" || !strings.HasPrefix(account, "acct_local") || !c.charges || !c.payouts || !c.given || !c.at || events() != ev+1 {
			t.Fatalf("stored %+v, %d events", c, events()-ev)
		}
		if connection(b) != notConnected {
			t.Fatal("B changed")
		}
		e.sync()
		s := status(a)
		pay := func(k string) any { return s.get("data", "statistics", "payments", k) }
		if s.get("data", "stepStatuses", "payments") != "complete" || pay("processorConnectionStatus") != "connected" || pay("isProcessorConnected") != true ||
			pay("processorAccountId") != account || pay("chargesEnabled") != true || pay("payoutsEnabled") != true || pay("detailsSubmitted") != true ||
			pay("connectionDate") == nil || pay("methodReady") != true {
			t.Fatalf("status: %s", s.Raw)
		}

		t.Run("the same state again is refused and changes nothing", func(t *testing.T) {
			ev := events()
			wantPage(callback(back.Encode()), 400, badState)
			if events() != ev || connection(a).account != account {
				t.Fatal("a replay wrote something")
			}
		})
	})

	t.Run("bad callbacks: 400 pages, never 5xx, nothing stored", func(t *testing.T) {
		u := connect(f.owner, a).want(t, 200).str("data", "url")
		pu, _ := url.Parse(u)
		st := pu.Query().Get("state")
		ev := events()
		wantPage(callback("code=ac_x&state="+url.QueryEscape("never-issued")), 400, badState)
		wantPage(callback("code=ac_x"), 400, malformed)
		wantPage(callback("code=ac_x&state="+st+"&state="+st), 400, malformed)
		// NUL, bytes that are not UTF-8 and broken escapes: the platform's
		// URL check or the callback's own, 400 either way.
		for _, q := range []string{"code=ac%00x&state=" + st, "code=ac%ffx&state=" + st, "code=ac_x&state=" + st + "%00",
			"code=ac_x&state=%ff%fe", "code=ac_x&state=%zz"} {
			if r := callback(q); r.Status != 400 {
				t.Fatalf("%s: %d %s", q, r.Status, r.Raw)
			}
		}
		if events() != ev || connection(a).account != account {
			t.Fatal("a bad callback wrote something")
		}
		// None of those used the state up: a processor that refuses the
		// code (invalid_grant) ends it with an error page naming nothing
		// of the processor's.
		r := callback("code=ac_never_issued&state=" + url.QueryEscape(st))
		wantPage(r, 503, "The payment processor could not complete the connection. Nothing was changed")
		if strings.Contains(r.Raw, "invalid_grant") || strings.Contains(r.Raw, "sk_console") || events() != ev || connection(a).account != account {
			t.Fatalf("processor failure: %s", r.Raw)
		}
		wantPage(callback("code=ac_never_issued&state="+url.QueryEscape(st)), 400, badState)
		// Declined on the processor's page.
		back := approve(connect(f.owner, a).want(t, 200).str("data", "url"), "decline")
		wantPage(callback(back.Encode()), 400, "The payment processor did not approve the connection.")
		if events() != ev || connection(a).account != account {
			t.Fatal("a declined connection wrote something")
		}
	})

	t.Run("a state is bound to its program and to its person", func(t *testing.T) {
		// B's owner's state connects B, never A.
		back := approve(connect(f.ownerB, b).want(t, 200).str("data", "url"), "approve")
		callback(back.Encode()).want(t, http.StatusFound)
		if cb := connection(b); cb.status != "connected" || cb.account == account || connection(a).account != account {
			t.Fatalf("B's state: A %+v B %+v", connection(a), cb)
		}
		// A person who lost tracking:write after asking connects nothing.
		u := connect(f.owner, a).want(t, 200).str("data", "url")
		uid := e.countRows("accounts", "SELECT id::int FROM accounts.users WHERE email = 'owner@keysa.example'")
		e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/members", a), map[string]any{"user_id": uid, "active": true, "permissions": []string{"tracking:read"}})
		ev := events()
		wantPage(callback(approve(u, "approve").Encode()), 403, "You do not have permission to change this program&#39;s payment processor")
		if events() != ev || connection(a).account != account {
			t.Fatal("a demoted person's state wrote something")
		}
		e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/members", a), map[string]any{"user_id": uid, "active": true, "permissions": []string{"tracking:read", "tracking:write"}})
	})

	sales := func() int {
		return e.countRows("commissions", "SELECT count(*) FROM commissions.sales WHERE program_id = $1", a)
	}
	commissions := func() int {
		return e.countRows("commissions", "SELECT count(*) FROM commissions.commissions c JOIN commissions.sales s ON s.id = c.sale_id WHERE s.program_id = $1", a)
	}
	refunds := func() int {
		return e.countRows("commissions", "SELECT count(*) FROM commissions.refunds r JOIN commissions.sales s ON s.id = r.sale_id WHERE s.program_id = $1", a)
	}
	pay := func(version string, refund int64, delivered bool) []any {
		t.Helper()
		click := e.client("203.0.113.92").do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://keysa.example/?via=KEYSA"}).want(t, 200)
		body := fmt.Sprintf(`{"account":%q,"amount":2500,"currency":"usd","click_id":%q,"refund_amount":%d,"api_version":%q}`,
			account, click.str("click_id"), refund, version)
		resp, err := http.Post(ps.URL+"/test-payment", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		r := reply{Status: resp.StatusCode, Raw: string(raw)}
		_ = json.Unmarshal(raw, &r.Body)
		ds, _ := r.get("deliveries").([]any)
		if r.Status != 200 || len(ds) == 0 {
			t.Fatalf("test payment: %s", raw)
		}
		for _, d := range ds {
			if m, _ := d.(map[string]any); delivered && m["status"] != 200.0 {
				t.Fatalf("webhook refused: %s", raw)
			}
		}
		return ds
	}

	t.Run("a test payment and its refund, in both API versions, record sales and commissions of the program", func(t *testing.T) {
		s0, c0, r0 := sales(), commissions(), refunds()
		pay(processorstub.APIVersionBasil, 1000, true)
		waitFor(t, "the basil payment's sale, commission and refund", func() bool {
			return sales() == s0+1 && commissions() == c0+1 && refunds() == r0+1
		})
		pay(processorstub.APIVersionLegacy, 500, true)
		waitFor(t, "the legacy payment's sale, commission and refund", func() bool {
			return sales() == s0+2 && commissions() == c0+2 && refunds() == r0+2
		})
		if n := e.countRows("commissions", "SELECT count(*) FROM commissions.sales WHERE program_id = $1", b); n != 0 {
			t.Fatalf("B has %d sales", n)
		}
	})

	t.Run("disconnect: the status route is pending again and the account's payments reach no program", func(t *testing.T) {
		r := f.call(f.owner, "DELETE", a, "/processor", nil).want(t, 200)
		if r.str("data", "status") != "not_connected" || r.str("data", "account_id") != "" || r.Header.Get("X-Catalog-Seq") == "" {
			t.Fatalf("disconnect: %s", r.Raw)
		}
		if connection(a) != notConnected || connection(b).status != "connected" {
			t.Fatalf("after disconnect: A %+v B %+v", connection(a), connection(b))
		}
		e.sync()
		s := status(a)
		if s.get("data", "stepStatuses", "payments") != "pending" || s.get("data", "statistics", "payments", "isProcessorConnected") != false ||
			s.get("data", "statistics", "payments", "processorAccountId") != nil || s.get("data", "statistics", "payments", "connectionDate") != nil {
			t.Fatalf("status: %s", s.Raw)
		}
		before := sales()
		ds := pay(processorstub.APIVersionBasil, 0, false)
		// Stored for the operator, recorded for no program.
		if st, _ := ds[0].(map[string]any)["status"].(float64); st >= 500 || sales() != before {
			t.Fatalf("after disconnect: %v, %d sales", ds, sales())
		}
	})
}
