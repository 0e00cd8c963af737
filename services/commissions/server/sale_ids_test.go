package server_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	"github.com/svc-dev/svc/services/commissions/server"
	trackingserver "github.com/svc-dev/svc/services/tracking/server"
)

// A refused sale consumes nothing (issue: money a brand can trust): only a
// recorded sale takes its transaction_id, globally; a refusal in one
// program leaves the id free for another program's sale and for the same
// brand's corrected retry (Track sale rule 2, the 400 rows' "retry: not
// unchanged"), on the sale route and on the processor's webhook alike.
// Everything through the gateway, as two brands would.
func TestRefusedSaleConsumesNothing(t *testing.T) {
	// Not parallel: its subtests are, on its stack (see startTrack).
	clock := platformtest.NewClock(t0)
	// The services these tests use (no analytics: it has no part here).
	s := startTrackOnly(t, clock, map[string]string{"PROCESSOR_WEBHOOK_SECRET": hookSecret}, "accounts", "tracking", "commissions")
	db := s.hookDB()
	// First, alone: the backfill counts the rows it fills.
	t.Run("backfill: older rows get their customer click ids", func(t *testing.T) { testBackfillCustomerClickIDs(t, s) })
	t.Run("a path or query that is not UTF-8 is a 400", func(t *testing.T) { testURLsThatAreNotUTF8(t, s) })
	decisions := func(t *testing.T, txn string) int {
		return count(t, db.tracking, `SELECT count(*) FROM attributions WHERE transaction_id = $1`, txn)
	}
	const otherProgram = "No affiliate attribution found for this customer in this program"

	t.Run("another brand's refused sale leaves the id free; the owner's sale is recorded, then the id answers 409 to both", func(t *testing.T) {
		t.Parallel()
		a := s.programNoSync(t, nil)
		b := s.program(t, nil)
		victim := s.click(t, b.code)
		txn := s.txn()

		// Brand A burns B's predictable order id with B's customer.
		wantError(t, s.sale(t, a.key, saleOf(txn, victim, 9900, "USD", nil)), 400, "no_attribution", otherProgram)
		s.wantNoSale(t, txn)
		if n := decisions(t, txn); n != 0 {
			t.Fatalf("tracking kept %d decisions of a refused sale", n)
		}
		// Again, unchanged: the same refusal, still nothing kept.
		wantError(t, s.sale(t, a.key, saleOf(txn, victim, 9900, "USD", nil)), 400, "no_attribution", otherProgram)

		out := wantSale(t, s.sale(t, b.key, saleOf(txn, victim, 5000, "USD", nil)), txn, victim)
		if out.Commission == nil || out.Commission.Amount != 5 {
			t.Fatalf("B's sale: commission %+v, want 5 USD", out.Commission)
		}
		v, ok := s.saleRecord(t, txn, false)
		if !ok || v.ID != out.SaleID || v.ProgramID != b.id || v.AmountCents != 5000 || len(v.CommissionIDs) != 1 {
			t.Fatalf("sale record %+v (found %v)", v, ok)
		}
		if got := s.balances(t, b.partner); got != "USD 500/0/500" {
			t.Fatalf("B's partner: %q, want USD 500/0/500", got)
		}
		if got := s.balances(t, a.partner); got != "" {
			t.Fatalf("A's partner: %q, want nothing", got)
		}
		// Recorded now: the id is consumed for everyone (scope is global),
		// and every 409 is the spec's, naming the sale that stands.
		for _, c := range []struct {
			name, key, click string
		}{
			{"A with B's customer", a.key, victim},
			{"A with its own customer", a.key, s.click(t, a.code)},
			{"B again", b.key, victim},
		} {
			e := wantError(t, s.sale(t, c.key, saleOf(txn, c.click, 100, "USD", nil)), 409, "duplicate_transaction",
				"Duplicate transaction_id. This sale has already been recorded.")
			if d, _ := e["details"].(map[string]any); d == nil || d["sale_id"] != float64(out.SaleID) || len(d) != 1 {
				t.Fatalf("%s: details %v, want {sale_id: %d}", c.name, e["details"], out.SaleID)
			}
		}
		if n := decisions(t, txn); n != 1 {
			t.Fatalf("tracking kept %d decisions, want B's one", n)
		}
	})

	t.Run("the same brand's corrected retries are recorded under the refused id", func(t *testing.T) {
		t.Parallel()
		p := s.programNoSync(t, nil)
		q := s.program(t, nil)
		mine := s.click(t, p.code)
		txn := s.txn()

		// The wrong customer (another program's click), then the right one.
		wantError(t, s.sale(t, p.key, saleOf(txn, s.click(t, q.code), 3000, "USD", nil)), 400, "no_attribution", otherProgram)
		// An unknown customer, then the right one.
		wantError(t, s.sale(t, p.key, saleOf(txn, "cust_1_1", 3000, "USD", nil)), 400, "no_attribution",
			"Customer not found. Provide customer_key or click_id.")
		s.wantNoSale(t, txn)
		wantSale(t, s.sale(t, p.key, saleOf(txn, mine, 3000, "USD", nil)), txn, mine)

		// A partner with a link but no partner-program record: refused;
		// once the brand enrols the partner, the same id is recorded.
		var loner struct{ ID int64 }
		u := s.uniq()
		s.adminData(t, "POST", "/admin/v1/partners", map[string]any{"name": "Later " + u, "email": "later" + u + "@partners.example"}, &loner)
		code := "LATE" + u
		s.adminData(t, "POST", fmt.Sprintf("/admin/v1/programs/%d/links", p.id), map[string]any{"partner_id": loner.ID, "code": code, "active": true}, nil)
		s.sync(t)
		cid := s.click(t, code)
		txn = s.txn()
		wantError(t, s.sale(t, p.key, saleOf(txn, cid, 4000, "USD", nil)), 400, "no_attribution",
			"No partner-program relationship found for this customer")
		s.wantNoSale(t, txn)
		s.adminData(t, "POST", fmt.Sprintf("/admin/v1/programs/%d/partners", p.id), map[string]any{"partner_id": loner.ID, "approved": true}, nil)
		s.sync(t)
		out := wantSale(t, s.sale(t, p.key, saleOf(txn, cid, 4000, "USD", nil)), txn, cid)
		if out.Commission == nil || out.Commission.Amount != 4 {
			t.Fatalf("commission %+v, want 4 USD", out.Commission)
		}
		if c := s.commission(t, out.Commission.ID); c.PartnerID != loner.ID {
			t.Fatalf("commission of partner %d, want the enrolled %d", c.PartnerID, loner.ID)
		}
	})

	t.Run("a key known to the route's cache is refused as soon as its retirement reaches the replica", func(t *testing.T) {
		t.Parallel()
		p := s.program(t, nil)
		key, keyID := s.newKey(t, p.id, false)
		s.sync(t)
		txn := s.txn()
		wantSale(t, s.sale(t, key, saleOf(txn, s.click(t, p.code), 1000, "USD", nil)), txn, "")
		// Used again (now from the cache) by a refund.
		if r := s.refund(t, key, map[string]any{"transaction_id": txn, "refund_amount_cents": 100, "refund_id": "re_" + s.uniq()}); r.status != 200 {
			t.Fatalf("refund: %d %s", r.status, r.raw)
		}
		s.markRotation(t, keyID, clock.Now().Add(-time.Minute))
		s.sync(t)
		txn = s.txn()
		r := s.sale(t, key, saleOf(txn, s.click(t, p.code), 1000, "USD", nil))
		if e, _ := r.body["error"].(map[string]any); r.status != 401 || e == nil || e["code"] != "api_key_rotation_required" {
			t.Fatalf("retired key: %d %s", r.status, r.raw)
		}
		s.wantNoSale(t, txn)
	})

	t.Run("processor: an event without account is not routed by its metadata unless the operator named the platform account", func(t *testing.T) {
		t.Parallel()
		p := s.program(t, nil)
		cid := s.click(t, p.code)
		ev := s.hookEvent(t, "checkout_session_completed_payment.json", "", map[string]any{"svc_click_id": cid, "program_id": fmt.Sprint(p.id)}, nil)
		delete(ev, "account")
		wantHook(t, s.deliver(t, ev), "unknown_account")
		s.wantNoSale(t, hookObject(ev)["payment_intent"].(string))
		if c := db.customer(t, cid); c.status != "click" {
			t.Fatalf("an unrouted event moved the customer: %+v", c)
		}
	})

	t.Run("processor: an event refused for attribution leaves its payment id free", func(t *testing.T) {
		t.Parallel()
		a, accountA := s.connectedProgram(t, nil)
		b, accountB := s.connectedProgram(t, nil)
		_ = a
		victim := s.click(t, b.code)
		pi := "pi_shared_" + s.uniq()
		refused := s.hookEvent(t, "checkout_session_completed_payment.json", accountA, map[string]any{"svc_click_id": victim},
			map[string]any{"payment_intent": pi})
		wantHook(t, s.deliver(t, refused), "not_attributed")
		s.wantNoSale(t, pi)
		if n := decisions(t, pi); n != 0 {
			t.Fatalf("tracking kept %d decisions of a refused payment", n)
		}
		r := wantHook(t, s.deliver(t, s.hookEvent(t, "checkout_session_completed_payment.json", accountB, map[string]any{"svc_click_id": victim},
			map[string]any{"payment_intent": pi})), "sale_recorded")
		v, ok := s.saleRecord(t, pi, false)
		if !ok || v.ID != hookSaleID(t, r) || v.ProgramID != b.id || len(v.CommissionIDs) != 1 {
			t.Fatalf("sale %+v (found %v)", v, ok)
		}
		// The brand's own call for that payment now answers the spec's 409.
		e := wantError(t, s.sale(t, b.key, saleOf(pi, victim, 2500, "USD", nil)), 409, "duplicate_transaction",
			"Duplicate transaction_id. This sale has already been recorded.")
		if d, _ := e["details"].(map[string]any); d == nil || d["sale_id"] != float64(v.ID) {
			t.Fatalf("details %v, want sale %d", e["details"], v.ID)
		}
	})
}

// Every commission names its customer (GET /admin/v1/commissions/{id}
// customer_click_id): sale commissions from the attribution decision,
// whichever identifier found the customer (the sale route's click_id or
// customer_key; the processor's svc_click_id, the lead's email,
// client_reference_id, svc_customer_key, then the processor customer of a
// renewal), and lead commissions from the lead event.
func TestCommissionsNameTheirCustomer(t *testing.T) {
	// Not parallel: its subtests are, on its stack (see startTrack).
	clock := platformtest.NewClock(t0)
	// The operator names the platform's own account: its payments (events
	// without account) are routed by their metadata program_id.
	s := startTrackOnly(t, clock, map[string]string{"PROCESSOR_WEBHOOK_SECRET": hookSecret, "PROCESSOR_PLATFORM_ACCOUNT": "acct_platform"},
		"accounts", "tracking", "commissions")
	db := s.hookDB()
	// clickOf is the customer_click_id of the one commission of the sale
	// recorded under txn.
	clickOf := func(t *testing.T, txn string) string {
		t.Helper()
		v, ok := s.saleRecord(t, txn, false)
		if !ok || len(v.CommissionIDs) != 1 {
			t.Fatalf("sale %s: %+v (found %v), want one commission", txn, v, ok)
		}
		return s.commission(t, v.CommissionIDs[0]).CustomerClick
	}

	t.Run("sale route: by click_id and by customer_key alone", func(t *testing.T) {
		t.Parallel()
		p := s.program(t, map[string]any{"commission_type": "recurring_percent"})
		cid := s.click(t, p.code)
		txn := s.txn()
		out := wantSale(t, s.sale(t, p.key, saleOf(txn, cid, 2000, "USD", nil)), txn, cid)
		if got := s.commission(t, out.Commission.ID).CustomerClick; got != cid {
			t.Fatalf("by click_id: customer_click_id %q, want %q", got, cid)
		}
		keyed := s.click(t, p.code)
		key := "ck-" + s.uniq()
		s.lead(t, p.key, keyed, key)
		txn = s.txn()
		wantSale(t, s.sale(t, p.key, saleOf(txn, "", 2000, "USD", map[string]any{"customer_key": key})), txn, keyed)
		if got := clickOf(t, txn); got != keyed {
			t.Fatalf("by customer_key: customer_click_id %q, want %q", got, keyed)
		}
	})

	t.Run("lead commission: the lead event's customer", func(t *testing.T) {
		t.Parallel()
		p := s.program(t, map[string]any{"lead_commission": 1})
		cid := s.click(t, p.code)
		s.lead(t, p.key, cid, "")
		var id int64
		eventually(t, "the lead commission", func() bool {
			return db.commissions.QueryRow(t.Context(), `SELECT id FROM commissions WHERE kind = 'lead' AND program_id = $1`, p.id).Scan(&id) == nil
		})
		if c := s.commission(t, id); c.CustomerClick != cid || c.Kind != "lead" {
			t.Fatalf("lead commission %+v, want customer_click_id %q", c, cid)
		}
	})

	t.Run("processor: each step of the resolution order names the customer it chose", func(t *testing.T) {
		t.Parallel()
		p, account := s.connectedProgram(t, map[string]any{"commission_type": "recurring_percent"})
		checkout := func(t *testing.T, md, fields map[string]any) string {
			t.Helper()
			ev := s.hookEvent(t, "checkout_session_completed_payment.json", account, md, fields)
			wantHook(t, s.deliver(t, ev), "sale_recorded")
			return hookObject(ev)["payment_intent"].(string)
		}
		// A decoy customer with the same email, to show the click id wins.
		byEmail := s.click(t, p.code)
		email := "buyer" + s.uniq() + "@example.com"
		if r := s.do(t, "POST", "/api/v1/track/lead", map[string]any{"click_id": byEmail, "email": email}, bearer(p.key)...); r.status != 200 {
			t.Fatalf("lead: %d %s", r.status, r.raw)
		}
		byClick := s.click(t, p.code)
		if got := clickOf(t, checkout(t, map[string]any{"svc_click_id": byClick}, map[string]any{"customer_details": map[string]any{"email": email}})); got != byClick {
			t.Fatalf("svc_click_id: %q, want %q", got, byClick)
		}
		if got := clickOf(t, checkout(t, map[string]any{}, map[string]any{"customer_details": map[string]any{"email": email}})); got != byEmail {
			t.Fatalf("email: %q, want %q", got, byEmail)
		}
		byRef := s.click(t, p.code)
		if got := clickOf(t, checkout(t, nil, map[string]any{"client_reference_id": byRef, "customer_details": nil})); got != byRef {
			t.Fatalf("client_reference_id: %q, want %q", got, byRef)
		}
		byKey := s.click(t, p.code)
		key := "pk-" + s.uniq()
		s.lead(t, p.key, byKey, key)
		if got := clickOf(t, checkout(t, map[string]any{"svc_customer_key": key}, map[string]any{"customer_details": nil})); got != byKey {
			t.Fatalf("svc_customer_key: %q, want %q", got, byKey)
		}
		// A renewal with nothing but the processor customer saved on the
		// first attributed payment.
		subscriber := s.click(t, p.code)
		customer := "cus_named_" + s.uniq()
		first := s.hookEvent(t, "invoice_payment_succeeded_basil.json", account, map[string]any{"svc_click_id": subscriber}, map[string]any{"customer": customer})
		wantHook(t, s.deliver(t, first), "sale_recorded")
		renewal := s.hookEvent(t, "invoice_payment_succeeded_legacy.json", account, map[string]any{}, map[string]any{"customer": customer})
		wantHook(t, s.deliver(t, renewal), "sale_recorded")
		if got := clickOf(t, hookObject(renewal)["id"].(string)); got != subscriber {
			t.Fatalf("processor customer: %q, want %q", got, subscriber)
		}
	})

	t.Run("processor: the platform account's payment, routed by metadata once the operator named that account", func(t *testing.T) {
		t.Parallel()
		p := s.program(t, nil)
		cid := s.click(t, p.code)
		ev := s.hookEvent(t, "checkout_session_completed_payment.json", "", map[string]any{"svc_click_id": cid, "program_id": fmt.Sprint(p.id)}, nil)
		delete(ev, "account")
		wantHook(t, s.deliver(t, ev), "sale_recorded")
		if got := clickOf(t, hookObject(ev)["payment_intent"].(string)); got != cid {
			t.Fatalf("customer %q, want %q", got, cid)
		}
	})
}

// Rows written before the ledger kept the customer's click id are filled
// by `tracking customers export-clicks | commissions backfill
// customer-click-ids -`: only the empty ones, idempotently; a bad file
// writes nothing.
func testBackfillCustomerClickIDs(t *testing.T, s *trackStack) {
	db := s.hookDB()
	p := s.program(t, map[string]any{"lead_commission": 1})
	cid := s.click(t, p.code)
	s.lead(t, p.key, cid, "")
	txn := s.txn()
	sale := wantSale(t, s.sale(t, p.key, saleOf(txn, cid, 1000, "USD", nil)), txn, cid)
	eventually(t, "the lead commission", func() bool {
		return count(t, db.commissions, `SELECT count(*) FROM commissions WHERE kind = 'lead' AND program_id = $1`, p.id) == 1
	})
	// What an older release left: no click ids.
	if _, err := db.commissions.Exec(t.Context(), `UPDATE sales SET customer_click_id = '' WHERE program_id = $1`, p.id); err != nil {
		t.Fatal(err)
	}
	if _, err := db.commissions.Exec(t.Context(), `UPDATE commissions SET customer_click_id = '' WHERE program_id = $1`, p.id); err != nil {
		t.Fatal(err)
	}
	// A row whose id is set already keeps it.
	if _, err := db.commissions.Exec(t.Context(), `UPDATE commissions SET customer_click_id = 'kept' WHERE kind = 'lead' AND program_id = $1`, p.id); err != nil {
		t.Fatal(err)
	}
	unfilled := func() int {
		return count(t, db.commissions, `SELECT (SELECT count(*) FROM sales WHERE program_id = $1 AND customer_click_id = '')
			+ (SELECT count(*) FROM commissions WHERE program_id = $1 AND customer_click_id = '')`, p.id)
	}
	run := func(t *testing.T, spec platform.Spec, name string, stdin string, args ...string) (int, string, string) {
		t.Helper()
		cfg := s.st.Instance(name).Platform().Config
		env := map[string]string{"DATABASE_URL": cfg.DatabaseURL, "LOG_LEVEL": "error"}
		var stdout, stderr bytes.Buffer
		code := platform.Run(t.Context(), spec, args, func(k string) string { return env[k] }, &stdout,
			platform.WithStderr(&stderr), platform.WithStdin(strings.NewReader(stdin)))
		return code, stdout.String(), stderr.String()
	}

	code, export, errOut := run(t, trackingserver.Spec(), "tracking", "", "customers", "export-clicks")
	if code != 0 || !strings.HasPrefix(export, "customer_id,click_id\n") || !strings.Contains(export, ","+cid+"\n") {
		t.Fatalf("export: %d %q %q", code, export, errOut)
	}
	for _, bad := range []string{"", "id,click\n1,a\n", "customer_id,click_id\nx,a\n", "customer_id,click_id\n1,a\n1,b\n", export + "7,\n"} {
		if code, _, errOut := run(t, server.Spec(), "commissions", bad, "backfill", "customer-click-ids", "-"); code != 1 || !strings.Contains(errOut, "nothing written") {
			t.Fatalf("bad file %q: %d %q", bad, code, errOut)
		}
	}
	if n := unfilled(); n != 2 {
		t.Fatalf("%d rows without a click id after refused files, want the sale and its commission", n)
	}
	code, out, errOut := run(t, server.Spec(), "commissions", export, "backfill", "customer-click-ids", "-")
	if code != 0 || !strings.Contains(out, "filled 1 sales and 1 commissions") {
		t.Fatalf("backfill: %d %q %q", code, out, errOut)
	}
	if n := unfilled(); n != 0 {
		t.Fatalf("%d rows still without a click id", n)
	}
	if c := s.commission(t, sale.Commission.ID); c.CustomerClick != cid {
		t.Fatalf("sale commission after the backfill: %+v, want %q", c, cid)
	}
	if n := count(t, db.commissions, `SELECT count(*) FROM commissions WHERE kind = 'lead' AND program_id = $1 AND customer_click_id = 'kept'`, p.id); n != 1 {
		t.Fatal("the backfill overwrote a click id that was set")
	}
	if code, out, _ := run(t, server.Spec(), "commissions", export, "backfill", "customer-click-ids", "-"); code != 0 || !strings.Contains(out, "filled 0 sales and 0 commissions") {
		t.Fatalf("second run: %d %q", code, out)
	}
	if code, _, _ := run(t, server.Spec(), "commissions", "", "backfill", "nonsense"); code != 2 {
		t.Fatalf("usage: %d, want 2", code)
	}
}

// Bytes that are not UTF-8 in a path parameter or a query value are the
// client's mistake: 400 before the route runs, never the 500 that
// Postgres' encoding error used to become. Through the gateway.
func testURLsThatAreNotUTF8(t *testing.T, s *trackStack) {
	for _, path := range []string{"/admin/v1/sales/%C0%AF", "/admin/v1/sales/tx%FF?test=true", "/admin/v1/sales/tx?test=%FF"} {
		r := s.admin(t, "GET", path, nil)
		e, _ := r.body["error"].(map[string]any)
		if r.status != 400 || e == nil || e["message"] != "Request URL must be valid UTF-8" {
			t.Fatalf("%s: %d %s", path, r.status, r.raw)
		}
	}
	p := s.program(t, nil)
	r := s.do(t, "POST", "/api/v1/track/sale?x=%FF", saleOf(s.txn(), s.click(t, p.code), 100, "USD", nil), bearer(p.key)...)
	wantError(t, r, 400, "invalid_request", "Request URL must be valid UTF-8")
}
