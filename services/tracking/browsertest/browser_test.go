package browsertest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/platform"
	accounts "github.com/svc-dev/svc/services/accounts/server"
	tracking "github.com/svc-dev/svc/services/tracking/server"
)

const adminToken = "browsertest-admin-token-0123456789abcdef"

// windowDays differs from the default attribution window (60) so the cookie
// expiry proves the tracker uses the program's value.
const windowDays = 45

// The payment processor's side: the program's connected account and the
// webhook signing secret, so the test can play the checkout the payment
// link would produce.
const (
	processorAccount = "acct_browser_brand"
	processorSecret  = "whsec_browsertest"
)

// A visitor's real browser (Debian's Chromium driven by playwright-core)
// lands on a brand page through two referral links, signs up, and the
// tracking schema ends up with one customer: first partner A, two click
// events, status lead with the customer key saved.
func TestTrackerInRealBrowser(t *testing.T) {
	node, chromium := requireBrowserTools(t)

	st := startStack(t)
	api := "http://" + st.tracking.Addr()
	admin := &adminClient{base: "http://" + st.accounts.Addr(), http: &http.Client{Timeout: 30 * time.Second}}
	ctx := t.Context()

	// The page's origin goes into the program's allowed_origins, so the page
	// server starts before the program exists; the id is filled in after.
	var programID atomic.Int64
	page := httptest.NewServer(pageHandler(api, &programID))
	t.Cleanup(page.Close)
	pageURL, err := url.Parse(page.URL)
	if err != nil {
		t.Fatal(err)
	}
	// Chromium maps *.example.test to loopback (see tracker.spec.mjs), so
	// the same server also stands for a brand site with a multi-label name.
	altOrigin := "http://shop.example.test:" + pageURL.Port()
	// The same server under an origin the program does not allow, as a
	// newcomer's page on another port would be: CORS refuses its calls.
	refusedOrigin := "http://localhost:" + pageURL.Port()

	adv := admin.create(t, "/admin/v1/advertisers", map[string]any{"name": "Browser Brand", "email": "owner@browser-brand.example"})
	prog := admin.create(t, "/admin/v1/programs", map[string]any{
		"advertiser_id": adv, "name": "Browser Program", "domain": "browser-brand.example",
		"commission_type": "percent", "commission_rate": 20,
		"lead_auth_policy": "browser_allowed", "attribution_window_days": windowDays,
		"allowed_origins": []string{page.URL, altOrigin},
	})
	programID.Store(prog)
	pp := fmt.Sprintf("/admin/v1/programs/%d", prog)
	if err := admin.call(ctx, http.MethodPatch, pp, map[string]any{
		"processor_connection": map[string]any{"status": "connected", "account_id": processorAccount}}, nil); err != nil {
		t.Fatal(err)
	}
	// Two partners, so "first partner kept" is a real check.
	partnerA := admin.create(t, "/admin/v1/partners", map[string]any{"name": "Partner A", "email": "a@partners.example"})
	partnerB := admin.create(t, "/admin/v1/partners", map[string]any{"name": "Partner B", "email": "b@partners.example"})
	admin.create(t, pp+"/partners", map[string]any{"partner_id": partnerA, "approved": true})
	admin.create(t, pp+"/partners", map[string]any{"partner_id": partnerB, "approved": true})
	linkA := admin.create(t, pp+"/links", map[string]any{"partner_id": partnerA, "code": "A", "active": true})
	linkB := admin.create(t, pp+"/links", map[string]any{"partner_id": partnerB, "code": "B", "active": true})
	// Turned off: its click answers 410 link_disabled and records nothing.
	linkC := admin.create(t, pp+"/links", map[string]any{"partner_id": partnerA, "code": "C", "active": false})
	admin.sync(t)

	started := time.Now()
	res := runDriver(t, node, []string{
		"--page=" + page.URL + "/page",
		"--alt-page=" + altOrigin + "/page",
		"--refused-page=" + refusedOrigin + "/page",
		"--code-disabled=C",
		"--api=" + api,
		"--program-id=" + strconv.FormatInt(prog, 10),
		"--code-a=A", "--code-b=B",
		"--window-days=" + strconv.Itoa(windowDays),
		"--chromium=" + chromium,
	})
	t.Logf("browser driver took %s", time.Since(started).Round(time.Millisecond))

	pool := st.tracking.Platform().Pool
	t.Run("customer keeps first partner A and is a lead with its key", func(t *testing.T) {
		var status, key string
		var firstPartner, program int64
		err := pool.QueryRow(ctx, `SELECT status, coalesce(customer_key, ''), first_partner_id, program_id FROM customers WHERE click_id = $1`,
			res.ClickID).Scan(&status, &key, &firstPartner, &program)
		if err != nil {
			t.Fatalf("customer %s: %v", res.ClickID, err)
		}
		if status != "lead" || key != "cust-42" || firstPartner != partnerA || program != prog {
			t.Fatalf("customer %s: status %q key %q first partner %d program %d; want lead, cust-42, %d (A), %d",
				res.ClickID, status, key, firstPartner, program, partnerA, prog)
		}
	})
	t.Run("one click event per link for that customer", func(t *testing.T) {
		got := clickEvents(t, pool, res.ClickID)
		want := []clickEvent{{linkA, partnerA, res.SessionID}, {linkB, partnerB, res.SessionID}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("click events %v, want (link, partner, session) %v", got, want)
		}
	})
	t.Run("one settled lead event", func(t *testing.T) {
		n := count(t, pool, `SELECT count(*) FROM lead_events l JOIN customers c ON c.id = l.customer_id
			WHERE c.click_id = $1 AND l.status = 'settled' AND NOT l.is_test`, res.ClickID)
		if n != 1 {
			t.Fatalf("%d settled lead events, want 1 (the repeat must record nothing)", n)
		}
	})
	t.Run("queued lead on the root-domain site settled for link A", func(t *testing.T) {
		var status, key string
		var firstPartner int64
		err := pool.QueryRow(ctx, `SELECT status, coalesce(customer_key, ''), first_partner_id FROM customers WHERE click_id = $1`,
			res.AltClickID).Scan(&status, &key, &firstPartner)
		if err != nil {
			t.Fatalf("customer %s: %v", res.AltClickID, err)
		}
		if status != "lead" || key != "cust-77" || firstPartner != partnerA {
			t.Fatalf("customer %s: status %q key %q first partner %d; want lead, cust-77, %d (aff wins over via)",
				res.AltClickID, status, key, firstPartner, partnerA)
		}
	})
	t.Run("the click id the tracker wrote into the payment link attributes the processor's checkout", func(t *testing.T) {
		// A payment-link checkout carries no metadata: only the
		// client_reference_id the tracker set (the driver checked the link
		// carries res.ClickID).
		event, _ := json.Marshal(map[string]any{
			"id": "evt_browser_checkout", "type": "checkout.session.completed", "account": processorAccount, "created": time.Now().Unix(),
			"data": map[string]any{"object": map[string]any{
				"id": "cs_browser", "mode": "payment", "payment_status": "paid", "amount_total": 1500, "currency": "usd",
				"payment_intent": "pi_browser", "client_reference_id": res.ClickID, "customer": "cus_browser",
			}},
		})
		// The webhook is commissions' (the gateway and the Ingress route it
		// there); its payment is attributed by tracking.
		hook := "http://" + st.commissions.Addr() + "/api/v1/webhooks/processor"
		req, err := http.NewRequestWithContext(ctx, "POST", hook, bytes.NewReader(event))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Processor-Signature", processorSignature(processorSecret, time.Now(), event))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"outcome":"sale_recorded"`) {
			t.Fatalf("webhook: %d %s", resp.StatusCode, body)
		}
		var status string
		var first *time.Time
		if err := pool.QueryRow(ctx, `SELECT status, first_purchase_date FROM customers WHERE click_id = $1`, res.ClickID).Scan(&status, &first); err != nil {
			t.Fatal(err)
		}
		if status != "conversion" || first == nil {
			t.Fatalf("customer %s: status %q first purchase %v; want conversion", res.ClickID, status, first)
		}
		if n := count(t, st.commissions.Platform().Pool, `SELECT count(*) FROM sales WHERE transaction_id = 'pi_browser' AND partner_id = $1
			AND amount_cents = 1500 AND source = 'processor' AND NOT reserved`, partnerA); n != 1 {
			t.Fatalf("%d sales for the checkout, want 1 credited to partner A", n)
		}
	})
	t.Run("refused, unknown and disabled clicks recorded nothing", func(t *testing.T) {
		// The two customers of the recorded clicks (page and alt site) and
		// their three click events; link C none.
		if n := count(t, pool, `SELECT count(*) FROM customers WHERE program_id = $1`, prog); n != 2 {
			t.Fatalf("%d customers in the program, want 2", n)
		}
		if n := count(t, pool, `SELECT count(*) FROM affiliate_click_events WHERE program_id = $1 AND NOT is_test`, prog); n != 3 {
			t.Fatalf("%d click events in the program, want 3", n)
		}
		if n := count(t, pool, `SELECT count(*) FROM affiliate_click_events WHERE link_id = $1`, linkC); n != 0 {
			t.Fatalf("%d click events for the disabled link, want 0", n)
		}
	})
	t.Run("one visit per page load", func(t *testing.T) {
		// The driver saw each visit answered; polled in case tracking ever
		// stores visits behind the answer.
		deadline := time.Now().Add(10 * time.Second)
		for {
			n := count(t, pool, `SELECT count(*) FROM visits WHERE program_id = $1`, prog)
			if n == res.PageLoads {
				return
			}
			if n > res.PageLoads || time.Now().After(deadline) {
				t.Fatalf("%d visits, want %d (one per page load)", n, res.PageLoads)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// requireBrowserTools fails (never skips: CI must not pass without the
// browser test) when a tool the test needs is missing, naming the fix.
func requireBrowserTools(t *testing.T) (node, chromium string) {
	t.Helper()
	var missing []string
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node is not on PATH: apt-get install -y nodejs npm")
	}
	for _, pkg := range []string{"playwright-core", "acorn"} {
		if _, err := os.Stat(filepath.Join("node_modules", pkg, "package.json")); err != nil {
			missing = append(missing, "node_modules/"+pkg+" is missing: cd services/tracking/browsertest && npm ci")
		}
	}
	chromium = os.Getenv("CHROMIUM_PATH")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		missing = append(missing, chromium+" is missing: apt-get install -y chromium (or set CHROMIUM_PATH)")
	}
	if len(missing) > 0 {
		t.Fatalf("the real-browser test needs:\n  %s", strings.Join(missing, "\n  "))
	}
	return node, chromium
}

type driverResult struct {
	ClickID    string `json:"click_id"`
	AltClickID string `json:"alt_click_id"`
	SessionID  string `json:"session_id"`
	PageLoads  int    `json:"page_loads"`
}

// runDriver runs tracker.spec.mjs, which asserts what happens in the
// browser, and returns the ids it saw for the database checks.
func runDriver(t *testing.T, node string, args []string) driverResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"tracker.spec.mjs"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("driver output:\n%s", stderr.String())
	if err != nil {
		t.Fatalf("browser driver failed (%v); see its output above", err)
	}
	var res driverResult
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		t.Fatalf("driver result %q: %v", stdout.String(), err)
	}
	if res.ClickID == "" || res.AltClickID == "" || res.SessionID == "" || res.PageLoads == 0 {
		t.Fatalf("driver result incomplete: %+v", res)
	}
	return res
}

// pageTemplate is a brand page: it queues a lead before the tracker loads
// when asked (?queue_lead=KEY), loads svc.js from the tracking service
// (another origin, so every tracker call is a CORS request) and carries the
// payment embeds the tracker decorates.
var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>svc tracker test page</title>
<script>
window.svc = window.svc || [];
var queued = /[?&]queue_lead=([^&#]*)/.exec(location.search);
if (queued) {
  svc.push(['lead', {customer_key: decodeURIComponent(queued[1]), email: 'queued@b.example'},
    function (err, body) { window.svcQueuedLead = {err: err, body: body}; }]);
}
</script>
<script src="{{.API}}/svc.js" data-program-id="{{.ProgramID}}" async></script>
</head><body>
<a id="pay" href="https://buy.stripe.com/test_123">Buy</a>
<a id="own" href="https://buy.stripe.com/test_456?client_reference_id=brand-user-7">Buy (brand reference)</a>
<stripe-pricing-table id="pricing" pricing-table-id="prctbl_test" publishable-key="pk_test_x"></stripe-pricing-table>
</body></html>
`))

func pageHandler(api string, programID *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/page" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = pageTemplate.Execute(w, map[string]any{"API": api, "ProgramID": programID.Load()})
	})
}

type stack struct {
	accounts, tracking, commissions *platform.Instance
}

// startStack runs the stack's services in-process on a fresh database and
// an embedded broker, as deploy/devstack does.
func startStack(t *testing.T) stack {
	t.Helper()
	seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	st := stacktest.Start(t, map[string]string{
		"ADMIN_TOKEN":         adminToken,
		"SESSION_SIGNING_KEY": base64.StdEncoding.EncodeToString(seed),
		"SESSION_PUBLIC_KEY":  base64.StdEncoding.EncodeToString(pub),
		// Commissions serves the processor webhook only with a secret.
		"PROCESSOR_WEBHOOK_SECRET": processorSecret,
	})
	return stack{accounts: st.Instance(accounts.Name), tracking: st.Instance(tracking.Name), commissions: st.Instance("commissions")}
}

// processorSignature is the processor's Processor-Signature header for body
// at t (written out here: commissions' Sign is internal to it).
func processorSignature(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}

// adminClient is the part of the accounts admin API the test needs. It
// keeps the highest X-Catalog-Seq seen for the sync barrier.
type adminClient struct {
	base string
	http *http.Client
	seq  int64
}

func (c *adminClient) create(t *testing.T, path string, body any) int64 {
	t.Helper()
	var out struct {
		ID int64 `json:"id"`
	}
	if err := c.call(t.Context(), http.MethodPost, path, body, &out); err != nil {
		t.Fatal(err)
	}
	return out.ID
}

// sync waits until tracking has applied every catalog write made so far.
func (c *adminClient) sync(t *testing.T) {
	t.Helper()
	path := fmt.Sprintf("/admin/v1/catalog/sync?seq=%d&timeout=30s", c.seq)
	if err := c.call(t.Context(), http.MethodGet, path, nil, nil); err != nil {
		t.Fatalf("wait for the catalog to reach tracking: %v", err)
	}
}

func (c *adminClient) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode %s body: %w", path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(raw))
	}
	if n, err := strconv.ParseInt(resp.Header.Get("X-Catalog-Seq"), 10, 64); err == nil && n > c.seq {
		c.seq = n
	}
	if out == nil {
		return nil
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("%s %s: decode: %w", method, path, err)
	}
	if len(env.Data) == 0 {
		return errors.New(method + " " + path + ": no data in answer")
	}
	return json.Unmarshal(env.Data, out)
}

type clickEvent struct {
	link, partner int64
	session       string
}

func clickEvents(t *testing.T, pool *pgxpool.Pool, clickID string) []clickEvent {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT e.link_id, e.partner_id, e.session_id FROM affiliate_click_events e
		JOIN customers c ON c.id = e.customer_id WHERE c.click_id = $1 AND NOT e.is_test ORDER BY e.id`, clickID)
	if err != nil {
		t.Fatalf("click events of %s: %v", clickID, err)
	}
	defer rows.Close()
	var out []clickEvent
	for rows.Next() {
		var e clickEvent
		if err := rows.Scan(&e.link, &e.partner, &e.session); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func count(t *testing.T, pool *pgxpool.Pool, q string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}
