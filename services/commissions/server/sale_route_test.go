package server_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// POST /api/v1/track/sale through the gateway (spec: POST /track/sale,
// Errors "Track sale", "Authentication messages (sale, refund)", Retired
// key, Versioning item 3; the money rules).
func TestSaleRoute(t *testing.T) {
	// Not parallel: its subtests are, on its stack (see startTrack).
	clock := platformtest.NewClock(t0)
	s := startTrack(t, clock, nil)

	// The shared program of the error rows and its keys; another program.
	p := s.programNoSync(t, nil)
	q := s.programNoSync(t, nil)
	keyed := s.programNoSync(t, nil) // its rotating and retired keys
	rotating, rotID := s.newKey(t, keyed.id, false)
	retired, retID := s.newKey(t, keyed.id, false)
	s.markRotation(t, rotID, clock.Now().Add(72*time.Hour))
	s.markRotation(t, retID, clock.Now().Add(-time.Minute))
	// A partner with a link in p but no partner-program record.
	var loner struct{ ID int64 }
	s.adminData(t, "POST", "/admin/v1/partners", map[string]any{"name": "Loner", "email": "loner@partners.example"}, &loner)
	s.adminData(t, "POST", fmt.Sprintf("/admin/v1/programs/%d/links", p.id), map[string]any{"partner_id": loner.ID, "code": "NOPP", "active": true}, nil)
	s.sync(t)

	t.Run("rows", func(t *testing.T) {
		t.Run("200 live: conversion, approved commission at once (hold 0), balance credited; a second sale of a percent customer has none", func(t *testing.T) {
			t.Parallel()
			p := s.program(t, nil)
			cid := s.click(t, p.code)
			s.lead(t, p.key, cid, "cust-live")
			txn := s.txn()
			r := s.sale(t, p.key, saleOf(txn, cid, 2501, "USD", nil))
			out := wantSale(t, r, txn, cid)
			if c := out.Commission; c == nil || c.Status != "approved" || c.Amount != 2.5 || c.Currency != "USD" {
				t.Fatalf("commission: %s, want approved 2.5 USD (10%% of 2501 cents = 250.1 -> 250)", r.raw)
			}
			for _, k := range []string{"success", "message", "sale_id", "transaction_id", "click_id", "customer_status", "commission"} {
				if _, ok := r.body[k]; !ok {
					t.Fatalf("no %s: %s", k, r.raw)
				}
			}
			if got := s.balances(t, p.partner); got != "USD 250/0/250" {
				t.Fatalf("balances %q, want USD 250/0/250", got)
			}
			v, ok := s.saleRecord(t, txn, false)
			if !ok || v.ID != out.SaleID || v.ProgramID != p.id || v.AmountCents != 2501 || v.Currency != "USD" || v.IsTest ||
				v.RefundedCents != 0 || len(v.CommissionIDs) != 1 || v.CommissionIDs[0] != out.Commission.ID {
				t.Fatalf("sale record %+v (found %v)", v, ok)
			}
			c := s.commission(t, out.Commission.ID)
			if c.Status != "approved" || c.Amount != 250 || c.Currency != "USD" || c.PartnerID != p.partner || c.ProgramID != p.id ||
				c.TransactionID != txn || c.Kind != "sale" || c.SaleID == nil || *c.SaleID != out.SaleID || c.ApprovedAt == nil {
				t.Fatalf("commission record %+v", c)
			}
			// Found by customer_key alone; percent pays on the first sale only.
			txn2 := s.txn()
			r = s.sale(t, p.key, saleOf(txn2, "", 9999, "USD", map[string]any{"customer_key": "cust-live"}))
			if out2 := wantSale(t, r, txn2, cid); out2.Commission != nil {
				t.Fatalf("second sale of a percent customer: %s, want no commission", r.raw)
			}
			if v, ok := s.saleRecord(t, txn2, false); !ok || len(v.CommissionIDs) != 0 {
				t.Fatalf("second sale %+v (found %v)", v, ok)
			}
			if got := s.balances(t, p.partner); got != "USD 250/0/250" {
				t.Fatalf("balances %q after the second sale", got)
			}
		})

		t.Run("percent: round half up in USD, EUR and VND; a computed 0 creates none", func(t *testing.T) {
			t.Parallel()
			p10 := s.programNoSync(t, nil)
			p125 := s.programNoSync(t, map[string]any{"commission_rate": 12.5})
			s.sync(t)
			for _, c := range []struct {
				p        prog
				cents    int64
				currency string
				want     float64 // major units; 0: no commission
			}{
				{p10, 2505, "USD", 2.51},    // 250.5 -> 251
				{p10, 2504, "USD", 2.5},     // 250.4 -> 250
				{p10, 2505, "EUR", 2.51},    // the sale's currency
				{p10, 123455, "VND", 12346}, // 12345.5 -> 12346, 0 decimals
				{p10, 123454, "VND", 12345},
				{p10, 4, "USD", 0},         // 0.4 -> 0: none
				{p125, 1004, "USD", 1.26},  // 125.5 -> 126
				{p125, 12345, "VND", 1543}, // 1543.125 -> 1543
				{p125, 4, "EUR", 0.01},     // 0.5 -> 1
			} {
				txn := s.txn()
				r := s.sale(t, c.p.key, saleOf(txn, s.click(t, c.p.code), c.cents, c.currency, nil))
				out := wantSale(t, r, txn, "")
				switch {
				case c.want == 0 && out.Commission != nil:
					t.Fatalf("%d %s: %s, want no commission", c.cents, c.currency, r.raw)
				case c.want != 0 && (out.Commission == nil || out.Commission.Amount != c.want || out.Commission.Currency != c.currency):
					t.Fatalf("%d %s at rate of program %d: %s, want %v %s", c.cents, c.currency, c.p.id, r.raw, c.want, c.currency)
				}
			}
			if got := s.balances(t, p10.partner); !sameSet(got, "USD 501/0/501, EUR 251/0/251, VND 24691/0/24691") {
				t.Fatalf("balances %q", got)
			}
		})

		t.Run("fixed: commission_rate major units of the program currency, once; recurring_percent on every sale", func(t *testing.T) {
			t.Parallel()
			eur := s.programNoSync(t, map[string]any{"commission_type": "fixed", "commission_rate": 5, "currency": "EUR"})
			vnd := s.programNoSync(t, map[string]any{"commission_type": "fixed", "commission_rate": 50000, "currency": "VND"})
			usd := s.programNoSync(t, map[string]any{"commission_type": "fixed", "commission_rate": 9.99})
			rec := s.programNoSync(t, map[string]any{"commission_type": "recurring_percent", "commission_rate": 10, "duration_months": 0})
			s.sync(t)
			for _, c := range []struct {
				p        prog
				currency string
				want     float64
				balance  string
			}{
				{eur, "EUR", 5, "EUR 500/0/500"},
				{vnd, "VND", 50000, "VND 50000/0/50000"},
				{usd, "USD", 9.99, "USD 999/0/999"},
			} {
				cid := s.click(t, c.p.code)
				txn := s.txn()
				r := s.sale(t, c.p.key, saleOf(txn, cid, 1000, "USD", nil)) // a USD sale: the reward is in the program's currency
				if out := wantSale(t, r, txn, cid); out.Commission == nil || out.Commission.Amount != c.want || out.Commission.Currency != c.currency {
					t.Fatalf("fixed %v %s: %s", c.want, c.currency, r.raw)
				}
				txn = s.txn()
				if out := wantSale(t, s.sale(t, c.p.key, saleOf(txn, cid, 1000, "USD", nil)), txn, cid); out.Commission != nil {
					t.Fatalf("fixed pays once per customer: second sale has %+v", out.Commission)
				}
				if got := s.balances(t, c.p.partner); got != c.balance {
					t.Fatalf("balances %q, want %q", got, c.balance)
				}
			}
			cid := s.click(t, rec.code)
			for i, cents := range []int64{1000, 2005} {
				txn := s.txn()
				r := s.sale(t, rec.key, saleOf(txn, cid, cents, "USD", nil))
				if out := wantSale(t, r, txn, cid); out.Commission == nil || out.Commission.Amount != []float64{1, 2.01}[i] {
					t.Fatalf("recurring_percent sale %d: %s", i, r.raw)
				}
			}
		})

		t.Run("test sales: no commission, no balance, never consume a live transaction_id", func(t *testing.T) {
			t.Parallel()
			p := s.programNoSync(t, nil)
			tk, _ := s.newKey(t, p.id, true)
			s.sync(t)
			cid := s.click(t, p.code)
			wantTestSale := func(t *testing.T, r reply) (string, float64) {
				t.Helper()
				d, _ := r.body["data"].(map[string]any)
				if r.status != 200 || r.body["success"] != true || r.body["message"] != "Test sale recorded" || d == nil ||
					d["test_mode"] != true || d["programId"] != float64(p.id) || d["eventId"] == nil {
					t.Fatalf("%d %s", r.status, r.raw)
				}
				if _, ok := r.body["commission"]; ok {
					t.Fatalf("a test sale answers no commission: %s", r.raw)
				}
				wantTrackHeaders(t, r)
				txn, _ := d["transaction_id"].(string)
				id, _ := d["eventId"].(float64)
				return txn, id
			}
			testMode := map[string]any{"additional_data": map[string]any{"test_mode": true}}
			// additional_data.test_mode with a real order number.
			txn := s.txn()
			got, id := wantTestSale(t, s.sale(t, p.key, saleOf(txn, cid, 5000, "USD", testMode)))
			if got != txn {
				t.Fatalf("transaction_id %q, want %q", got, txn)
			}
			if v, ok := s.saleRecord(t, txn, true); !ok || !v.IsTest || v.ID != int64(id) || v.ProgramID != p.id || len(v.CommissionIDs) != 0 {
				t.Fatalf("test sale at ?test=true: %+v (found %v)", v, ok)
			}
			if _, ok := s.saleRecord(t, txn, false); ok {
				t.Fatal("a test sale is readable as the live sale")
			}
			if got := s.balances(t, p.partner); got != "" {
				t.Fatalf("a test sale changed the balance: %q", got)
			}
			// The same id again as a test sale: test ids are unique among
			// test sales.
			if r := s.sale(t, p.key, saleOf(txn, cid, 5000, "USD", testMode)); r.status != 409 {
				t.Fatalf("second test sale with the same id: %d %s, want 409", r.status, r.raw)
			}
			// The brand's later live sale with that id is recorded.
			live := wantSale(t, s.sale(t, p.key, saleOf(txn, cid, 5000, "USD", nil)), txn, cid)
			if live.Commission == nil || live.Commission.Amount != 5 {
				t.Fatalf("live sale after a test sale: %+v", live)
			}
			if v, ok := s.saleRecord(t, txn, true); !ok || v.ID != int64(id) {
				t.Fatalf("the test sale is still there: %+v (found %v)", v, ok)
			}
			// A test key makes a test sale; without transaction_id the id is
			// generated: the clock's time, unique even when the clock stands
			// still (the next nanosecond).
			generated := map[string]bool{}
			for _, c := range []struct {
				name, key string
				extra     map[string]any
			}{{"test key", tk, nil}, {"test_mode", p.key, testMode}, {"test key again, same instant", tk, nil}} {
				body := saleOf("", s.click(t, p.code), 700, "EUR", c.extra)
				delete(body, "transaction_id")
				got, _ := wantTestSale(t, s.sale(t, c.key, body))
				if generated[got] {
					t.Fatalf("%s: generated id %q given twice", c.name, got)
				}
				generated[got] = true
				if !regexp.MustCompile(`^test_txn_[0-9]+$`).MatchString(got) {
					t.Fatalf("%s: generated id %q, want test_txn_<digits>", c.name, got)
				}
				if v, ok := s.saleRecord(t, got, true); !ok || !v.IsTest {
					t.Fatalf("%s: generated test sale %q not readable", c.name, got)
				}
			}
			// A test key with a sent transaction id: a test sale too.
			txn = s.txn()
			if got, _ := wantTestSale(t, s.sale(t, tk, saleOf(txn, s.click(t, p.code), 100, "USD", nil))); got != txn {
				t.Fatalf("test key sale id %q, want %q", got, txn)
			}
			if _, ok := s.saleRecord(t, txn, false); ok {
				t.Fatal("a test key's sale is a live sale")
			}
			if got := s.balances(t, p.partner); got != "USD 500/0/500" {
				t.Fatalf("balances %q, want only the live sale's USD 500/0/500", got)
			}
		})

		t.Run("errors: status, code and message of each row, nothing written", func(t *testing.T) {
			t.Parallel()
			cid := s.click(t, p.code)
			other := s.click(t, q.code)
			unlinked := s.click(t, "NOPP")
			old := clock.Now().Add(-31 * day).Format(time.RFC3339)
			ahead := clock.Now().Add(10 * time.Minute).Format(time.RFC3339)
			const (
				malformed = "Missing or malformed Authorization header. Expected: Bearer <token>"
				amount    = "amount_cents is required and must be a positive integer"
				occurred  = "occurred_at must be an ISO 8601 time within the last 30 days"
				notFound  = "Customer not found. Provide customer_key or click_id."
			)
			rows := []struct {
				name    string
				body    func(txn string) any
				headers []string
				status  int
				code    string
				message string
			}{
				{"401 no header", nil, []string{}, 401, "unauthorized", malformed},
				{"401 not Bearer", nil, []string{"Authorization", "Basic " + p.key}, 401, "unauthorized", malformed},
				{"401 empty token", nil, []string{"Authorization", "Bearer "}, 401, "unauthorized", "Missing API token"},
				{"401 unknown token", nil, bearer("svc_live_nothing"), 401, "unauthorized", "Invalid API token"},
				{"400 transaction_id missing", edit(cid, map[string]any{"transaction_id": nil}), nil, 400, "invalid_request", "transaction_id is required and must be a string"},
				{"400 transaction_id a number", edit(cid, map[string]any{"transaction_id": 12}), nil, 400, "invalid_request", "transaction_id is required and must be a string"},
				{"400 transaction_id blank", edit(cid, map[string]any{"transaction_id": " "}), nil, 400, "invalid_request", "transaction_id is required and must be a string"},
				{"400 amount missing", edit(cid, map[string]any{"amount_cents": nil}), nil, 400, "invalid_request", amount},
				{"400 amount zero", edit(cid, map[string]any{"amount_cents": 0}), nil, 400, "invalid_request", amount},
				{"400 amount negative", edit(cid, map[string]any{"amount_cents": -5}), nil, 400, "invalid_request", amount},
				{"400 amount fractional", edit(cid, map[string]any{"amount_cents": 10.5}), nil, 400, "invalid_request", amount},
				{"400 amount a string", edit(cid, map[string]any{"amount_cents": "100"}), nil, 400, "invalid_request", amount},
				{"400 amount over 10^12 (ours: balances never overflow)", edit(cid, map[string]any{"amount_cents": int64(1_000_000_000_001)}), nil, 400, "invalid_request", "amount_cents must be at most 1000000000000"},
				{"400 occurred_at not a time", edit(cid, map[string]any{"occurred_at": "yesterday"}), nil, 400, "invalid_request", occurred},
				{"400 occurred_at without offset", edit(cid, map[string]any{"occurred_at": "2026-03-09T10:00:00"}), nil, 400, "invalid_request", occurred},
				{"400 occurred_at not a real date", edit(cid, map[string]any{"occurred_at": "2026-02-30T10:00:00Z"}), nil, 400, "invalid_request", occurred},
				{"400 occurred_at older than 30 days", edit(cid, map[string]any{"occurred_at": old}), nil, 400, "invalid_request", occurred},
				{"400 occurred_at more than 5 minutes ahead", edit(cid, map[string]any{"occurred_at": ahead}), nil, 400, "invalid_request", occurred},
				{"400 provider unknown", edit(cid, map[string]any{"provider": "bank"}), nil, 400, "invalid_request",
					"provider must be one of: processor, paddle, lemonsqueezy, paypal, chargebee, recurly, braintree, manual, other"},
				{"400 provider_payment_id empty", edit(cid, map[string]any{"provider_payment_id": ""}), nil, 400, "invalid_request", "provider_payment_id must be a string of 1 to 255 characters"},
				{"400 provider_payment_id 256 characters", edit(cid, map[string]any{"provider_payment_id": strings.Repeat("x", 256)}), nil, 400, "invalid_request",
					"provider_payment_id must be a string of 1 to 255 characters"},
				{"400 livemode not a boolean", edit(cid, map[string]any{"livemode": "yes"}), nil, 400, "invalid_request", "livemode must be a boolean"},
				{"422 currency XYZ", edit(cid, map[string]any{"currency": "XYZ"}), nil, 422, "unsupported_currency", "currency XYZ is not supported"},
				{"422 currency GBP", edit(cid, map[string]any{"currency": "GBP"}), nil, 422, "unsupported_currency", "currency GBP is not supported"},
				{"400 currency missing", edit(cid, map[string]any{"currency": nil}), nil, 400, "invalid_request", "currency is required: one of USD, EUR, VND"},
				{"400 neither click_id nor customer_key", edit("", nil), nil, 400, "no_attribution", notFound},
				{"400 unknown click_id", edit("cust_1_1", nil), nil, 400, "no_attribution", notFound},
				{"400 unknown customer_key", edit("", map[string]any{"customer_key": "nobody"}), nil, 400, "no_attribution", notFound},
				{"400 customer of another program", edit(other, nil), nil, 400, "no_attribution", "No affiliate attribution found for this customer in this program"},
				{"400 no partner-program record", edit(unlinked, nil), nil, 400, "no_attribution", "No partner-program relationship found for this customer"},
				{"400 malformed JSON", func(string) any { return "{" }, nil, 400, "invalid_request", "Request body is not valid JSON"},
			}
			for _, row := range rows {
				t.Run(row.name, func(t *testing.T) {
					txn := s.txn()
					var body any = saleOf(txn, cid, 4900, "USD", nil)
					if row.body != nil {
						body = row.body(txn)
					}
					headers := row.headers
					if headers == nil {
						headers = bearer(p.key)
					}
					r := s.sale(t, "", body, headers...)
					wantError(t, r, row.status, row.code, row.message)
					wantTrackHeaders(t, r)
					s.wantNoSale(t, txn)
				})
			}
			if got := s.balances(t, p.partner); got != "" {
				t.Fatalf("refused sales changed the balance: %q", got)
			}
			if got := s.balances(t, loner.ID); got != "" {
				t.Fatalf("refused sale paid the unlinked partner: %q", got)
			}
		})

		t.Run("200 provisional lead: the sale leaves the customer at click", func(t *testing.T) {
			t.Parallel()
			p := s.program(t, nil) // server_required: a lead without key is provisional
			cid := s.click(t, p.code)
			r := s.do(t, "POST", "/api/v1/track/lead", map[string]any{"click_id": cid})
			if r.status != 200 || r.body["provisional"] != true {
				t.Fatalf("browser lead: %d %s, want provisional", r.status, r.raw)
			}
			txn := s.txn()
			wantSaleAs(t, s.sale(t, p.key, saleOf(txn, cid, 1000, "USD", nil)), txn, cid, "click")
			// A Bearer lead now answers 400 (the Customer status table).
			if r := s.do(t, "POST", "/api/v1/track/lead", map[string]any{"click_id": cid}, bearer(p.key)...); r.status != 400 {
				t.Fatalf("Bearer lead after the sale: %d %s, want 400", r.status, r.raw)
			}
		})

		t.Run("401 retired key: typed envelope api_key_rotation_required, nothing written", func(t *testing.T) {
			t.Parallel()
			txn := s.txn()
			r := s.sale(t, retired, saleOf(txn, s.click(t, keyed.code), 4900, "USD", nil))
			e, _ := r.body["error"].(map[string]any)
			if r.status != 401 || e == nil || e["code"] != "api_key_rotation_required" || e["hint"] == nil || e["docs_url"] == nil || e["message"] == nil {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			if _, ok := r.body["data"]; ok {
				t.Fatalf("the typed envelope has no data key: %s", r.raw)
			}
			s.wantNoSale(t, txn)
		})

		t.Run("200 rotating key: recorded, with Deprecation, Sunset, Link and warnings", func(t *testing.T) {
			t.Parallel()
			txn := s.txn()
			cid := s.click(t, keyed.code)
			r := s.sale(t, rotating, saleOf(txn, cid, 1000, "USD", nil))
			if out := wantSale(t, r, txn, cid); out.Commission == nil {
				t.Fatalf("no commission: %s", r.raw)
			}
			wantRotationSignals(t, r, clock.Now().Add(72*time.Hour))
		})

		t.Run("409 duplicate transaction_id names the first sale, across programs; nothing more written", func(t *testing.T) {
			t.Parallel()
			pa := s.programNoSync(t, nil)
			pb := s.programNoSync(t, nil)
			s.sync(t)
			txn := s.txn()
			cid := s.click(t, pa.code)
			first := wantSale(t, s.sale(t, pa.key, saleOf(txn, cid, 3000, "USD", nil)), txn, cid)
			for _, c := range []struct {
				name string
				key  string
				body map[string]any
			}{
				{"same call again", pa.key, saleOf(txn, cid, 3000, "USD", nil)},
				{"other amount", pa.key, saleOf(txn, s.click(t, pa.code), 1, "EUR", nil)},
				{"other program", pb.key, saleOf(txn, s.click(t, pb.code), 7000, "USD", nil)},
			} {
				r := s.sale(t, c.key, c.body)
				e := wantError(t, r, 409, "duplicate_transaction", "Duplicate transaction_id. This sale has already been recorded.")
				if d, _ := e["details"].(map[string]any); d == nil || d["sale_id"] != float64(first.SaleID) || len(d) != 1 {
					t.Fatalf("%s: details %v, want {sale_id: %d}", c.name, e["details"], first.SaleID)
				}
				wantTrackHeaders(t, r)
			}
			v, ok := s.saleRecord(t, txn, false)
			if !ok || v.ID != first.SaleID || v.ProgramID != pa.id || v.AmountCents != 3000 || len(v.CommissionIDs) != 1 {
				t.Fatalf("sale record %+v (found %v)", v, ok)
			}
			if a, b := s.balances(t, pa.partner), s.balances(t, pb.partner); a != "USD 300/0/300" || b != "" {
				t.Fatalf("balances %q and %q, want USD 300/0/300 and none", a, b)
			}
		})

		t.Run("100 concurrent identical sales: one 200, 99 × 409 naming it, one commission", func(t *testing.T) {
			t.Parallel()
			p := s.program(t, nil)
			cid := s.click(t, p.code)
			txn := s.txn()
			const n = 100
			replies := make([]reply, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					replies[i] = s.sale(t, p.key, saleOf(txn, cid, 10000, "USD", nil))
				})
			}
			close(start)
			wg.Wait()
			var saleID float64
			var ok int
			var dupIDs []float64
			for _, r := range replies {
				switch r.status {
				case 200:
					ok++
					saleID, _ = r.body["sale_id"].(float64)
				case 409:
					e, _ := r.body["error"].(map[string]any)
					d, _ := e["details"].(map[string]any)
					if e["code"] != "duplicate_transaction" || d == nil {
						t.Fatalf("409 %s", r.raw)
					}
					id, _ := d["sale_id"].(float64)
					dupIDs = append(dupIDs, id)
				default:
					t.Fatalf("%d %s", r.status, r.raw)
				}
			}
			if ok != 1 || len(dupIDs) != n-1 {
				t.Fatalf("%d recorded, %d duplicates, want 1 and %d", ok, len(dupIDs), n-1)
			}
			for _, id := range dupIDs {
				if id != saleID {
					t.Fatalf("a 409 names sale %v, the recorded one is %v", id, saleID)
				}
			}
			if v, found := s.saleRecord(t, txn, false); !found || v.ID != int64(saleID) || len(v.CommissionIDs) != 1 {
				t.Fatalf("sale record %+v (found %v), want one commission", v, found)
			}
			if got := s.balances(t, p.partner); got != "USD 1000/0/1000" {
				t.Fatalf("balances %q, want one commission: USD 1000/0/1000", got)
			}
		})
	})

	// These move the stack's clock: after every other row.
	t.Run("hold_days 30: pending, approved by approve-due only once the clock passes the hold", func(t *testing.T) {
		p := s.program(t, map[string]any{"hold_days": 30})
		txn := s.txn()
		cid := s.click(t, p.code)
		out := wantSale(t, s.sale(t, p.key, saleOf(txn, cid, 10000, "USD", nil)), txn, cid)
		if out.Commission == nil || out.Commission.Status != "pending" || out.Commission.Amount != 10 {
			t.Fatalf("commission %+v, want pending 10 USD", out.Commission)
		}
		id := out.Commission.ID
		wantPending := func(when string) {
			t.Helper()
			s.approveDue(t)
			if c := s.commission(t, id); c.Status != "pending" || c.ApprovedAt != nil {
				t.Fatalf("%s: commission %+v, want pending", when, c)
			}
			if got := s.balances(t, p.partner); got != "" {
				t.Fatalf("%s: a pending commission is not credited: balances %q", when, got)
			}
		}
		wantPending("at once")
		clock.Advance(30*day - time.Minute)
		wantPending("a minute before the hold ends")
		at := clock.Advance(2 * time.Minute)
		s.approveDue(t)
		c := s.commission(t, id)
		if c.Status != "approved" || c.ApprovedAt == nil || c.ApprovedAt.Before(at.Add(-2*time.Minute)) {
			t.Fatalf("after the hold: %+v, want approved", c)
		}
		if got := s.balances(t, p.partner); got != "USD 1000/0/1000" {
			t.Fatalf("balances %q, want USD 1000/0/1000", got)
		}
		s.approveDue(t)
		if got := s.balances(t, p.partner); got != "USD 1000/0/1000" {
			t.Fatalf("approved twice: balances %q", got)
		}
	})

	t.Run("400 attribution window: refused and nothing written; the next payment is checked again", func(t *testing.T) {
		const window = "No affiliate attribution: the customer's click is more than 30 days (the program's attribution window) older than its signup or this payment"
		p := s.program(t, map[string]any{"attribution_window_days": 30})
		noSignup := s.click(t, p.code)
		early := s.click(t, p.code) // signed up at once: inside the window
		s.lead(t, p.key, early, "")
		clock.Advance(31 * day)
		late := s.click(t, p.code) // signs up 31 days after its click: outside
		clock.Advance(31 * day)
		s.lead(t, p.key, late, "")

		// Without a signup the payment (62 days after the click) is the
		// reference; with one, the signup.
		for _, cid := range []string{noSignup, late} {
			txn := s.txn()
			wantError(t, s.sale(t, p.key, saleOf(txn, cid, 5000, "USD", nil)), 400, "no_attribution", window)
			s.wantNoSale(t, txn)
		}
		if got := s.balances(t, p.partner); got != "" {
			t.Fatalf("refused sales changed the balance: %q", got)
		}
		txn := s.txn()
		if out := wantSale(t, s.sale(t, p.key, saleOf(txn, early, 5000, "USD", nil)), txn, early); out.Commission == nil {
			t.Fatal("no commission for a customer who signed up inside the window")
		}

		// Refused now (31 days after the click), then a payment stamped 2
		// days ago (29 days after the click) is checked again and recorded.
		fresh := s.click(t, p.code)
		clock.Advance(31 * day)
		txn = s.txn()
		wantError(t, s.sale(t, p.key, saleOf(txn, fresh, 5000, "USD", nil)), 400, "no_attribution", window)
		s.wantNoSale(t, txn)
		txn = s.txn()
		paid := clock.Now().Add(-2 * day).Format(time.RFC3339)
		if out := wantSale(t, s.sale(t, p.key, saleOf(txn, fresh, 5000, "USD", map[string]any{"occurred_at": paid})), txn, fresh); out.Commission == nil {
			t.Fatal("no commission for the payment inside the window")
		}
		// Converted: later payments are not checked again.
		txn = s.txn()
		wantSale(t, s.sale(t, p.key, saleOf(txn, fresh, 5000, "USD", nil)), txn, fresh)
	})
}

// edit is a sale body for clickID with extra on top (a nil value deletes
// the field), under the row's transaction id.
func edit(clickID string, extra map[string]any) func(txn string) any {
	return func(txn string) any { return saleOf(txn, clickID, 4900, "USD", extra) }
}

// wantRotationSignals checks Versioning item 3 on an answer for a key
// marked for rotation with deadline.
func wantRotationSignals(t *testing.T, r reply, deadline time.Time) {
	t.Helper()
	if d := r.header.Get("Deprecation"); !regexp.MustCompile(`^@[0-9]+$`).MatchString(d) {
		t.Fatalf("Deprecation %q, want @<unix-seconds>", d)
	}
	sunset, err := http.ParseTime(r.header.Get("Sunset"))
	if err != nil || !sunset.Equal(deadline.Truncate(time.Second)) {
		t.Fatalf("Sunset %q, want the HTTP-date of %s", r.header.Get("Sunset"), deadline)
	}
	if l := r.header.Get("Link"); !strings.Contains(l, "rel='deprecation'") && !strings.Contains(l, `rel="deprecation"`) {
		t.Fatalf("Link %q, want <docs_url>; rel='deprecation'", l)
	}
	w, _ := r.body["warnings"].([]any)
	if len(w) != 1 {
		t.Fatalf("warnings: %s", r.raw)
	}
	item, _ := w[0].(map[string]any)
	rotateBy, _ := item["rotate_by"].(string)
	if item["code"] != "api_key_rotation_required" || item["message"] == nil || item["hint"] == nil || item["docs_url"] == nil || rotateBy == "" {
		t.Fatalf("warning %v", item)
	}
	if at, err := time.Parse(time.RFC3339, rotateBy); err != nil || !at.Equal(deadline.Truncate(time.Second)) {
		t.Fatalf("rotate_by %q, want %s", rotateBy, deadline)
	}
}

// sameSet compares two comma-separated lists regardless of order.
func sameSet(got, want string) bool {
	g, w := strings.Split(got, ", "), strings.Split(want, ", ")
	if len(g) != len(w) {
		return false
	}
	seen := map[string]int{}
	for _, x := range g {
		seen[x]++
	}
	for _, x := range w {
		if seen[x] == 0 {
			return false
		}
		seen[x]--
	}
	return true
}
