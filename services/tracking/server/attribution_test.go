package server_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// The commissions service's view of tracking: POST /internal/v1/attributions
// through tracking's own port, rules written from the README's decision
// table.

const internalToken = "tracking-test-internal-token-0123456789abcdef"

var attrSeq atomic.Int64

// attrBody is a valid attribution request for program under a fresh
// transaction id; a nil value in extra removes the field.
func attrBody(program int64, at time.Time, extra map[string]any) map[string]any {
	b := map[string]any{
		"program_id": program, "transaction_id": fmt.Sprintf("attr_%d_%d", time.Now().UnixNano(), attrSeq.Add(1)),
		"amount_cents": 4900, "currency": "USD", "occurred_at": at.UTC().Format(time.RFC3339), "source": "api",
	}
	for k, v := range extra {
		if v == nil {
			delete(b, k)
			continue
		}
		b[k] = v
	}
	return b
}

func (s *stack) attribute(body map[string]any, headers ...string) reply {
	s.t.Helper()
	if headers == nil {
		headers = bearer(internalToken)
	}
	return s.call("POST", "/internal/v1/attributions", jsonBody(body), headers...)
}

// decision is the data of a 200 answer.
func decision(t *testing.T, r reply) map[string]any {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	d, _ := r.body["data"].(map[string]any)
	if d == nil || r.header.Get("X-Request-ID") == "" {
		t.Fatalf("no data: %s", r.raw)
	}
	return d
}

// wantAttributed checks an attributed decision for the customer of cid.
func (s *stack) wantAttributed(t *testing.T, r reply, cid string, partner int64, status string, replayed bool) map[string]any {
	t.Helper()
	d := decision(t, r)
	var customerID, linkID int64
	if err := s.pool.QueryRow(context.Background(), `SELECT id, first_link_id FROM customers WHERE click_id = $1`, cid).Scan(&customerID, &linkID); err != nil {
		t.Fatal(err)
	}
	if d["outcome"] != "attributed" || d["click_id"] != cid || d["partner_id"] != float64(partner) || d["customer_id"] != float64(customerID) ||
		d["link_id"] != float64(linkID) || d["customer_status"] != status || d["replayed"] != replayed {
		t.Fatalf("decision %s, want attributed to partner %d, status %s, replayed %v", r.raw, partner, status, replayed)
	}
	if _, ok := d["refusal"]; ok {
		t.Fatalf("attributed decision with a refusal: %s", r.raw)
	}
	return d
}

func wantRefused(t *testing.T, r reply, cid, message string, replayed bool) map[string]any {
	t.Helper()
	d := decision(t, r)
	ref, _ := d["refusal"].(map[string]any)
	if d["outcome"] != "refused" || d["click_id"] != cid || d["replayed"] != replayed || ref == nil ||
		ref["code"] != "no_attribution" || ref["message"] != message {
		t.Fatalf("decision %s, want refused %q", r.raw, message)
	}
	return d
}

// attrRows counts what an attribution may write: decisions, sale events
// (tracking records no sale: commissions does), converted customers, settled leads, all tracking events.
func (s *stack) attrRows() [5]int {
	return [5]int{
		s.count(`SELECT count(*) FROM attributions`),
		s.count(`SELECT count(*) FROM outbox WHERE event_type = 'tracking.sale.recorded'`),
		s.count(`SELECT count(*) FROM customers WHERE status = 'conversion' OR sale_recorded_at IS NOT NULL`),
		s.count(`SELECT count(*) FROM lead_events WHERE status = 'settled'`),
		s.count(`SELECT count(*) FROM outbox WHERE topic = 'tracking.events.v1'`),
	}
}

// converted is the one CustomerConverted event tracking published for the
// customer of clickID.
func (s *stack) converted(clickID string) *eventsv1.CustomerConverted {
	s.t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT payload FROM outbox WHERE event_type = $1`, eventsv1.TypeCustomerConverted)
	if err != nil {
		s.t.Fatal(err)
	}
	payloads, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		s.t.Fatal(err)
	}
	var found *eventsv1.CustomerConverted
	for _, p := range payloads {
		var env eventsv1.Envelope
		var ev eventsv1.CustomerConverted
		if err := proto.Unmarshal(p, &env); err != nil {
			s.t.Fatal(err)
		}
		if err := proto.Unmarshal(env.GetPayload(), &ev); err != nil {
			s.t.Fatal(err)
		}
		if ev.GetClickId() != clickID {
			continue
		}
		if found != nil {
			s.t.Fatalf("two CustomerConverted events for %s", clickID)
		}
		found = &ev
	}
	if found == nil {
		s.t.Fatalf("no CustomerConverted event for %s", clickID)
	}
	return found
}

func (s *stack) attributionStored(txn any) int {
	s.t.Helper()
	return s.count(`SELECT count(*) FROM attributions WHERE transaction_id = $1`, txn)
}

func withoutReplayed(d map[string]any) map[string]any {
	out := make(map[string]any, len(d))
	for k, v := range d {
		if k != "replayed" {
			out[k] = v
		}
	}
	return out
}

func TestAttributionDecisions(t *testing.T) {
	t.Parallel()
	clock := platformtest.NewClock(time.Now().Truncate(time.Minute).Add(time.Second))
	s := startStackOn(t, clock, map[string]string{"INTERNAL_TOKEN": internalToken})
	f := s.fixture()
	// A partner with a link in the program but no partner-program record.
	p3 := s.id("POST", "/admin/v1/partners", map[string]any{"name": "P3", "email": "p3@partners.example"})
	s.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/links", f.progServer), map[string]any{"partner_id": p3, "code": "NOPP", "active": true})
	s.sync()

	t.Run("attributed by click_id: lead to conversion with first_purchase_date, no sale recorded", func(t *testing.T) {
		cid := s.click(f.codeA2, nil)
		wantSettled(t, s.lead(map[string]any{"click_id": cid, "customer_key": "attr-1"}, bearer(f.keyServer)...))
		before := s.attrRows()
		paid := clock.Now().Add(-time.Hour)
		body := attrBody(f.progServer, paid, map[string]any{"click_id": cid})
		d := s.wantAttributed(t, s.attribute(body), cid, f.partner2, "conversion", false)
		if d["first_purchase_date"] != paid.UTC().Format(time.RFC3339) {
			t.Fatalf("first_purchase_date %v, want %s", d["first_purchase_date"], paid.UTC().Format(time.RFC3339))
		}
		if c := s.customer(cid); c.status != "conversion" || c.first == nil || !c.first.Equal(paid.Truncate(time.Second)) || c.saleAt == nil {
			t.Fatalf("customer %+v", c)
		}
		after := s.attrRows()
		// One decision, one converted customer and its CustomerConverted
		// event; no sale row, no sale event (the sale ledger is the
		// commissions service's).
		if want := [5]int{before[0] + 1, before[1], before[2] + 1, before[3], before[4] + 1}; after != want {
			t.Fatalf("rows %v -> %v, want %v", before, after, want)
		}
		conv := s.converted(cid)
		signup := s.customer(cid).signup
		if conv.GetProgramId() != f.progServer || conv.GetPartnerId() != f.partner2 || conv.GetTransactionId() != body["transaction_id"] ||
			conv.GetCustomerId() == 0 || !conv.GetFirstPurchaseDate().AsTime().Equal(paid.Truncate(time.Second)) ||
			signup == nil || !conv.GetSignupDate().AsTime().Equal(*signup) || !conv.GetConvertedAt().AsTime().Equal(clock.Now()) {
			t.Fatalf("CustomerConverted %v (signup %v)", conv, signup)
		}
		if n := s.count(`SELECT count(*) FROM attributions WHERE transaction_id = $1 AND outcome = 'attributed' AND partner_id = $2
				AND program_id = $3 AND customer_status = 'conversion' AND first_purchase_date IS NOT NULL AND refusal_code = '' AND source = 'api'`,
			body["transaction_id"], f.partner2, f.progServer); n != 1 {
			t.Fatal("decision not stored as answered")
		}
		var code string
		if err := s.pool.QueryRow(context.Background(), `SELECT l.code FROM attributions a JOIN links l ON l.id = a.link_id WHERE a.transaction_id = $1`,
			body["transaction_id"]).Scan(&code); err != nil || code != f.codeA2 {
			t.Fatalf("link of the decision: %q %v", code, err)
		}

		t.Run("replay: the same decision, replayed, nothing transitions again", func(t *testing.T) {
			c, rows := s.customer(cid), s.attrRows()
			again := s.wantAttributed(t, s.attribute(body), cid, f.partner2, "conversion", true)
			if !reflect.DeepEqual(withoutReplayed(again), withoutReplayed(d)) {
				t.Fatalf("replay %v, first %v", again, d)
			}
			// Another body under the same id (a later amount, no click id):
			// still the stored decision.
			other := attrBody(f.progServer, clock.Now(), map[string]any{"transaction_id": body["transaction_id"], "customer_key": "nobody", "amount_cents": 1})
			if again := decision(t, s.attribute(other)); !reflect.DeepEqual(withoutReplayed(again), withoutReplayed(d)) || again["replayed"] != true {
				t.Fatalf("replay with another body %v, first %v", again, d)
			}
			if c2 := s.customer(cid); c2.status != c.status || !c2.first.Equal(*c.first) || !c2.saleAt.Equal(*c.saleAt) {
				t.Fatalf("customer moved: %+v -> %+v", c, c2)
			}
			if after := s.attrRows(); after != rows {
				t.Fatalf("replay wrote rows: %v -> %v", rows, after)
			}
		})

		t.Run("another program's request with the id: decided afresh for that program, never the other's decision", func(t *testing.T) {
			rows, c := s.attrRows(), s.customer(cid)
			r := s.attribute(attrBody(f.progBrowser, clock.Now(), map[string]any{"transaction_id": body["transaction_id"], "click_id": cid}))
			wantRefused(t, r, cid, "No affiliate attribution found for this customer in this program", false)
			if after := s.attrRows(); after != rows {
				t.Fatalf("rows %v -> %v", rows, after)
			}
			if c2 := s.customer(cid); c2.status != c.status {
				t.Fatalf("customer moved: %+v -> %+v", c, c2)
			}
			// The program's own decision is still the one it replays.
			again := s.wantAttributed(t, s.attribute(body), cid, f.partner2, "conversion", true)
			if !reflect.DeepEqual(withoutReplayed(again), withoutReplayed(d)) {
				t.Fatalf("replay %v, first %v", again, d)
			}
		})

		t.Run("a converted customer: attributed, first purchase kept, window not checked again", func(t *testing.T) {
			c := s.customer(cid)
			s.ageCustomer(cid, 400*24*time.Hour)
			d := s.wantAttributed(t, s.attribute(attrBody(f.progServer, clock.Now(), map[string]any{"customer_key": "attr-1"})),
				cid, f.partner2, "conversion", false)
			if d["first_purchase_date"] != c.first.UTC().Format(time.RFC3339) {
				t.Fatalf("first_purchase_date %v, want %v", d["first_purchase_date"], c.first)
			}
			if c2 := s.customer(cid); !c2.first.Equal(*c.first) {
				t.Fatalf("first purchase moved: %v -> %v", c.first, c2.first)
			}
			// A converted customer cannot go back to lead.
			wantPlatformError(t, s.lead(map[string]any{"click_id": cid}, bearer(f.keyServer)...), 400, "BadRequestError",
				"Customer status cannot be updated to lead. Current status: conversion")
		})
	})

	t.Run("attributed by customer_key alone", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		wantSettled(t, s.lead(map[string]any{"click_id": cid, "customer_key": "attr-key"}, bearer(f.keyServer)...))
		s.wantAttributed(t, s.attribute(attrBody(f.progServer, clock.Now(), map[string]any{"customer_key": "attr-key"})), cid, f.partner1, "conversion", false)
	})

	t.Run("click without a lead: attributed, converts without a signup date", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		paid := clock.Now()
		d := s.wantAttributed(t, s.attribute(attrBody(f.progServer, paid, map[string]any{"click_id": cid})), cid, f.partner1, "conversion", false)
		if d["first_purchase_date"] != paid.UTC().Format(time.RFC3339) {
			t.Fatalf("first_purchase_date %v, want %s", d["first_purchase_date"], paid.UTC().Format(time.RFC3339))
		}
		if c := s.customer(cid); c.status != "conversion" || c.signup != nil || c.first == nil || !c.first.Equal(paid) {
			t.Fatalf("customer %+v", c)
		}
	})

	t.Run("attributed by email_hash and processor_customer_id (processor source); the processor id is saved", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		wantSettled(t, s.lead(map[string]any{"click_id": cid, "email": "Buyer@Example.com"}, bearer(f.keyServer)...))
		hash := "" // SHA-256 of "buyer@example.com"
		if err := s.pool.QueryRow(context.Background(), `SELECT email_hash FROM customers WHERE click_id = $1`, cid).Scan(&hash); err != nil || len(hash) != 64 {
			t.Fatalf("email hash %q %v", hash, err)
		}
		s.wantAttributed(t, s.attribute(attrBody(f.progServer, clock.Now(), map[string]any{"email_hash": hash, "processor_customer_id": "cus_attr",
			"source": "processor"})), cid, f.partner1, "conversion", false)
		if c := s.customer(cid); c.processorID == nil || *c.processorID != "cus_attr" {
			t.Fatalf("processor customer id %v", c.processorID)
		}
		s.wantAttributed(t, s.attribute(attrBody(f.progServer, clock.Now(), map[string]any{"processor_customer_id": "cus_attr", "source": "processor"})),
			cid, f.partner1, "conversion", false)
	})

	t.Run("provisional lead: attributed, stays click, then a Bearer lead is refused", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		wantProvisional(t, s.lead(map[string]any{"click_id": cid}))
		d := s.wantAttributed(t, s.attribute(attrBody(f.progServer, clock.Now(), map[string]any{"click_id": cid})), cid, f.partner1, "click", false)
		if _, ok := d["first_purchase_date"]; ok {
			t.Fatalf("no first purchase while provisional: %v", d)
		}
		c := s.customer(cid)
		if c.status != "click" || c.first != nil || c.saleAt == nil {
			t.Fatalf("customer %+v", c)
		}
		wantPlatformError(t, s.lead(map[string]any{"click_id": cid}, bearer(f.keyServer)...), 400, "BadRequestError",
			"A sale was already recorded for this customer while its lead was provisional; the lead can no longer be settled")
	})

	t.Run("settle_lead: the provisional lead settles (its event is emitted) and the customer converts", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		wantProvisional(t, s.lead(map[string]any{"click_id": cid, "customer_key": "browser-key"}))
		leadEvents := s.count(`SELECT count(*) FROM outbox WHERE event_type = 'tracking.lead.recorded'`)
		s.wantAttributed(t, s.attribute(attrBody(f.progServer, clock.Now(), map[string]any{"click_id": cid, "settle_lead": true, "source": "processor"})),
			cid, f.partner1, "conversion", false)
		c := s.customer(cid)
		if c.status != "conversion" || c.signup == nil || c.first == nil {
			t.Fatalf("customer %+v", c)
		}
		if n := s.count(`SELECT count(*) FROM lead_events WHERE click_id = $1 AND status = 'settled' AND customer_key = 'browser-key'`, cid); n != 1 {
			t.Fatal("provisional lead not settled")
		}
		if n := s.count(`SELECT count(*) FROM outbox WHERE event_type = 'tracking.lead.recorded'`); n != leadEvents+1 {
			t.Fatalf("lead events %d -> %d", leadEvents, n)
		}
	})

	t.Run("amount_cents 0 with settle_lead: the provisional lead settles, no purchase", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		wantProvisional(t, s.lead(map[string]any{"click_id": cid, "customer_key": "free-key"}))
		d := s.wantAttributed(t, s.attribute(attrBody(f.progServer, clock.Now(), map[string]any{"click_id": cid, "settle_lead": true, "amount_cents": 0,
			"source": "processor"})), cid, f.partner1, "lead", false)
		if _, ok := d["first_purchase_date"]; ok {
			t.Fatalf("a payment of nothing is no purchase: %v", d)
		}
		c := s.customer(cid)
		if c.status != "lead" || c.signup == nil || c.first != nil || c.saleAt != nil {
			t.Fatalf("customer %+v", c)
		}
		// Nothing to settle: attributed, nothing moves.
		s.wantAttributed(t, s.attribute(attrBody(f.progServer, clock.Now(), map[string]any{"click_id": cid, "settle_lead": true, "amount_cents": 0,
			"source": "processor"})), cid, f.partner1, "lead", false)
	})

	t.Run("client_reference_id: the tracker's click of a payment link, in the program only", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		s.wantAttributed(t, s.attribute(attrBody(f.progServer, clock.Now(), map[string]any{"client_reference_id": cid, "source": "processor"})),
			cid, f.partner1, "conversion", false)
		other := s.click(f.codeB, nil)
		r := s.attribute(attrBody(f.progServer, clock.Now(), map[string]any{"client_reference_id": other, "source": "processor"}))
		if r.status != 404 {
			t.Fatalf("another program's click by client_reference_id: %d %s, want 404", r.status, r.raw)
		}
	})

	refusals := []struct {
		name    string
		program int64
		code    string
		message string
	}{
		{"another program's customer", f.progServer, f.codeB, "No affiliate attribution found for this customer in this program"},
		{"no partner-program record", f.progServer, "NOPP", "No partner-program relationship found for this customer"},
	}
	for _, row := range refusals {
		t.Run("refused: "+row.name+"; nothing stored or moved, decided afresh each time", func(t *testing.T) {
			cid := s.click(row.code, nil)
			before, c := s.attrRows(), s.customer(cid)
			body := attrBody(row.program, clock.Now(), map[string]any{"click_id": cid})
			d := wantRefused(t, s.attribute(body), cid, row.message, false)
			if after := s.attrRows(); after != before {
				t.Fatalf("rows %v -> %v", before, after)
			}
			if c2 := s.customer(cid); !reflect.DeepEqual(c2, c) {
				t.Fatalf("refusal moved the customer: %+v -> %+v", c, c2)
			}
			if n := s.attributionStored(body["transaction_id"]); n != 0 {
				t.Fatal("refusal stored")
			}
			again := wantRefused(t, s.attribute(body), cid, row.message, false)
			if !reflect.DeepEqual(withoutReplayed(again), withoutReplayed(d)) {
				t.Fatalf("second answer %v, first %v", again, d)
			}
		})
	}

	t.Run("customer not found: 404 with the sale route's message, nothing stored, answered each time", func(t *testing.T) {
		for _, extra := range []map[string]any{{"click_id": "cust_1_1"}, {"customer_key": "nobody"}, {}, {"click_id": "cust_2_2"}} {
			before := s.attrRows()
			body := attrBody(f.progServer, clock.Now(), extra)
			for i := 0; i < 2; i++ {
				wantCodedError(t, s.attribute(body), 404, "NotFoundError", "customer_not_found", "Customer not found. Provide customer_key or click_id.")
			}
			if after := s.attrRows(); after != before || s.attributionStored(body["transaction_id"]) != 0 {
				t.Fatalf("rows %v -> %v", before, after)
			}
		}
		// The customer tracked later gets a decision under the same id.
		cid := s.click(f.codeA, nil)
		body := attrBody(f.progServer, clock.Now(), map[string]any{"click_id": "cust_3_3"})
		wantCodedError(t, s.attribute(body), 404, "NotFoundError", "customer_not_found", "Customer not found. Provide customer_key or click_id.")
		body["click_id"] = cid
		s.wantAttributed(t, s.attribute(body), cid, f.partner1, "conversion", false)
	})

	t.Run("unknown program: 400, nothing stored", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		before := s.attrRows()
		wantCodedError(t, s.attribute(attrBody(999999, clock.Now(), map[string]any{"click_id": cid})), 400, "BadRequestError",
			"invalid_request", "Unknown program_id")
		if after := s.attrRows(); after != before {
			t.Fatalf("rows %v -> %v", before, after)
		}
	})

	t.Run("500 Attribution failed: nothing written, the retry decides", func(t *testing.T) {
		ctx := context.Background()
		cid := s.click(f.codeA, nil)
		body := attrBody(f.progServer, clock.Now(), map[string]any{"click_id": cid})
		if _, err := s.pool.Exec(ctx, `ALTER TABLE attributions RENAME TO attributions_away`); err != nil {
			t.Fatal(err)
		}
		r := s.attribute(body)
		if _, err := s.pool.Exec(ctx, `ALTER TABLE attributions_away RENAME TO attributions`); err != nil {
			t.Fatal(err)
		}
		wantCodedError(t, r, 500, "InternalServerError", "internal_error", "Attribution failed")
		if c := s.customer(cid); c.status != "click" || c.saleAt != nil {
			t.Fatalf("a failed decision moved the customer: %+v", c)
		}
		s.wantAttributed(t, s.attribute(body), cid, f.partner1, "conversion", false)
	})

	// Last: moves the stack's clock a month on.
	t.Run("attribution window (30 days in progBrowser), on the injected clock", func(t *testing.T) {
		window := "No affiliate attribution: the customer's click is more than 30 days (the program's attribution window) older than its signup or this payment"
		// Without a signup the payment time is the reference.
		cid := s.click(f.codeB, nil)
		clicked := clock.Now()
		clock.Advance(31 * 24 * time.Hour)
		wantRefused(t, s.attribute(attrBody(f.progBrowser, clock.Now(), map[string]any{"click_id": cid})), cid, window, false)
		if c := s.customer(cid); c.status != "click" || c.saleAt != nil {
			t.Fatalf("customer %+v", c)
		}
		s.wantAttributed(t, s.attribute(attrBody(f.progBrowser, clicked.Add(29*24*time.Hour), map[string]any{"click_id": cid})), cid, f.partner1, "conversion", false)

		// With a signup, the signup is: a lead settled 31 days after the
		// click makes every later payment outside the window.
		late := s.click(f.codeB, nil)
		clock.Advance(31 * 24 * time.Hour)
		wantSettled(t, s.lead(map[string]any{"click_id": late}, bearer(f.keyBrowser)...))
		before := s.customer(late)
		wantRefused(t, s.attribute(attrBody(f.progBrowser, clock.Now(), map[string]any{"click_id": late})), late, window, false)
		if c := s.customer(late); !reflect.DeepEqual(c, before) || c.status != "lead" {
			t.Fatalf("refusal moved the customer: %+v -> %+v", before, c)
		}

		// A lead settled within the window makes its signup the reference:
		// a payment long past the window is attributed, lead to conversion.
		early := s.click(f.codeB, nil)
		clock.Advance(29 * 24 * time.Hour)
		wantSettled(t, s.lead(map[string]any{"click_id": early}, bearer(f.keyBrowser)...))
		clock.Advance(60 * 24 * time.Hour)
		s.wantAttributed(t, s.attribute(attrBody(f.progBrowser, clock.Now(), map[string]any{"click_id": early})), early, f.partner1, "conversion", false)
		if c := s.customer(early); c.status != "conversion" || c.signup == nil || c.first == nil || !c.first.Equal(clock.Now().Truncate(time.Second)) {
			t.Fatalf("customer %+v", c)
		}
	})
}

// 100 concurrent identical calls (a caller retrying after timeouts): one
// transition, one stored decision, 100 identical answers.
func TestAttributionConcurrentCalls(t *testing.T) {
	t.Parallel()
	s := startStack(t, map[string]string{"INTERNAL_TOKEN": internalToken})
	f := s.fixture()
	cid := s.click(f.codeA, nil)
	// A provisional lead, settled by the decision: settling it emits a
	// lead event and counts a lead, so a second transition would show.
	wantProvisional(t, s.lead(map[string]any{"click_id": cid}))
	leads := func() int {
		return s.count(`SELECT COALESCE(sum(leads), 0)::int FROM partner_program_metrics WHERE program_id = $1 AND partner_id = $2`, f.progServer, f.partner1)
	}
	beforeRows, beforeLeads := s.attrRows(), leads()
	body := attrBody(f.progServer, time.Now(), map[string]any{"click_id": cid, "settle_lead": true, "source": "processor"})
	const n = 100
	replies := make([]reply, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range replies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i] = s.attribute(body)
		}()
	}
	close(start)
	wg.Wait()
	fresh := 0
	var first map[string]any
	for _, r := range replies {
		replayed, _ := decision(t, r)["replayed"].(bool)
		d := s.wantAttributed(t, r, cid, f.partner1, "conversion", replayed)
		if d["replayed"] == false {
			fresh++
		}
		if first == nil {
			first = withoutReplayed(d)
		} else if !reflect.DeepEqual(withoutReplayed(d), first) {
			t.Fatalf("answers differ: %v vs %v", d, first)
		}
	}
	if fresh != 1 {
		t.Fatalf("%d calls decided, want 1", fresh)
	}
	after := s.attrRows()
	// One decision, one converted customer, one settled lead and the two
	// events (lead, conversion); no sale.
	if want := [5]int{beforeRows[0] + 1, beforeRows[1], beforeRows[2] + 1, beforeRows[3] + 1, beforeRows[4] + 2}; after != want {
		t.Fatalf("rows %v -> %v, want %v", beforeRows, after, want)
	}
	if got := leads(); got != beforeLeads+1 {
		t.Fatalf("partner leads %d -> %d", beforeLeads, got)
	}
}

// Service-to-service authentication and the body's shape: every refusal
// is the platform envelope with its code and writes nothing.
func TestAttributionAuthAndValidation(t *testing.T) {
	t.Parallel()
	s := startStack(t, map[string]string{"INTERNAL_TOKEN": internalToken})
	f := s.fixture()
	cid := s.click(f.codeA, nil)
	now := time.Now()
	valid := func(extra map[string]any) string {
		return jsonBody(attrBody(f.progServer, now, mergeInto(map[string]any{"click_id": cid}, extra)))
	}
	const (
		bad  = "BadRequestError"
		auth = "UnauthorizedError"
	)
	token := bearer(internalToken)
	rows := []struct {
		name    string
		body    string
		headers []string
		status  int
		errName string
		code    string
		message string
	}{
		{"no Authorization", valid(nil), []string{}, 401, auth, "unauthorized", "Missing or malformed Authorization header. Expected: Bearer <internal_token>"},
		{"not Bearer", valid(nil), []string{"Authorization", "Basic " + internalToken}, 401, auth, "unauthorized", "Missing or malformed Authorization header. Expected: Bearer <internal_token>"},
		// The header's value is trimmed in transit: "Bearer" alone.
		{"empty token", valid(nil), []string{"Authorization", "Bearer "}, 401, auth, "unauthorized", "Missing or malformed Authorization header. Expected: Bearer <internal_token>"},
		{"wrong token", valid(nil), bearer("tracking-test-internal-tokeN"), 401, auth, "unauthorized", "Invalid internal token"},
		{"a program API key", valid(nil), bearer(f.keyServer), 401, auth, "unauthorized", "Invalid internal token"},
		{"malformed JSON", "{", token, 400, bad, "invalid_request", "Request body is not valid JSON"},
		{"program_id missing", valid(map[string]any{"program_id": nil}), token, 400, bad, "invalid_request", "program_id is required and must be a positive integer"},
		{"program_id zero", valid(map[string]any{"program_id": 0}), token, 400, bad, "invalid_request", "program_id is required and must be a positive integer"},
		{"program_id a string", valid(map[string]any{"program_id": "1"}), token, 400, bad, "invalid_request", "program_id is required and must be a positive integer"},
		{"transaction_id missing", valid(map[string]any{"transaction_id": nil}), token, 400, bad, "invalid_request", "transaction_id is required and must be a string"},
		{"transaction_id a number", valid(map[string]any{"transaction_id": 12}), token, 400, bad, "invalid_request", "transaction_id is required and must be a string"},
		{"transaction_id blank", valid(map[string]any{"transaction_id": " "}), token, 400, bad, "invalid_request", "transaction_id is required and must be a string"},
		{"transaction_id too long", valid(map[string]any{"transaction_id": strings.Repeat("x", 256)}), token, 400, bad, "invalid_request", "transaction_id must be at most 255 characters"},
		{"transaction_id with NUL", valid(map[string]any{"transaction_id": "txn\x00"}), token, 400, bad, "invalid_request", "transaction_id is required and must be a string"},
		{"click_id with NUL", valid(map[string]any{"click_id": "cust_\x00"}), token, 400, bad, "invalid_request", "click_id must not contain the NUL character"},
		{"NUL in an unknown field", valid(map[string]any{"note": "a\x00"}), token, 400, bad, "invalid_request", "note must not contain the NUL character"},
		{"click_id a number", valid(map[string]any{"click_id": 12}), token, 400, bad, "invalid_request", "click_id must be a string"},
		{"customer_key too long", valid(map[string]any{"customer_key": strings.Repeat("k", 256)}), token, 400, bad, "invalid_request", "customer_key must be at most 255 characters"},
		{"email_hash not a hash", valid(map[string]any{"email_hash": "buyer@example.com"}), token, 400, bad, "invalid_request", "email_hash must be the lower-case hex SHA-256 of the trimmed, lower-cased email address"},
		{"email_hash upper case", valid(map[string]any{"email_hash": strings.Repeat("A", 64)}), token, 400, bad, "invalid_request", "email_hash must be the lower-case hex SHA-256 of the trimmed, lower-cased email address"},
		{"amount_cents missing", valid(map[string]any{"amount_cents": nil}), token, 400, bad, "invalid_request", "amount_cents is required and must be a positive integer"},
		{"amount_cents zero without settle_lead", valid(map[string]any{"amount_cents": 0}), token, 400, bad, "invalid_request", "amount_cents may be 0 only with settle_lead: true (a payment of nothing only settles a provisional lead)"},
		{"amount_cents negative", valid(map[string]any{"amount_cents": -1, "settle_lead": true}), token, 400, bad, "invalid_request", "amount_cents is required and must be a positive integer"},
		{"client_reference_id a number", valid(map[string]any{"client_reference_id": 12}), token, 400, bad, "invalid_request", "client_reference_id must be a string"},
		{"amount_cents fractional", valid(map[string]any{"amount_cents": 10.5}), token, 400, bad, "invalid_request", "amount_cents is required and must be a positive integer"},
		{"currency missing", valid(map[string]any{"currency": nil}), token, 400, bad, "invalid_request", "currency is required: one of USD, EUR, VND"},
		{"currency unsupported", valid(map[string]any{"currency": "GBP"}), token, 400, bad, "invalid_request", "currency is required: one of USD, EUR, VND"},
		{"occurred_at missing", valid(map[string]any{"occurred_at": nil}), token, 400, bad, "invalid_request", "occurred_at is required and must be an RFC 3339 time after 1970 and not in the future"},
		{"occurred_at without offset", valid(map[string]any{"occurred_at": "2026-11-20T10:00:00"}), token, 400, bad, "invalid_request", "occurred_at is required and must be an RFC 3339 time after 1970 and not in the future"},
		{"occurred_at in the future", valid(map[string]any{"occurred_at": now.Add(10 * time.Minute).UTC().Format(time.RFC3339)}), token, 400, bad, "invalid_request", "occurred_at is required and must be an RFC 3339 time after 1970 and not in the future"},
		{"occurred_at before 1970", valid(map[string]any{"occurred_at": "0001-01-01T00:00:00Z"}), token, 400, bad, "invalid_request", "occurred_at is required and must be an RFC 3339 time after 1970 and not in the future"},
		{"settle_lead not a boolean", valid(map[string]any{"settle_lead": "yes"}), token, 400, bad, "invalid_request", "settle_lead must be a boolean"},
		{"source missing", valid(map[string]any{"source": nil}), token, 400, bad, "invalid_request", `source is required and must be "api" or "processor"`},
		{"source unknown", valid(map[string]any{"source": "web"}), token, 400, bad, "invalid_request", `source is required and must be "api" or "processor"`},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			before, beforeAttr := s.rows(), s.attrRows()
			r := s.call("POST", "/internal/v1/attributions", row.body, row.headers...)
			wantCodedError(t, r, row.status, row.errName, row.code, row.message)
			if after, afterAttr := s.rows(), s.attrRows(); after != before || afterAttr != beforeAttr {
				t.Fatalf("refused request wrote rows: %v %v -> %v %v", before, beforeAttr, after, afterAttr)
			}
			if s.customer(cid).status != "click" {
				t.Fatal("refused request moved the customer")
			}
		})
	}
	t.Run("the valid body is decided", func(t *testing.T) {
		s.wantAttributed(t, s.call("POST", "/internal/v1/attributions", valid(nil), token...), cid, f.partner1, "conversion", false)
	})
}

func mergeInto(base, extra map[string]any) map[string]any {
	for k, v := range extra {
		base[k] = v
	}
	return base
}

// Without INTERNAL_TOKEN the route answers 503 (whatever is sent), and the
// public front doors never route /internal/.
func TestAttributionNotConfigured(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/internal/v1/attributions", "/internal/", "/internal"} {
		if rule, ok := gateway.Route(p); ok {
			t.Errorf("the gateway routes %s to %s", p, rule.Service)
		}
	}
	// stacktest.Defaults sets an INTERNAL_TOKEN: unset it.
	s := startStack(t, map[string]string{"INTERNAL_TOKEN": ""})
	for _, h := range [][]string{bearer(internalToken), bearer(""), {}} {
		r := s.call("POST", "/internal/v1/attributions", jsonBody(attrBody(1, time.Now(), map[string]any{"click_id": "cust_1_1"})), h...)
		wantCodedError(t, r, 503, "ServiceUnavailableError", "not_configured", "internal API not configured")
	}
	if n := s.count(`SELECT count(*) FROM attributions`); n != 0 {
		t.Fatalf("%d decisions stored", n)
	}
}
