package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/platform/platformtest"
	"github.com/svc-dev/svc/services/commissions/internal/processor/httpapi"
)

const (
	hookSecret         = "whsec_commissions_test"
	hookSecretPrevious = "whsec_commissions_previous"
)

// hookFixture loads a payload of internal/processor/testdata (the
// processor's documented shapes) as a map to edit.
func hookFixture(t *testing.T, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "internal", "processor", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ev
}

// hookObject is an event's data.object.
func hookObject(ev map[string]any) map[string]any {
	return ev["data"].(map[string]any)["object"].(map[string]any)
}

// hookEvent is a fixture with a fresh event id, account, the clock's time,
// the metadata md (nil: none) and the object's fields set (a nil value
// deletes the field).
func (s *trackStack) hookEvent(t *testing.T, fixture, account string, md map[string]any, fields map[string]any) map[string]any {
	t.Helper()
	ev := hookFixture(t, fixture)
	u := s.uniq()
	ev["id"], ev["account"], ev["created"] = "evt_"+u, account, s.clock.Now().Unix()
	obj := hookObject(ev)
	switch {
	case obj["object"] == "invoice":
		obj["id"] = "in_" + u
		if p, ok := obj["parent"].(map[string]any); ok {
			p["subscription_details"].(map[string]any)["metadata"] = md
			for _, d := range obj["payments"].(map[string]any)["data"].([]any) {
				d.(map[string]any)["payment"].(map[string]any)["payment_intent"] = "pi_" + u
			}
		} else {
			obj["subscription_details"] = map[string]any{"metadata": md}
			obj["charge"], obj["payment_intent"] = "ch_"+u, "pi_"+u
		}
	default:
		obj["id"], obj["metadata"] = "cs_"+u, md
		if obj["mode"] == "payment" {
			obj["payment_intent"] = "pi_" + u
		}
		obj["customer"] = "cus_" + u
	}
	for k, v := range fields {
		if v == nil {
			delete(obj, k)
			continue
		}
		obj[k] = v
	}
	return ev
}

// deliver posts ev signed with secret (hookSecret when "") at the clock's
// time through the gateway.
func (s *trackStack) deliver(t *testing.T, ev map[string]any) reply {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return s.deliverRaw(t, b, httpapi.Sign(hookSecret, s.clock.Now(), b))
}

func (s *trackStack) deliverRaw(t *testing.T, body []byte, signature string) reply {
	t.Helper()
	var h []string
	if signature != "" {
		h = []string{httpapi.SignatureHeader, signature}
	}
	return s.do(t, "POST", httpapi.WebhookPath, string(body), h...)
}

func wantHook(t *testing.T, r reply, outcome string) reply {
	t.Helper()
	if r.status != 200 || r.body["received"] != true || r.body["outcome"] != outcome {
		t.Fatalf("%d %s, want outcome %s", r.status, r.raw, outcome)
	}
	return r
}

// wantHookError checks the platform envelope of a refused or failed
// delivery.
func wantHookError(t *testing.T, r reply, status int, message string) {
	t.Helper()
	e, _ := r.body["error"].(map[string]any)
	if r.status != status || e == nil || e["status"] != float64(status) || e["message"] != message {
		t.Fatalf("%d %s, want %d %q", r.status, r.raw, status, message)
	}
}

func hookSaleID(t *testing.T, r reply) int64 {
	t.Helper()
	id, _ := r.body["sale_id"].(float64)
	if id <= 0 {
		t.Fatalf("no sale_id: %s", r.raw)
	}
	return int64(id)
}

// hookDB reads the services' schemas (commissions' and tracking's) for
// what the gateway does not show.
type hookDB struct {
	commissions, tracking *pgxpool.Pool
}

func (s *trackStack) hookDB() hookDB {
	return hookDB{commissions: s.st.Instance("commissions").Platform().Pool, tracking: s.st.Instance("tracking").Platform().Pool}
}

// customer is tracking's customer row of a click id.
type hookCustomer struct {
	status      string
	processorID *string
	first       *time.Time
}

func (d hookDB) customer(t *testing.T, clickID string) hookCustomer {
	t.Helper()
	var c hookCustomer
	if err := d.tracking.QueryRow(context.Background(), `SELECT status, processor_customer_id, first_purchase_date FROM customers WHERE click_id = $1`,
		clickID).Scan(&c.status, &c.processorID, &c.first); err != nil {
		t.Fatal(err)
	}
	return c
}

// connect connects a program to a processor account (and its payment
// tracking mode) and waits for the replicas.
func (s *trackStack) connect(t *testing.T, p prog, account string) {
	t.Helper()
	s.adminData(t, "PATCH", fmt.Sprintf("/admin/v1/programs/%d", p.id), map[string]any{
		"processor_connection": map[string]any{"status": "connected", "account_id": account}}, nil)
	s.sync(t)
}

// connectedProgram is a program of its own (program's fields) connected
// to an account of its own, and that account.
func (s *trackStack) connectedProgram(t *testing.T, fields map[string]any) (prog, string) {
	t.Helper()
	p := s.program(t, fields)
	account := "acct_" + s.uniq()
	s.connect(t, p, account)
	return p, account
}

// provisional records a provisional lead (no key, server_required).
func (s *trackStack) provisional(t *testing.T, clickID, customerKey string) {
	t.Helper()
	body := map[string]any{"click_id": clickID}
	if customerKey != "" {
		body["customer_key"] = customerKey
	}
	r := s.do(t, "POST", "/api/v1/track/lead", body)
	if r.status != 200 || r.body["provisional"] != true {
		t.Fatalf("provisional lead: %d %s", r.status, r.raw)
	}
}

// The Events section, the customer status rows driven by the processor and
// Versioning item 4, through the gateway against the real stack.
func TestProcessorWebhook(t *testing.T) {
	// Not parallel: its subtests are, on its stack (see startTrack).
	clock := platformtest.NewClock(t0)
	s := startTrack(t, clock, map[string]string{
		"PROCESSOR_WEBHOOK_SECRET": hookSecret, "PROCESSOR_WEBHOOK_SECRET_PREVIOUS": hookSecretPrevious,
	})
	db := s.hookDB()
	eventsOf := func(t *testing.T, id any) int {
		return count(t, db.commissions, `SELECT count(*) FROM processor_events WHERE event_id = $1`, id)
	}

	t.Run("sales", func(t *testing.T) {
		t.Run("paid checkout: the sale, its commission, the customer converted, the payment refs kept", func(t *testing.T) {
			t.Parallel()
			p, account := s.connectedProgram(t, nil)
			cid := s.click(t, p.code)
			ev := s.hookEvent(t, "checkout_session_completed_payment.json", account, map[string]any{"svc_click_id": cid, "program_id": fmt.Sprint(p.id)}, nil)
			obj := hookObject(ev)
			r := wantHook(t, s.deliver(t, ev), "sale_recorded")
			if r.body["customer_status"] != "conversion" {
				t.Fatalf("answer %s", r.raw)
			}
			v, ok := s.saleRecord(t, obj["payment_intent"].(string), false)
			if !ok || v.ID != hookSaleID(t, r) || v.AmountCents != 2500 || v.Currency != "USD" || v.ProgramID != p.id || len(v.CommissionIDs) != 1 {
				t.Fatalf("sale %+v", v)
			}
			if c := s.commission(t, v.CommissionIDs[0]); c.PartnerID != p.partner || c.Amount != 250 {
				t.Fatalf("commission %+v", c)
			}
			if n := count(t, db.commissions, `SELECT count(*) FROM sales WHERE id = $1 AND source = 'processor'`, v.ID); n != 1 {
				t.Fatal("sale not recorded as the processor's")
			}
			c := db.customer(t, cid)
			if c.status != "conversion" || c.first == nil || c.processorID == nil || *c.processorID != obj["customer"] {
				t.Fatalf("customer %+v", c)
			}
			if n := count(t, db.commissions, `SELECT count(*) FROM payment_refs WHERE sale_id = $1 AND ((ref = $2 AND kind = 'payment_intent') OR (ref = $3 AND kind = 'checkout_session'))`,
				v.ID, obj["payment_intent"], obj["id"]); n != 2 {
				t.Fatalf("%d payment refs, want the payment intent and the session", n)
			}

			t.Run("duplicate delivery: a 2xx no-op", func(t *testing.T) {
				// This payment's rows only: the other subtests write beside it.
				rows := func() [4]int {
					return [4]int{
						count(t, db.commissions, `SELECT count(*) FROM sales WHERE transaction_id = $1`, obj["payment_intent"]),
						count(t, db.commissions, `SELECT count(*) FROM commissions WHERE sale_id = $1`, v.ID),
						count(t, db.commissions, `SELECT count(*) FROM processor_events WHERE event_id = $1 OR sale_id = $2`, ev["id"], v.ID),
						count(t, db.commissions, `SELECT count(*) FROM payment_refs WHERE sale_id = $1`, v.ID),
					}
				}
				before := rows()
				r := s.deliver(t, ev)
				if r.status != 200 || r.body["duplicate"] != true || r.body["outcome"] != "duplicate_event" {
					t.Fatalf("%d %s", r.status, r.raw)
				}
				if after := rows(); after != before {
					t.Fatalf("a redelivery wrote rows: %v -> %v", before, after)
				}
			})
			t.Run("the same payment under another event id: kept once", func(t *testing.T) {
				again := s.hookEvent(t, "checkout_session_completed_payment.json", account, nil, map[string]any{
					"payment_intent": obj["payment_intent"], "metadata": obj["metadata"]})
				r := wantHook(t, s.deliver(t, again), "duplicate_transaction")
				if hookSaleID(t, r) != v.ID {
					t.Fatalf("answer %s names another sale than %d", r.raw, v.ID)
				}
				if v2, _ := s.saleRecord(t, obj["payment_intent"].(string), false); len(v2.CommissionIDs) != 1 {
					t.Fatalf("sale %+v", v2)
				}
			})
			t.Run("the brand's sale call for the same payment: 409", func(t *testing.T) {
				wantError(t, s.sale(t, p.key, saleOf(obj["payment_intent"].(string), cid, 2500, "USD", nil)), 409, "duplicate_transaction",
					"Duplicate transaction_id. This sale has already been recorded.")
			})
		})

		t.Run("the brand reports the invoice first: the processor's invoice is a duplicate, one sale, one commission", func(t *testing.T) {
			t.Parallel()
			p, account := s.connectedProgram(t, nil)
			cid := s.click(t, p.code)
			s.lead(t, p.key, cid, "brand-"+s.uniq())
			ev := s.hookEvent(t, "invoice_payment_succeeded_basil.json", account, map[string]any{"svc_click_id": cid}, nil)
			inv := hookObject(ev)["id"].(string)
			wantSale(t, s.sale(t, p.key, saleOf(inv, cid, 1900, "EUR", nil)), inv, cid)
			wantHook(t, s.deliver(t, ev), "duplicate_transaction")
			if v, _ := s.saleRecord(t, inv, false); len(v.CommissionIDs) != 1 || v.AmountCents != 1900 {
				t.Fatalf("sale %+v", v)
			}
			if n := count(t, db.commissions, `SELECT count(*) FROM commissions WHERE program_id = $1 AND kind = 'sale'`, p.id); n != 1 {
				t.Fatalf("%d commissions", n)
			}
		})

		t.Run("resolution: the lead's email, then client_reference_id, then svc_customer_key", func(t *testing.T) {
			t.Parallel()
			p, account := s.connectedProgram(t, nil)
			cid := s.click(t, p.code)
			r := s.do(t, "POST", "/api/v1/track/lead", map[string]any{"click_id": cid, "email": "Buyer@Example.com"}, bearer(p.key)...)
			if r.status != 200 {
				t.Fatalf("lead: %d %s", r.status, r.raw)
			}
			wantHook(t, s.deliver(t, s.hookEvent(t, "checkout_session_completed_payment.json", account, map[string]any{},
				map[string]any{"customer_details": map[string]any{"email": "buyer@example.com"}})), "sale_recorded")
			if c := db.customer(t, cid); c.status != "conversion" {
				t.Fatalf("by email: %+v", c)
			}
			cid2 := s.click(t, p.code)
			wantHook(t, s.deliver(t, s.hookEvent(t, "checkout_session_completed_payment.json", account, nil,
				map[string]any{"client_reference_id": cid2, "customer_details": nil})), "sale_recorded")
			if c := db.customer(t, cid2); c.status != "conversion" {
				t.Fatalf("by client_reference_id: %+v", c)
			}
			cid3 := s.click(t, p.code)
			key := "key-" + s.uniq()
			s.lead(t, p.key, cid3, key)
			wantHook(t, s.deliver(t, s.hookEvent(t, "checkout_session_completed_payment.json", account, map[string]any{"svc_customer_key": key},
				map[string]any{"customer_details": nil})), "sale_recorded")
			if c := db.customer(t, cid3); c.status != "conversion" {
				t.Fatalf("by customer key: %+v", c)
			}
			t.Run("svc_click_id wins over the email", func(t *testing.T) {
				cid4 := s.click(t, p.code)
				r := wantHook(t, s.deliver(t, s.hookEvent(t, "checkout_session_completed_payment.json", account, map[string]any{"svc_click_id": cid4},
					map[string]any{"customer_details": map[string]any{"email": "buyer@example.com"}})), "sale_recorded")
				if c := db.customer(t, cid4); c.status != "conversion" || r.body["customer_status"] != "conversion" {
					t.Fatalf("click: %+v", c)
				}
			})
		})

		t.Run("subscription: the checkout records nothing, the first invoice settles and records, renewals match the processor customer", func(t *testing.T) {
			t.Parallel()
			// Recurring: each renewal earns its commission.
			p, account := s.connectedProgram(t, map[string]any{"commission_type": "recurring_percent"})
			cid := s.click(t, p.code)
			s.provisional(t, cid, "")
			md := map[string]any{"svc_click_id": cid, "program_id": fmt.Sprint(p.id)}
			before := count(t, db.commissions, `SELECT count(*) FROM sales WHERE program_id = $1`, p.id)
			wantHook(t, s.deliver(t, s.hookEvent(t, "checkout_session_completed_subscription.json", account, md, nil)), "subscription_checkout")
			if c := db.customer(t, cid); c.status != "click" || count(t, db.commissions, `SELECT count(*) FROM sales WHERE program_id = $1`, p.id) != before {
				t.Fatalf("a subscription checkout changed something: %+v", c)
			}
			customer := "cus_sub_" + s.uniq()
			// API versions from 2025-03-31: metadata under parent.
			first := s.hookEvent(t, "invoice_payment_succeeded_basil.json", account, md, map[string]any{"customer": customer})
			r := wantHook(t, s.deliver(t, first), "sale_recorded")
			c := db.customer(t, cid)
			if c.status != "conversion" || c.processorID == nil || *c.processorID != customer {
				t.Fatalf("customer %+v", c)
			}
			firstSale := hookSaleID(t, r)
			pi := hookObject(first)["payments"].(map[string]any)["data"].([]any)[0].(map[string]any)["payment"].(map[string]any)["payment_intent"]
			if n := count(t, db.commissions, `SELECT count(*) FROM payment_refs WHERE sale_id = $1 AND ref IN ($2, $3)`, firstSale, hookObject(first)["id"], pi); n != 2 {
				t.Fatalf("%d refs of the basil invoice, want the invoice and its payment intent", n)
			}
			// A renewal without metadata, older API shape: matched by the
			// processor customer id, and the window is not checked again.
			if _, err := db.tracking.Exec(context.Background(), `UPDATE customers SET created_at = created_at - interval '400 days' WHERE click_id = $1`, cid); err != nil {
				t.Fatal(err)
			}
			renewal := s.hookEvent(t, "invoice_payment_succeeded_legacy.json", account, map[string]any{}, map[string]any{"customer": customer})
			r = wantHook(t, s.deliver(t, renewal), "sale_recorded")
			v, _ := s.saleRecord(t, hookObject(renewal)["id"].(string), false)
			if v.ID != hookSaleID(t, r) || len(v.CommissionIDs) != 1 || v.Currency != "EUR" {
				t.Fatalf("renewal %+v", v)
			}
			ro := hookObject(renewal)
			if n := count(t, db.commissions, `SELECT count(*) FROM payment_refs WHERE sale_id = $1 AND ref IN ($2, $3, $4)`, v.ID, ro["id"], ro["charge"], ro["payment_intent"]); n != 3 {
				t.Fatalf("%d refs of the legacy invoice, want invoice, charge and payment intent", n)
			}
			// Old API shape with metadata at the top level resolves too.
			cid2 := s.click(t, p.code)
			wantHook(t, s.deliver(t, s.hookEvent(t, "invoice_payment_succeeded_legacy.json", account, map[string]any{"svc_click_id": cid2},
				map[string]any{"billing_reason": "subscription_create", "amount_paid": 500, "currency": "usd"})), "sale_recorded")
			if c := db.customer(t, cid2); c.status != "conversion" {
				t.Fatalf("status %s", c.status)
			}
			// A renewal matched by the buyer's email (no metadata, a new
			// processor customer).
			cid3 := s.click(t, p.code)
			if r := s.do(t, "POST", "/api/v1/track/lead", map[string]any{"click_id": cid3, "email": "renewer@example.com"}, bearer(p.key)...); r.status != 200 {
				t.Fatalf("lead: %d %s", r.status, r.raw)
			}
			wantHook(t, s.deliver(t, s.hookEvent(t, "invoice_payment_succeeded_basil.json", account, map[string]any{},
				map[string]any{"customer_email": "renewer@example.com", "billing_reason": "subscription_cycle"})), "sale_recorded")
			if c := db.customer(t, cid3); c.status != "conversion" {
				t.Fatalf("by email: %+v", c)
			}
		})
	})

	t.Run("customer status rows driven by the processor", func(t *testing.T) {
		t.Run("provisional lead settled by a free checkout: lead, no sale", func(t *testing.T) {
			t.Parallel()
			p, account := s.connectedProgram(t, nil)
			cid := s.click(t, p.code)
			s.provisional(t, cid, "free-"+s.uniq())
			ev := s.hookEvent(t, "checkout_session_completed_payment.json", account, map[string]any{"svc_click_id": cid, "program_id": fmt.Sprint(p.id)},
				map[string]any{"payment_status": "no_payment_required", "amount_total": 0})
			r := wantHook(t, s.deliver(t, ev), "lead_settled")
			if r.body["customer_status"] != "lead" || r.body["sale_id"] != nil {
				t.Fatalf("answer %s", r.raw)
			}
			if c := db.customer(t, cid); c.status != "lead" {
				t.Fatalf("customer %+v", c)
			}
			if n := count(t, db.tracking, `SELECT count(*) FROM lead_events WHERE click_id = $1 AND status = 'settled' AND settled_at IS NOT NULL`, cid); n != 1 {
				t.Fatal("lead not settled")
			}
			s.wantNoSale(t, hookObject(ev)["payment_intent"].(string))
			// The Customer status table: a Bearer lead now finds a lead.
			r = s.do(t, "POST", "/api/v1/track/lead", map[string]any{"click_id": cid}, bearer(p.key)...)
			if r.status != 400 || !strings.Contains(r.raw, "Current status: lead") {
				t.Fatalf("Bearer lead after the settlement: %d %s", r.status, r.raw)
			}
		})

		t.Run("provisional lead and a paid checkout: settles, records the sale, converts (lead → conversion)", func(t *testing.T) {
			t.Parallel()
			p, account := s.connectedProgram(t, nil)
			cid := s.click(t, p.code)
			s.provisional(t, cid, "")
			ev := s.hookEvent(t, "checkout_session_completed_payment.json", account, map[string]any{"svc_click_id": cid, "svc_customer_key": "paid-" + s.uniq()}, nil)
			r := wantHook(t, s.deliver(t, ev), "sale_recorded")
			if r.body["customer_status"] != "conversion" {
				t.Fatalf("answer %s", r.raw)
			}
			c := db.customer(t, cid)
			if c.status != "conversion" || c.first == nil {
				t.Fatalf("customer %+v", c)
			}
			if n := count(t, db.tracking, `SELECT count(*) FROM lead_events WHERE click_id = $1 AND status = 'settled'`, cid); n != 1 {
				t.Fatal("lead not settled")
			}
			if v, _ := s.saleRecord(t, hookObject(ev)["payment_intent"].(string), false); len(v.CommissionIDs) != 1 {
				t.Fatalf("sale %+v", v)
			}
		})

		t.Run("a trial's free first invoice settles the provisional lead", func(t *testing.T) {
			t.Parallel()
			p, account := s.connectedProgram(t, nil)
			cid := s.click(t, p.code)
			s.provisional(t, cid, "")
			ev := s.hookEvent(t, "invoice_payment_succeeded_basil.json", account, map[string]any{"svc_click_id": cid}, map[string]any{"amount_paid": 0})
			wantHook(t, s.deliver(t, ev), "lead_settled")
			if c := db.customer(t, cid); c.status != "lead" {
				t.Fatalf("customer %+v", c)
			}
			s.wantNoSale(t, hookObject(ev)["id"].(string))
		})
	})

	t.Run("events stored without effect", func(t *testing.T) {
		t.Parallel()
		p, account := s.connectedProgram(t, nil)
		other := s.program(t, nil)
		cid := s.click(t, p.code)
		sales := func() int { return count(t, db.commissions, `SELECT count(*) FROM sales WHERE program_id = $1`, p.id) }
		before := sales()
		unknownBefore := s.commissionsMetric(t, "commissions_processor_events_total", "outcome", "unknown_account")
		unknown := s.hookEvent(t, "checkout_session_completed_payment.json", "acct_unknown_"+s.uniq(), map[string]any{"svc_click_id": cid}, nil)
		wantHook(t, s.deliver(t, unknown), "unknown_account")
		if eventsOf(t, unknown["id"]) != 1 {
			t.Fatal("unknown account's event not stored")
		}
		if got := s.commissionsMetric(t, "commissions_processor_events_total", "outcome", "unknown_account"); got != unknownBefore+1 {
			t.Fatalf("unknown accounts counted %v, want %v", got, unknownBefore+1)
		}
		wantHook(t, s.deliver(t, unknown), "duplicate_event") // acknowledged, never retried
		wantHook(t, s.deliver(t, s.hookEvent(t, "checkout_session_completed_payment.json", account,
			map[string]any{"svc_click_id": cid, "program_id": fmt.Sprint(other.id)}, nil)), "program_mismatch")
		wantHook(t, s.deliver(t, s.hookEvent(t, "checkout_session_completed_payment.json", account, map[string]any{"svc_click_id": cid},
			map[string]any{"currency": "gbp"})), "unsupported_currency")
		wantHook(t, s.deliver(t, s.hookEvent(t, "checkout_session_completed_payment.json", account, map[string]any{"svc_click_id": "cust_9_9"},
			map[string]any{"customer_details": nil})), "no_customer")
		refund := hookFixture(t, "charge_refunded.json")
		refund["id"], refund["account"], refund["created"] = "evt_"+s.uniq(), account, s.clock.Now().Unix()
		// Its payment (pi_3Qpayment1) is not recorded: kept until it is.
		wantHook(t, s.deliver(t, refund), "awaiting_payment")
		testMode := s.hookEvent(t, "checkout_session_completed_payment.json", account, map[string]any{"svc_click_id": cid}, nil)
		testMode["livemode"] = false
		wantHook(t, s.deliver(t, testMode), "test_mode_event")
		if c := db.customer(t, cid); c.status != "click" {
			t.Fatalf("a test-mode payment moved the customer: %+v", c)
		}
		if after := sales(); after != before {
			t.Fatalf("sales %d -> %d", before, after)
		}
		if n := count(t, db.commissions, `SELECT count(*) FROM processor_events WHERE type = 'charge.refunded' AND outcome = 'awaiting_payment' AND payload->'data'->'object'->>'id' = 'ch_3Qpayment1' AND event_id = $1`, refund["id"]); n != 1 {
			t.Fatal("refund event not kept")
		}
		t.Run("an s2s program: the brand reports its sales, the event changes nothing", func(t *testing.T) {
			q, qAccount := s.connectedProgram(t, map[string]any{"payment_tracking_mode": "s2s"})
			qc := s.click(t, q.code)
			wantHook(t, s.deliver(t, s.hookEvent(t, "checkout_session_completed_payment.json", qAccount, map[string]any{"svc_click_id": qc}, nil)), "s2s_program")
			if c := db.customer(t, qc); c.status != "click" {
				t.Fatalf("customer %+v", c)
			}
		})
	})

	t.Run("signatures: missing, wrong, stale, garbled refused and stored nothing; the previous secret and several v1 accepted", func(t *testing.T) {
		t.Parallel()
		p, account := s.connectedProgram(t, nil)
		ev := s.hookEvent(t, "checkout_session_completed_payment.json", account, map[string]any{"svc_click_id": s.click(t, p.code)}, nil)
		b, _ := json.Marshal(ev)
		now := s.clock.Now()
		for name, sig := range map[string]string{
			"missing":         "",
			"wrong secret":    httpapi.Sign("whsec_other", now, b),
			"stale":           httpapi.Sign(hookSecret, now.Add(-6*time.Minute), b),
			"from the future": httpapi.Sign(hookSecret, now.Add(6*time.Minute), b),
			"another body":    httpapi.Sign(hookSecret, now, append([]byte(" "), b...)),
			"garbled":         "t=abc,v1=zz",
			"no v1":           fmt.Sprintf("t=%d", now.Unix()),
		} {
			r := s.deliverRaw(t, b, sig)
			if r.status != 400 || !strings.Contains(r.raw, httpapi.SignatureHeader) {
				t.Fatalf("%s: %d %s", name, r.status, r.raw)
			}
		}
		if eventsOf(t, ev["id"]) != 0 {
			t.Fatal("a refused delivery was stored")
		}
		// Rotation: a signature under the previous secret, and a header with
		// a stale entry beside a good one.
		wantHook(t, s.deliverRaw(t, b, httpapi.Sign(hookSecretPrevious, now, b)), "sale_recorded")
		ev2 := s.hookEvent(t, "checkout_session_completed_payment.json", account, map[string]any{"svc_click_id": s.click(t, p.code)}, nil)
		b2, _ := json.Marshal(ev2)
		good := httpapi.Sign(hookSecret, now, b2)
		_, v1, _ := strings.Cut(httpapi.Sign("whsec_other", now, b2), ",")
		wantHook(t, s.deliverRaw(t, b2, good+","+v1), "sale_recorded")
		bad := []byte(`{"id":"evt_x","type":"checkout.session.completed"}`)
		r := s.deliverRaw(t, bad, httpapi.Sign(hookSecret, now, bad))
		wantHookError(t, r, http.StatusBadRequest, "Invalid processor event: expected a JSON object with id, type and data.object")
	})

	t.Run("bodies jsonb cannot hold: 400, nothing stored", func(t *testing.T) {
		t.Parallel()
		p, account := s.connectedProgram(t, nil)
		cid := s.click(t, p.code)
		good := func() []byte {
			b, _ := json.Marshal(s.hookEvent(t, "checkout_session_completed_payment.json", account, map[string]any{"svc_click_id": cid}, nil))
			return b
		}
		withNote := func(note string) []byte {
			b := good()
			return []byte(string(b[:len(b)-1]) + `,"note":` + note + `}`)
		}
		nul := func(path string) []byte {
			ev := s.hookEvent(t, "checkout_session_completed_payment.json", account, map[string]any{"svc_click_id": cid}, nil)
			switch path {
			case "metadata":
				hookObject(ev)["metadata"].(map[string]any)["svc_click_id"] = cid + "\x00"
			case "unused":
				hookObject(ev)["description"] = "\x00"
			case "id":
				ev["id"] = ev["id"].(string) + "\x00"
			}
			b, _ := json.Marshal(ev)
			return b
		}
		for _, tc := range []struct {
			name    string
			body    []byte
			message string
		}{
			{"NUL in metadata", nul("metadata"), "Invalid processor event: data.object.metadata.svc_click_id must not contain the NUL character"},
			{"NUL in a field not read", nul("unused"), "Invalid processor event: data.object.description must not contain the NUL character"},
			{"NUL in the event id", nul("id"), "Invalid processor event: id must not contain the NUL character"},
			{"unpaired surrogate", withNote(`"\ud800"`), "Invalid processor event: a \\u escape names an unpaired UTF-16 surrogate"},
			{"invalid UTF-8", withNote("\"\xff\""), "Invalid processor event: the body is not valid UTF-8"},
			{"number beyond numeric", withNote(`1e999999`), "Invalid processor event: numbers must be at most 400 characters with an exponent of at most 1000"},
		} {
			r := s.deliverRaw(t, tc.body, httpapi.Sign(hookSecret, s.clock.Now(), tc.body))
			wantHookError(t, r, 400, tc.message)
			if n := count(t, db.commissions, `SELECT count(*) FROM processor_events WHERE payload->'data'->'object'->'metadata'->>'svc_click_id' = $1`, cid); n != 0 {
				t.Fatalf("%s: stored", tc.name)
			}
		}
		b := withNote(`"\ud83d\ude00","big":1e300`)
		var id struct{ ID string }
		if err := json.Unmarshal(b, &id); err != nil {
			t.Fatal(err)
		}
		wantHook(t, s.deliverRaw(t, b, httpapi.Sign(hookSecret, s.clock.Now(), b)), "sale_recorded")
		if eventsOf(t, id.ID) != 1 {
			t.Fatal("a storable event was not stored")
		}
	})
}

// A transient failure answers 5xx and writes nothing, so the processor's
// retry does the work: tracking unable to decide, and commissions' own
// database failing. Separate stack: it breaks tables.
func TestProcessorWebhookFailedDeliveryIsRetried(t *testing.T) {
	t.Parallel()
	clock := platformtest.NewClock(t0)
	s := startTrack(t, clock, map[string]string{"PROCESSOR_WEBHOOK_SECRET": hookSecret})
	db := s.hookDB()
	ctx := context.Background()
	p := s.program(t, nil)
	account := "acct_" + s.uniq()
	s.connect(t, p, account)
	for _, tc := range []struct {
		name       string
		pool       *pgxpool.Pool
		table, tmp string
	}{
		{"tracking down (its attributions table gone): 500", db.tracking, "attributions", "attributions_away"},
		{"commissions' database failing (processor_events gone): 500", db.commissions, "processor_events", "processor_events_away"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cid := s.click(t, p.code)
			ev := s.hookEvent(t, "checkout_session_completed_payment.json", account, map[string]any{"svc_click_id": cid}, nil)
			txn := hookObject(ev)["payment_intent"].(string)
			if _, err := tc.pool.Exec(ctx, `ALTER TABLE `+tc.table+` RENAME TO `+tc.tmp); err != nil {
				t.Fatal(err)
			}
			r := s.deliver(t, ev)
			if _, err := tc.pool.Exec(ctx, `ALTER TABLE `+tc.tmp+` RENAME TO `+tc.table); err != nil {
				t.Fatal(err)
			}
			wantHookError(t, r, 500, "Processor event handling failed")
			if n := count(t, db.commissions, `SELECT count(*) FROM processor_events WHERE event_id = $1`, ev["id"]); n != 0 {
				t.Fatal("a failed delivery was stored")
			}
			s.wantNoSale(t, txn)
			if c := db.customer(t, cid); c.status != "click" {
				t.Fatalf("a failed delivery moved the customer: %+v", c)
			}
			r = wantHook(t, s.deliver(t, ev), "sale_recorded")
			if v, ok := s.saleRecord(t, txn, false); !ok || v.ID != hookSaleID(t, r) || len(v.CommissionIDs) != 1 {
				t.Fatalf("redelivery: %+v", v)
			}
		})
	}
	t.Run("a refund while the ledger's refund table is gone: 500, nothing stored or applied; the redelivery applies it", func(t *testing.T) {
		pi, c := s.paidCheckout(t, p, account, 2500, nil)
		ev := s.reversalEvent(t, "refund_created.json", account, map[string]any{"id": "re_" + s.uniq(), "charge": "ch_" + s.uniq(), "payment_intent": pi, "amount": 1000})
		if _, err := db.commissions.Exec(ctx, `ALTER TABLE processor_refunds RENAME TO processor_refunds_away`); err != nil {
			t.Fatal(err)
		}
		r := s.deliver(t, ev)
		if _, err := db.commissions.Exec(ctx, `ALTER TABLE processor_refunds_away RENAME TO processor_refunds`); err != nil {
			t.Fatal(err)
		}
		wantHookError(t, r, 500, "Processor event handling failed")
		if n := count(t, db.commissions, `SELECT count(*) FROM processor_events WHERE event_id = $1`, ev["id"]); n != 0 {
			t.Fatal("a failed delivery was stored")
		}
		if v, _ := s.saleRecord(t, pi, false); v.RefundedCents != 0 || s.commission(t, c.ID).RefundedAmount != 0 {
			t.Fatalf("a failed delivery refunded: %+v", v)
		}
		wantHook(t, s.deliver(t, ev), "refund_applied")
		if v, _ := s.saleRecord(t, pi, false); v.RefundedCents != 1000 || s.commission(t, c.ID).RefundedAmount != 100 {
			t.Fatalf("redelivery: %+v", v)
		}
	})
}

// Without PROCESSOR_WEBHOOK_SECRET the route is not served.
func TestProcessorWebhookNeedsSecret(t *testing.T) {
	t.Parallel()
	s := startTrack(t, platformtest.NewClock(t0), nil)
	if r := s.do(t, "POST", httpapi.WebhookPath, `{}`); r.status != 404 && r.status != 405 {
		t.Fatalf("without a secret the route must not exist: %d %s", r.status, r.raw)
	}
}
