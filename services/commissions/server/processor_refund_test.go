package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// reversalEvent is a refund or dispute fixture with a fresh event id, the
// account, the clock's time and the object's fields set.
func (s *trackStack) reversalEvent(t *testing.T, fixture, account string, fields map[string]any) map[string]any {
	t.Helper()
	ev := hookFixture(t, fixture)
	ev["id"], ev["account"], ev["created"] = "evt_"+s.uniq(), account, s.clock.Now().Unix()
	obj := hookObject(ev)
	for k, v := range fields {
		obj[k] = v
	}
	return ev
}

// paidCheckout records a one-time checkout of cents USD by a fresh
// clicked customer of p through the webhook and returns its payment
// intent and the sale's commission.
func (s *trackStack) paidCheckout(t *testing.T, p prog, account string, cents int64, fields map[string]any) (string, commissionView) {
	t.Helper()
	cid := s.click(t, p.code)
	all := map[string]any{"amount_total": cents}
	for k, v := range fields {
		all[k] = v
	}
	ev := s.hookEvent(t, "checkout_session_completed_payment.json", account, map[string]any{"svc_click_id": cid}, all)
	wantHook(t, s.deliver(t, ev), "sale_recorded")
	pi := hookObject(ev)["payment_intent"].(string)
	v, ok := s.saleRecord(t, pi, false)
	if !ok || len(v.CommissionIDs) != 1 {
		t.Fatalf("sale %+v", v)
	}
	return pi, s.commission(t, v.CommissionIDs[0])
}

// The processor's refunds and disputes (issue 12) through the gateway
// against the real stack: the same reversal as POST /track/refund, each
// processor refund applied once whichever of its events arrives first,
// refunds and disputes that come before their payment kept and applied
// when it is recorded, and disputes holding the commission.
func TestProcessorRefundsAndDisputes(t *testing.T) {
	// Not parallel: its subtests are, on its stack (see startTrack).
	clock := platformtest.NewClock(t0)
	s := startTrack(t, clock, map[string]string{
		"PROCESSOR_WEBHOOK_SECRET": hookSecret,
		// The backstop applies waiting events whose payment the sale route
		// recorded (no grace: only reservations wait for it).
		"BACKSTOP_INTERVAL": "50ms",
	})
	db := s.hookDB()
	outcomeOf := func(t *testing.T, eventID any) string {
		t.Helper()
		var o string
		if err := db.commissions.QueryRow(t.Context(), `SELECT outcome FROM processor_events WHERE event_id = $1`, eventID).Scan(&o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	refunded := func(t *testing.T, pi string) int64 {
		t.Helper()
		v, _ := s.saleRecord(t, pi, false)
		return v.RefundedCents
	}

	t.Run("a partial refund.created, then cumulative charge.refunded: each cent once", func(t *testing.T) {
		t.Parallel()
		p, account := s.connectedProgram(t, nil)
		ch := "ch_" + s.uniq()
		pi, c := s.paidCheckout(t, p, account, 2500, nil)
		if c.Status != "approved" || c.Amount != 250 || s.balances(t, p.partner) != "USD 250/0/250" {
			t.Fatalf("commission %+v, balances %s", c, s.balances(t, p.partner))
		}

		re1 := s.reversalEvent(t, "refund_created.json", account, map[string]any{"id": "re_" + s.uniq(), "charge": ch, "payment_intent": pi, "amount": 1000})
		r := wantHook(t, s.deliver(t, re1), "refund_applied")
		if r.body["sale_id"] == nil || refunded(t, pi) != 1000 {
			t.Fatalf("answer %s, refunded %d", r.raw, refunded(t, pi))
		}
		if c := s.commission(t, c.ID); c.Status != "refunded" || c.RefundedAmount != 100 || s.balances(t, p.partner) != "USD 150/0/150" {
			t.Fatalf("after refund.created: %+v, %s", c, s.balances(t, p.partner))
		}
		wantHook(t, s.deliver(t, re1), "duplicate_event")

		// The charge's total so far includes re1: nothing more.
		cum := func(total int64) map[string]any {
			return s.reversalEvent(t, "charge_refunded.json", account, map[string]any{"id": ch, "payment_intent": pi, "amount_refunded": total})
		}
		wantHook(t, s.deliver(t, cum(1000)), "refund_skipped")
		if refunded(t, pi) != 1000 {
			t.Fatalf("refunded %d after a cumulative that includes re1", refunded(t, pi))
		}
		// A second refund of 500 shows first in the cumulative…
		wantHook(t, s.deliver(t, cum(1500)), "refund_applied")
		if c := s.commission(t, c.ID); refunded(t, pi) != 1500 || c.RefundedAmount != 150 || s.balances(t, p.partner) != "USD 100/0/100" {
			t.Fatalf("after cumulative 1500: refunded %d, %+v, %s", refunded(t, pi), c, s.balances(t, p.partner))
		}
		// …then in its own event: counted already.
		re2 := s.reversalEvent(t, "refund_updated.json", account, map[string]any{"id": "re_" + s.uniq(), "charge": ch, "payment_intent": pi, "amount": 500})
		wantHook(t, s.deliver(t, re2), "refund_skipped")
		// A refund not succeeded moves nothing.
		pending := s.reversalEvent(t, "refund_created.json", account, map[string]any{"id": "re_" + s.uniq(), "charge": ch, "payment_intent": pi, "amount": 700, "status": "pending"})
		wantHook(t, s.deliver(t, pending), "refund_not_succeeded")
		// The same cumulative redelivered under another event id.
		wantHook(t, s.deliver(t, cum(1500)), "refund_skipped")
		if c := s.commission(t, c.ID); refunded(t, pi) != 1500 || c.RefundedAmount != 150 || s.balances(t, p.partner) != "USD 100/0/100" {
			t.Fatalf("end: refunded %d, %+v, %s", refunded(t, pi), c, s.balances(t, p.partner))
		}
		// One notification per applied refund, as for the route.
		ns := s.waitNotifications(t, "partners", p.partner, 2)
		for _, n := range ns {
			if n.Kind != "commission_refunded" {
				t.Fatalf("notification %+v", n)
			}
		}
		if n := count(t, db.commissions, `SELECT count(*) FROM processor_refunds WHERE refund_id IN ($1, $2)`, hookObject(re1)["id"], hookObject(re2)["id"]); n != 2 {
			t.Fatalf("%d processor refunds recorded, want both", n)
		}
	})

	t.Run("refund before payment: kept, applied when the payment is recorded", func(t *testing.T) {
		t.Parallel()
		p, account := s.connectedProgram(t, nil)
		pi, ch := "pi_early_"+s.uniq(), "ch_early_"+s.uniq()
		early := s.reversalEvent(t, "refund_created.json", account, map[string]any{"id": "re_" + s.uniq(), "charge": ch, "payment_intent": pi, "amount": 1000})
		wantHook(t, s.deliver(t, early), "awaiting_payment")
		if outcomeOf(t, early["id"]) != "awaiting_payment" {
			t.Fatal("not kept")
		}
		wantHook(t, s.deliver(t, early), "duplicate_event")
		_, c := s.paidCheckout(t, p, account, 2500, map[string]any{"payment_intent": pi})
		// Applied in the delivery that recorded the payment.
		if got := outcomeOf(t, early["id"]); got != "refund_applied" {
			t.Fatalf("waiting refund now %q", got)
		}
		if c := s.commission(t, c.ID); refunded(t, pi) != 1000 || c.RefundedAmount != 100 || s.balances(t, p.partner) != "USD 150/0/150" {
			t.Fatalf("refunded %d, %+v, %s", refunded(t, pi), c, s.balances(t, p.partner))
		}
		// Its charge.refunded, later, says the same total.
		wantHook(t, s.deliver(t, s.reversalEvent(t, "charge_refunded.json", account, map[string]any{"id": ch, "payment_intent": pi, "amount_refunded": 1000})), "refund_skipped")
		if refunded(t, pi) != 1000 {
			t.Fatal("applied twice")
		}
	})

	t.Run("refund before the brand's own sale call: the backstop applies it once the sale is past its grace", func(t *testing.T) {
		// Not parallel: it moves the stack's clock past BACKSTOP_GRACE.
		p, account := s.connectedProgram(t, nil)
		pi := "pi_brand_" + s.uniq()
		early := s.reversalEvent(t, "refund_created.json", account, map[string]any{"id": "re_" + s.uniq(), "charge": "ch_" + s.uniq(), "payment_intent": pi, "amount": 400})
		wantHook(t, s.deliver(t, early), "awaiting_payment")
		cid := s.click(t, p.code)
		wantSale(t, s.sale(t, p.key, saleOf(pi, cid, 2000, "USD", nil)), pi, cid)
		runs := s.commissionsMetric(t, "commissions_backstop_runs_total", "outcome", "ok")
		eventually(t, "two backstop runs", func() bool {
			return s.commissionsMetric(t, "commissions_backstop_runs_total", "outcome", "ok") >= runs+2
		})
		if got := outcomeOf(t, early["id"]); got != "awaiting_payment" {
			t.Fatalf("applied within the grace: %q", got)
		}
		clock.Advance(2 * time.Minute)
		eventually(t, "the waiting refund applied", func() bool { return outcomeOf(t, early["id"]) == "refund_applied" })
		if refunded(t, pi) != 400 {
			t.Fatalf("refunded %d", refunded(t, pi))
		}
	})

	t.Run("older API: charge.refunded names a renewal's invoice", func(t *testing.T) {
		t.Parallel()
		p, account := s.connectedProgram(t, map[string]any{"commission_type": "recurring_percent"})
		cid := s.click(t, p.code)
		inv := s.hookEvent(t, "invoice_payment_succeeded_legacy.json", account, map[string]any{"svc_click_id": cid}, map[string]any{"charge": nil, "payment_intent": nil})
		wantHook(t, s.deliver(t, inv), "sale_recorded")
		invID := hookObject(inv)["id"].(string)
		v, _ := s.saleRecord(t, invID, false)
		ev := s.reversalEvent(t, "charge_refunded_legacy.json", account, map[string]any{
			"id": "ch_" + s.uniq(), "payment_intent": "pi_" + s.uniq(), "invoice": invID, "amount_refunded": v.AmountCents, "currency": strings.ToLower(v.Currency)})
		wantHook(t, s.deliver(t, ev), "refund_applied")
		if v2, _ := s.saleRecord(t, invID, false); v2.RefundedCents != v.AmountCents {
			t.Fatalf("sale %+v", v2)
		}
		if c := s.commission(t, v.CommissionIDs[0]); c.Status != "reversed" {
			t.Fatalf("a full refund leaves %+v", c)
		}
		// A refund in another currency than the sale's moves nothing.
		other := s.reversalEvent(t, "charge_refunded_legacy.json", account, map[string]any{"id": "ch_" + s.uniq(), "invoice": invID, "amount_refunded": 5, "currency": "gbp"})
		wantHook(t, s.deliver(t, other), "currency_mismatch")
	})

	t.Run("test mode and unknown account: stored, nothing moves", func(t *testing.T) {
		t.Parallel()
		p, account := s.connectedProgram(t, nil)
		pi, c := s.paidCheckout(t, p, account, 2500, nil)
		test := s.reversalEvent(t, "refund_created.json", account, map[string]any{"id": "re_" + s.uniq(), "payment_intent": pi, "amount": 2500})
		test["livemode"] = false
		wantHook(t, s.deliver(t, test), "test_mode_event")
		wantHook(t, s.deliver(t, s.reversalEvent(t, "refund_created.json", "acct_nobody_"+s.uniq(), map[string]any{"id": "re_" + s.uniq(), "payment_intent": pi, "amount": 2500})), "unknown_account")
		if refunded(t, pi) != 0 || s.commission(t, c.ID).Status != "approved" {
			t.Fatal("a test-mode or unknown account's refund moved money")
		}
	})

	t.Run("disputes hold the commission; lost reverses it (chargeback), won releases it", func(t *testing.T) {
		// Not parallel: it moves the stack's clock past the hold.
		p, account := s.connectedProgram(t, map[string]any{"hold_days": 7})
		dispute := func(fixture, pi, id string, fields map[string]any) map[string]any {
			all := map[string]any{"id": id, "payment_intent": pi, "charge": "ch_" + s.uniq()}
			for k, v := range fields {
				all[k] = v
			}
			return s.reversalEvent(t, fixture, account, all)
		}
		lostPI, lost := s.paidCheckout(t, p, account, 2500, nil)
		wonPI, won := s.paidCheckout(t, p, account, 3000, nil)
		_, free := s.paidCheckout(t, p, account, 1000, nil)
		if lost.Status != "pending" || won.Status != "pending" || free.Status != "pending" {
			t.Fatalf("held: %+v %+v %+v", lost, won, free)
		}
		lostID, wonID := "dp_"+s.uniq(), "dp_"+s.uniq()
		wantHook(t, s.deliver(t, dispute("charge_dispute_created.json", lostPI, lostID, nil)), "dispute_opened")
		open := dispute("charge_dispute_created.json", wonPI, wonID, nil)
		wantHook(t, s.deliver(t, open), "dispute_opened")
		// The open again under another event id: no-op.
		wantHook(t, s.deliver(t, dispute("charge_dispute_created.json", wonPI, wonID, nil)), "dispute_opened")

		clock.Advance(8 * 24 * time.Hour)
		s.approveDue(t)
		if a, b, c := s.commission(t, lost.ID), s.commission(t, won.ID), s.commission(t, free.ID); a.Status != "pending" || b.Status != "pending" || c.Status != "approved" {
			t.Fatalf("after the hold: disputed %s %s, undisputed %s", a.Status, b.Status, c.Status)
		}
		if got := s.balances(t, p.partner); got != "USD 100/0/100" {
			t.Fatalf("balances %s", got)
		}

		wantHook(t, s.deliver(t, dispute("charge_dispute_closed.json", lostPI, lostID, map[string]any{"status": "lost"})), "dispute_lost")
		if c := s.commission(t, lost.ID); c.Status != "reversed" || c.Reason != "chargeback" || refunded(t, lostPI) != 2500 {
			t.Fatalf("lost: %+v, refunded %d", c, refunded(t, lostPI))
		}
		wantHook(t, s.deliver(t, dispute("charge_dispute_closed.json", wonPI, wonID, map[string]any{"status": "won"})), "dispute_won")
		// A redelivered close, or a late open, changes nothing.
		wantHook(t, s.deliver(t, dispute("charge_dispute_closed.json", lostPI, lostID, map[string]any{"status": "won"})), "dispute_already_closed")
		wantHook(t, s.deliver(t, open), "duplicate_event")
		s.approveDue(t)
		if c := s.commission(t, won.ID); c.Status != "approved" {
			t.Fatalf("won: %+v", c)
		}
		if c := s.commission(t, lost.ID); c.Status != "reversed" {
			t.Fatalf("lost after approval run: %+v", c)
		}
		if got := s.balances(t, p.partner); got != "USD 400/0/400" {
			t.Fatalf("balances %s (won 300 + undisputed 100)", got)
		}
		if n := count(t, db.commissions, `SELECT count(*) FROM disputes WHERE dispute_id IN ($1, $2) AND status IN ('lost', 'won')`, lostID, wonID); n != 2 {
			t.Fatalf("%d disputes closed", n)
		}

		t.Run("closed lost on an approved commission: taken back from the balance, the close before its open", func(t *testing.T) {
			pi, c := s.paidCheckout(t, p, account, 2000, nil)
			clock.Advance(8 * 24 * time.Hour)
			s.approveDue(t)
			if c := s.commission(t, c.ID); c.Status != "approved" {
				t.Fatalf("%+v", c)
			}
			before := s.balances(t, p.partner)
			id := "dp_" + s.uniq()
			wantHook(t, s.deliver(t, dispute("charge_dispute_closed.json", pi, id, map[string]any{"status": "lost"})), "dispute_lost")
			wantHook(t, s.deliver(t, dispute("charge_dispute_created.json", pi, id, nil)), "dispute_opened")
			if c := s.commission(t, c.ID); c.Status != "reversed" || c.Reason != "chargeback" {
				t.Fatalf("%+v", c)
			}
			if got := s.balances(t, p.partner); before != "USD 600/0/600" || got != "USD 400/0/400" {
				t.Fatalf("balances %s -> %s", before, got)
			}
		})
		t.Run("a dispute before its payment waits for it", func(t *testing.T) {
			pi := "pi_disputed_" + s.uniq()
			id := "dp_" + s.uniq()
			ev := dispute("charge_dispute_created.json", pi, id, nil)
			wantHook(t, s.deliver(t, ev), "awaiting_payment")
			_, c := s.paidCheckout(t, p, account, 1000, map[string]any{"payment_intent": pi})
			if got := outcomeOf(t, ev["id"]); got != "dispute_opened" {
				t.Fatalf("waiting dispute now %q", got)
			}
			clock.Advance(8 * 24 * time.Hour)
			s.approveDue(t)
			if c := s.commission(t, c.ID); c.Status != "pending" {
				t.Fatalf("a disputed commission was approved: %+v", c)
			}
			if n := count(t, db.commissions, `SELECT count(*) FROM disputes WHERE dispute_id = $1 AND status = 'open'`, id); n != 1 {
				t.Fatalf("dispute not open: %d", n)
			}
		})
	})
}
