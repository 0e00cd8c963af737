package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/tracking/internal/ingest/httpapi"
)

const processorSecret = "whsec_test_processor"

var eventSeq atomic.Int64

// processorEvent builds a processor event of typ for account with object.
func processorEvent(typ, account string, object map[string]any) map[string]any {
	return map[string]any{
		"id": fmt.Sprintf("evt_%d_%d", time.Now().UnixNano(), eventSeq.Add(1)), "type": typ, "account": account,
		"created": time.Now().Unix(), "livemode": true, "data": map[string]any{"object": object},
	}
}

// deliver posts an event signed as the processor signs it.
func (s *stack) deliver(ev map[string]any) reply {
	s.t.Helper()
	b, _ := json.Marshal(ev)
	return s.call("POST", httpapi.ProcessorWebhookPath, string(b), httpapi.SignatureHeader, httpapi.Sign(processorSecret, time.Now(), b))
}

// saleEvent decodes the outbox's sale event for a sale id.
func (s *stack) saleEvent(saleID int64) *eventsv1.SaleRecorded {
	s.t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT payload FROM outbox WHERE event_type = $1 ORDER BY id`, eventsv1.TypeSaleRecorded)
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			s.t.Fatal(err)
		}
		var env eventsv1.Envelope
		var ev eventsv1.SaleRecorded
		if err := proto.Unmarshal(raw, &env); err != nil {
			s.t.Fatal(err)
		}
		if err := proto.Unmarshal(env.GetPayload(), &ev); err != nil {
			s.t.Fatal(err)
		}
		if ev.GetSaleId() == saleID {
			if env.GetProgramId() != ev.GetProgramId() || env.GetSource() != "tracking" {
				s.t.Fatalf("envelope %v", &env)
			}
			return &ev
		}
	}
	s.t.Fatalf("no sale event for sale %d", saleID)
	return nil
}

func wantOutcome(t *testing.T, r reply, outcome string) {
	t.Helper()
	if r.status != 200 || r.body["received"] != true || r.body["outcome"] != outcome {
		t.Fatalf("%d %s, want outcome %s", r.status, r.raw, outcome)
	}
}

func checkout(metadata map[string]any, extra map[string]any) map[string]any {
	o := map[string]any{
		"id": fmt.Sprintf("cs_%d", time.Now().UnixNano()), "mode": "payment", "payment_status": "paid",
		"amount_total": 2500, "currency": "usd", "payment_intent": fmt.Sprintf("pi_%d", time.Now().UnixNano()),
		"customer": fmt.Sprintf("cus_%d", time.Now().UnixNano()), "metadata": metadata,
	}
	for k, v := range extra {
		o[k] = v
	}
	return o
}

// Customer status table rows driven by the payment processor, and the
// Events section: resolution order, subscriptions, renewals, idempotency.
func TestProcessorEvents(t *testing.T) {
	t.Parallel()
	s := startStack(t, map[string]string{"PROCESSOR_WEBHOOK_SECRET": processorSecret})
	f := s.fixture()
	const account = "acct_server_program"
	s.admin("PATCH", fmt.Sprintf("/admin/v1/programs/%d", f.progServer), map[string]any{
		"processor_connection": map[string]any{"status": "connected", "account_id": account}})
	s.sync()
	prog := fmt.Sprint(f.progServer)

	t.Run("provisional lead settled by a checkout that records no sale: lead", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		wantProvisional(t, s.lead(map[string]any{"click_id": cid, "customer_key": "free-1"}))
		before := s.saleRows()
		wantOutcome(t, s.deliver(processorEvent("checkout.session.completed", account,
			checkout(map[string]any{"svc_click_id": cid, "program_id": prog}, map[string]any{"payment_status": "no_payment_required", "amount_total": 0}))),
			"lead_settled")
		st, key, leads := s.status(cid)
		if st != "lead" || key == nil || *key != "free-1" || leads != 1 {
			t.Fatalf("status %s key %v leads %d", st, key, leads)
		}
		if n := s.count(`SELECT count(*) FROM lead_events WHERE click_id = $1 AND status = 'settled' AND settled_at IS NOT NULL`, cid); n != 1 {
			t.Fatal("lead not settled")
		}
		if after := s.saleRows(); after[0] != before[0] {
			t.Fatal("a free checkout recorded a sale")
		}
	})

	t.Run("provisional lead and a paid checkout: settles, records the sale, converts", func(t *testing.T) {
		cid := s.click(f.codeA2, nil)
		wantProvisional(t, s.lead(map[string]any{"click_id": cid}))
		obj := checkout(map[string]any{"svc_click_id": cid, "svc_customer_key": "paid-1", "program_id": prog}, nil)
		delivery := processorEvent("checkout.session.completed", account, obj)
		r := s.deliver(delivery)
		wantOutcome(t, r, "sale_recorded")
		c := s.customer(cid)
		if c.status != "conversion" || c.signup == nil || c.first == nil || c.processorID == nil || *c.processorID != obj["customer"] {
			t.Fatalf("customer %+v", c)
		}
		ev := s.saleEvent(int64(r.body["sale_id"].(float64)))
		if ev.GetTransactionId() != obj["payment_intent"] || ev.GetAmountCents() != 2500 || ev.GetCurrency() != "USD" ||
			ev.GetSource() != "processor" || ev.GetPaymentKind() != "one_time" || ev.GetPartnerId() != f.partner2 || !ev.GetConverted() {
			t.Fatalf("sale event %v", ev)
		}

		t.Run("redelivery of the same event: acknowledged, nothing new", func(t *testing.T) {
			before, beforeEvents := s.saleRows(), s.count(`SELECT count(*) FROM processor_events`)
			r := s.deliver(delivery)
			if r.status != 200 || r.body["duplicate"] != true {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			if after := s.saleRows(); after != before || s.count(`SELECT count(*) FROM processor_events`) != beforeEvents {
				t.Fatal("redelivery wrote rows")
			}
		})
	})

	t.Run("the same payment delivered again under another event id: kept once", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		obj := checkout(map[string]any{"svc_click_id": cid}, nil)
		wantOutcome(t, s.deliver(processorEvent("checkout.session.completed", account, obj)), "sale_recorded")
		before := s.saleRows()
		wantOutcome(t, s.deliver(processorEvent("checkout.session.completed", account, obj)), "duplicate_transaction")
		if after := s.saleRows(); after != before {
			t.Fatalf("%v -> %v", before, after)
		}
	})

	t.Run("resolution by the lead's email, then by client_reference_id", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		wantSettled(t, s.lead(map[string]any{"click_id": cid, "email": "Buyer@Example.com"}, bearer(f.keyServer)...))
		wantOutcome(t, s.deliver(processorEvent("checkout.session.completed", account,
			checkout(map[string]any{}, map[string]any{"customer_details": map[string]any{"email": "buyer@example.com"}}))), "sale_recorded")
		if c := s.customer(cid); c.status != "conversion" {
			t.Fatalf("status %s", c.status)
		}
		cid2 := s.click(f.codeA, nil)
		wantOutcome(t, s.deliver(processorEvent("checkout.session.completed", account,
			checkout(nil, map[string]any{"client_reference_id": cid2}))), "sale_recorded")
		if c := s.customer(cid2); c.status != "conversion" {
			t.Fatalf("status %s", c.status)
		}
	})

	t.Run("subscription: checkout records nothing, the first invoice settles and records, renewals match the processor customer", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		wantProvisional(t, s.lead(map[string]any{"click_id": cid}))
		md := map[string]any{"svc_click_id": cid, "program_id": prog}
		before := s.saleRows()
		wantOutcome(t, s.deliver(processorEvent("checkout.session.completed", account,
			checkout(md, map[string]any{"mode": "subscription", "payment_intent": nil}))), "subscription_checkout")
		if after := s.saleRows(); after != before {
			t.Fatal("a subscription checkout recorded something")
		}
		if c := s.customer(cid); c.status != "click" {
			t.Fatalf("status %s", c.status)
		}
		customer := fmt.Sprintf("cus_sub_%d", time.Now().UnixNano())
		// API versions from 2025-03-31: metadata under parent.
		first := map[string]any{"id": fmt.Sprintf("in_%d", time.Now().UnixNano()), "customer": customer, "amount_paid": 1900,
			"currency": "eur", "billing_reason": "subscription_create",
			"parent": map[string]any{"subscription_details": map[string]any{"metadata": md}}}
		wantOutcome(t, s.deliver(processorEvent("invoice.payment_succeeded", account, first)), "sale_recorded")
		c := s.customer(cid)
		if c.status != "conversion" || c.signup == nil || c.processorID == nil || *c.processorID != customer {
			t.Fatalf("customer %+v", c)
		}
		// A renewal without metadata, older API shape: matched by the
		// processor customer id, and the window is not re-checked.
		s.ageCustomer(cid, 400*24*time.Hour)
		renewal := map[string]any{"id": fmt.Sprintf("in_%d", time.Now().UnixNano()), "customer": customer, "amount_paid": 1900,
			"currency": "eur", "billing_reason": "subscription_cycle", "subscription_details": map[string]any{"metadata": map[string]any{}}}
		r := s.deliver(processorEvent("invoice.payment_succeeded", account, renewal))
		wantOutcome(t, r, "sale_recorded")
		if ev := s.saleEvent(int64(r.body["sale_id"].(float64))); ev.GetPaymentKind() != "subscription_renewal" || ev.GetConverted() {
			t.Fatalf("renewal event %v", ev)
		}
		// Old API shape with metadata at the top level also resolves.
		cid2 := s.click(f.codeA, nil)
		old := map[string]any{"id": fmt.Sprintf("in_%d", time.Now().UnixNano()), "customer": "cus_other", "amount_paid": 500,
			"currency": "usd", "billing_reason": "subscription_create",
			"subscription_details": map[string]any{"metadata": map[string]any{"svc_click_id": cid2}}}
		wantOutcome(t, s.deliver(processorEvent("invoice.payment_succeeded", account, old)), "sale_recorded")
		if c := s.customer(cid2); c.status != "conversion" {
			t.Fatalf("status %s", c.status)
		}
	})

	t.Run("a trial's free first invoice settles the provisional lead", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		wantProvisional(t, s.lead(map[string]any{"click_id": cid}))
		wantOutcome(t, s.deliver(processorEvent("invoice.payment_succeeded", account, map[string]any{
			"id": fmt.Sprintf("in_%d", time.Now().UnixNano()), "customer": "cus_trial", "amount_paid": 0, "currency": "usd",
			"billing_reason": "subscription_create",
			"parent":         map[string]any{"subscription_details": map[string]any{"metadata": map[string]any{"svc_click_id": cid}}}})), "lead_settled")
		if c := s.customer(cid); c.status != "lead" {
			t.Fatalf("status %s", c.status)
		}
	})

	t.Run("events that are stored only", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		before := s.saleRows()
		wantOutcome(t, s.deliver(processorEvent("checkout.session.completed", "acct_unknown", checkout(map[string]any{"svc_click_id": cid}, nil))), "unknown_account")
		wantOutcome(t, s.deliver(processorEvent("checkout.session.completed", account,
			checkout(map[string]any{"svc_click_id": cid, "program_id": fmt.Sprint(f.progBrowser)}, nil))), "program_mismatch")
		wantOutcome(t, s.deliver(processorEvent("checkout.session.completed", account, checkout(map[string]any{"svc_click_id": cid}, map[string]any{"currency": "gbp"}))), "unsupported_currency")
		wantOutcome(t, s.deliver(processorEvent("checkout.session.completed", account, checkout(map[string]any{"svc_click_id": "cust_9_9"}, nil))), "no_customer")
		wantOutcome(t, s.deliver(processorEvent("charge.refunded", account, map[string]any{"id": "ch_1", "amount_refunded": 100})), "stored")
		testMode := processorEvent("checkout.session.completed", account, checkout(map[string]any{"svc_click_id": cid}, nil))
		testMode["livemode"] = false
		wantOutcome(t, s.deliver(testMode), "test_mode_event")
		if c := s.customer(cid); c.status != "click" || c.saleAt != nil {
			t.Fatalf("a test-mode payment moved the customer: %+v", c)
		}
		if after := s.saleRows(); after != before {
			t.Fatalf("%v -> %v", before, after)
		}
		if n := s.count(`SELECT count(*) FROM processor_events WHERE type = 'charge.refunded' AND outcome = 'stored' AND payload->'data'->'object'->>'id' = 'ch_1'`); n != 1 {
			t.Fatal("refund event not kept for replay")
		}
	})

	t.Run("a failure answers 500 and stores nothing, so the processor's retry does the work", func(t *testing.T) {
		ctx := context.Background()
		cid := s.click(f.codeA, nil)
		delivery := processorEvent("checkout.session.completed", account, checkout(map[string]any{"svc_click_id": cid}, nil))
		if _, err := s.pool.Exec(ctx, `ALTER TABLE sales RENAME TO sales_away`); err != nil {
			t.Fatal(err)
		}
		r := s.deliver(delivery)
		if _, err := s.pool.Exec(ctx, `ALTER TABLE sales_away RENAME TO sales`); err != nil {
			t.Fatal(err)
		}
		wantPlatformError(t, r, 500, "InternalServerError", "Processor event handling failed")
		if n := s.count(`SELECT count(*) FROM processor_events WHERE event_id = $1`, delivery["id"]); n != 0 {
			t.Fatal("a failed delivery was stored")
		}
		wantOutcome(t, s.deliver(delivery), "sale_recorded")
	})

	t.Run("signature: missing, wrong, stale and malformed events are refused and write nothing", func(t *testing.T) {
		b, _ := json.Marshal(processorEvent("checkout.session.completed", account, checkout(map[string]any{}, nil)))
		before := s.count(`SELECT count(*) FROM processor_events`)
		for name, sig := range map[string]string{
			"missing": "",
			"wrong":   httpapi.Sign("other-secret", time.Now(), b),
			"stale":   httpapi.Sign(processorSecret, time.Now().Add(-10*time.Minute), b),
			"garbled": "t=abc,v1=zz",
		} {
			hdr := []string{}
			if sig != "" {
				hdr = []string{httpapi.SignatureHeader, sig}
			}
			r := s.call("POST", httpapi.ProcessorWebhookPath, string(b), hdr...)
			if r.status != 400 || !strings.Contains(r.raw, httpapi.SignatureHeader) {
				t.Fatalf("%s: %d %s", name, r.status, r.raw)
			}
		}
		bad := []byte(`{"id":"evt_x","type":"checkout.session.completed"}`)
		r := s.call("POST", httpapi.ProcessorWebhookPath, string(bad), httpapi.SignatureHeader, httpapi.Sign(processorSecret, time.Now(), bad))
		wantPlatformError(t, r, http.StatusBadRequest, "BadRequestError", "Invalid processor event: expected a JSON object with id, type and data.object")
		if after := s.count(`SELECT count(*) FROM processor_events`); after != before {
			t.Fatal("refused delivery stored an event")
		}
	})
}

func TestProcessorWebhookNeedsSecret(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	if r := s.call("POST", httpapi.ProcessorWebhookPath, `{}`); r.status != 404 && r.status != 405 {
		t.Fatalf("without a secret the route must not exist: %d %s", r.status, r.raw)
	}
}
