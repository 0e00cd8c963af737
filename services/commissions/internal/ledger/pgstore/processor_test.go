package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
	"github.com/svc-dev/svc/services/commissions/internal/money"
)

// The ledger's side of the processor's disputes (charge.dispute.created,
// charge.dispute.closed) and cumulative refunds (charge.refunded).

func (e *env) openDispute(t *testing.T, saleID int64, id string) {
	t.Helper()
	if err := e.svc.OpenDispute(context.Background(), saleID, id); err != nil {
		t.Fatalf("open dispute %s of sale %d: %v", id, saleID, err)
	}
}

func (e *env) closeDispute(t *testing.T, id, outcome string) ledger.DisputeResult {
	t.Helper()
	res, err := e.svc.CloseDispute(context.Background(), id, outcome)
	if err != nil {
		t.Fatalf("close dispute %s %s: %v", id, outcome, err)
	}
	return res
}

func (e *env) commission(t *testing.T, id int64) ledger.Commission {
	t.Helper()
	c, err := e.svc.Commission(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// chargebackNotified checks the partner's latest notification: the
// reversal of commission with reason chargeback.
func (e *env) chargebackNotified(t *testing.T, partner, commission int64) {
	t.Helper()
	ns, err := e.svc.Notifications(context.Background(), ledger.RecipientPartner, partner)
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 1 {
		t.Fatalf("partner %d notifications = %+v, want one", partner, ns)
	}
	n := ns[0]
	if n.Kind != ledger.NotifyCommissionReversed || n.Payload["reason"] != ledger.ReasonChargeback ||
		fmt.Sprint(n.Payload["commission_id"]) != fmt.Sprint(commission) {
		t.Fatalf("notification = %+v", n)
	}
}

func TestDisputeHoldsApproval(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 30})
	// The disputed commission's hold ends 5 days before the other's.
	e.clock.Set(t0.Add(-5 * day))
	disputed := e.sale(t, ledger.SaleInput{TransactionID: "pi_disputed", ProgramID: 1, CustomerID: 1, PartnerID: 21, AmountCents: 10000})
	e.clock.Set(t0)
	other := e.sale(t, ledger.SaleInput{TransactionID: "pi_other", ProgramID: 1, CustomerID: 2, PartnerID: 22, AmountCents: 5000})
	pastHold := t0.Add(31 * day)

	before := e.events(t)
	e.openDispute(t, disputed.Sale.ID, "du_1")
	e.openDispute(t, disputed.Sale.ID, "du_1") // redelivered
	if got := e.count(t, `SELECT count(*) FROM disputes WHERE dispute_id = 'du_1' AND status = 'open'`); got != 1 {
		t.Fatalf("open disputes du_1 = %d", got)
	}
	sameEvents(t, e.events(t), before) // no dispute event yet

	t.Run("the approval lag ignores a commission held by a dispute", func(t *testing.T) {
		if _, err := e.svc.ApproveDue(ctx, t0.Add(29*day)); err != nil {
			t.Fatal(err)
		}
		lag, err := e.svc.ApprovalLag(ctx, pastHold)
		if err != nil || lag != day {
			t.Fatalf("lag = %v, %v: want a day (the undisputed commission's), not the disputed one's 6", lag, err)
		}
	})

	t.Run("ApproveDue past the hold approves only the undisputed commission", func(t *testing.T) {
		n, err := e.svc.ApproveDue(ctx, pastHold)
		if err != nil || n != 1 {
			t.Fatalf("ApproveDue = %d, %v", n, err)
		}
		if c := e.commission(t, other.Commission.ID); c.Status != money.StatusApproved {
			t.Fatalf("undisputed commission = %+v", c)
		}
		if c := e.commission(t, disputed.Commission.ID); c.Status != money.StatusPending || c.Credited {
			t.Fatalf("disputed commission = %+v", c)
		}
		if n, err := e.svc.ApproveDue(ctx, t0.Add(90*day)); err != nil || n != 0 {
			t.Fatalf("ApproveDue later = %d, %v", n, err)
		}
		if lag, err := e.svc.ApprovalLag(ctx, t0.Add(90*day)); err != nil || lag != 0 {
			t.Fatalf("lag = %v, %v: a disputed commission is not late", lag, err)
		}
		if got := e.balance(t, 21, money.USD); got != 0 {
			t.Fatalf("disputed partner's balance = %d", got)
		}
	})

	t.Run("won releases the hold; the next ApproveDue approves once", func(t *testing.T) {
		e.clock.Set(t0.Add(40 * day))
		res := e.closeDispute(t, "du_1", ledger.DisputeWon)
		if !res.Closed || res.Refund != nil || res.Dispute.Status != ledger.DisputeWon || res.Dispute.ClosedAt == nil ||
			!res.Dispute.ClosedAt.Equal(t0.Add(40*day)) || res.Dispute.SaleID != disputed.Sale.ID {
			t.Fatalf("close = %+v", res)
		}
		if c := e.commission(t, disputed.Commission.ID); c.Status != money.StatusPending {
			t.Fatalf("closing approves nothing by itself: %+v", c)
		}
		if n, err := e.svc.ApproveDue(ctx, t0.Add(40*day)); err != nil || n != 1 {
			t.Fatalf("ApproveDue after won = %d, %v", n, err)
		}
		if n, err := e.svc.ApproveDue(ctx, t0.Add(41*day)); err != nil || n != 0 {
			t.Fatalf("ApproveDue again = %d, %v", n, err)
		}
		if c := e.commission(t, disputed.Commission.ID); c.Status != money.StatusApproved || !c.Credited {
			t.Fatalf("commission after won = %+v", c)
		}
		if got := e.balance(t, 21, money.USD); got != 1000 {
			t.Fatalf("balance = %d", got)
		}
	})

	t.Run("closing again, even as lost, changes nothing", func(t *testing.T) {
		before := e.events(t)
		res := e.closeDispute(t, "du_1", ledger.DisputeLost)
		if res.Closed || res.Refund != nil || res.Dispute.Status != ledger.DisputeWon {
			t.Fatalf("second close = %+v", res)
		}
		if c := e.commission(t, disputed.Commission.ID); c.Status != money.StatusApproved {
			t.Fatalf("commission = %+v", c)
		}
		if got := e.balance(t, 21, money.USD); got != 1000 {
			t.Fatalf("balance = %d", got)
		}
		sameEvents(t, e.events(t), before)
		// A late charge.dispute.created of the closed dispute reopens nothing.
		e.openDispute(t, disputed.Sale.ID, "du_1")
		if got := e.count(t, `SELECT count(*) FROM disputes WHERE status = 'open'`); got != 0 {
			t.Fatalf("open disputes = %d", got)
		}
	})

	t.Run("a hold still running when the dispute is won waits for its end", func(t *testing.T) {
		s := e.sale(t, ledger.SaleInput{TransactionID: "pi_early", ProgramID: 1, CustomerID: 3, PartnerID: 23, AmountCents: 10000})
		e.openDispute(t, s.Sale.ID, "du_early")
		e.closeDispute(t, "du_early", ledger.DisputeWon)
		if n, err := e.svc.ApproveDue(ctx, t0.Add(41*day)); err != nil || n != 0 {
			t.Fatalf("ApproveDue before the hold ends = %d, %v", n, err)
		}
		if n, err := e.svc.ApproveDue(ctx, s.Commission.HoldUntil); err != nil || n != 1 {
			t.Fatalf("ApproveDue at the hold's end = %d, %v", n, err)
		}
	})

	t.Run("two disputes of a sale: approved once both are closed won", func(t *testing.T) {
		e.clock.Set(t0)
		s := e.sale(t, ledger.SaleInput{TransactionID: "pi_two", ProgramID: 1, CustomerID: 4, PartnerID: 24, AmountCents: 10000})
		e.openDispute(t, s.Sale.ID, "du_a")
		e.openDispute(t, s.Sale.ID, "du_b")
		e.closeDispute(t, "du_a", ledger.DisputeWon)
		if n, err := e.svc.ApproveDue(ctx, pastHold); err != nil || n != 0 {
			t.Fatalf("ApproveDue with one dispute open = %d, %v", n, err)
		}
		e.closeDispute(t, "du_b", ledger.DisputeWon)
		if n, err := e.svc.ApproveDue(ctx, pastHold); err != nil || n != 1 {
			t.Fatalf("ApproveDue with both closed = %d, %v", n, err)
		}
	})
}

func TestDisputeLost(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 30})
	e.program(t, 2, terms{typ: "percent", rate: "10", currency: "USD", hold: 0})

	t.Run("on a pending commission: reversed, no balance change", func(t *testing.T) {
		s := e.sale(t, ledger.SaleInput{TransactionID: "pi_pending", ProgramID: 1, CustomerID: 1, PartnerID: 31, AmountCents: 10000})
		e.openDispute(t, s.Sale.ID, "du_p")
		res := e.closeDispute(t, "du_p", ledger.DisputeLost)
		if !res.Closed || res.Dispute.Status != ledger.DisputeLost || res.Refund == nil {
			t.Fatalf("close = %+v", res)
		}
		r := *res.Refund
		if r.Outcome != string(money.OutcomeReversed) || r.CommissionID != s.Commission.ID || r.SaleID != s.Sale.ID ||
			r.Applied != 10000 || r.Deduction.Minor != 1000 || r.Debit.Minor != 0 {
			t.Fatalf("refund = %+v", r)
		}
		c := e.commission(t, s.Commission.ID)
		if c.Status != money.StatusReversed || c.Credited || c.Reason != ledger.ReasonChargeback {
			t.Fatalf("commission = %+v", c)
		}
		if got := e.count(t, `SELECT count(*) FROM refunds WHERE sale_id = $1 AND refund_id = 'dispute:du_p' AND reason = 'chargeback'
				AND requested_cents = 0 AND amount_cents = 10000`, s.Sale.ID); got != 1 {
			t.Fatalf("chargeback refund rows = %d", got)
		}
		if got := e.count(t, `SELECT refunded_cents FROM sales WHERE id = $1`, s.Sale.ID); got != 10000 {
			t.Fatalf("sale refunded = %d", got)
		}
		if e.balance(t, 31, money.USD) != 0 || e.count(t, `SELECT count(*) FROM balance_entries WHERE partner_id = 31`) != 0 {
			t.Fatal("the balance moved")
		}
		e.chargebackNotified(t, 31, s.Commission.ID)
		if n, err := e.svc.ApproveDue(ctx, t0.Add(60*day)); err != nil || n != 0 {
			t.Fatalf("ApproveDue approved a reversed commission: %d, %v", n, err)
		}
	})

	t.Run("on an approved commission: stays credited while open, lost deducts it", func(t *testing.T) {
		s := e.sale(t, ledger.SaleInput{TransactionID: "pi_approved", ProgramID: 2, CustomerID: 2, PartnerID: 32, AmountCents: 10000})
		if got := e.balance(t, 32, money.USD); got != 1000 {
			t.Fatalf("balance = %d", got)
		}
		e.openDispute(t, s.Sale.ID, "du_a")
		if c := e.commission(t, s.Commission.ID); c.Status != money.StatusApproved || !c.Credited || e.balance(t, 32, money.USD) != 1000 {
			t.Fatalf("an open dispute changed the approved commission: %+v", c)
		}
		before := e.events(t)
		res := e.closeDispute(t, "du_a", ledger.DisputeLost)
		if res.Refund == nil || res.Refund.Outcome != string(money.OutcomeReversed) || res.Refund.Deduction.Minor != 1000 || res.Refund.Debit.Minor != 1000 {
			t.Fatalf("close = %+v, refund %+v", res, res.Refund)
		}
		if got := e.balance(t, 32, money.USD); got != 0 {
			t.Fatalf("balance = %d", got)
		}
		if got := e.count(t, `SELECT count(*) FROM balance_entries WHERE partner_id = 32 AND kind = 'deduction' AND delta = -1000`); got != 1 {
			t.Fatalf("deduction entries = %d", got)
		}
		c := e.commission(t, s.Commission.ID)
		if c.Status != money.StatusReversed || c.Refunded != 1000 || c.Reason != ledger.ReasonChargeback {
			t.Fatalf("commission = %+v", c)
		}
		e.chargebackNotified(t, 32, s.Commission.ID)
		after := e.events(t)
		for typ, n := range map[string]int{"commissions.refund.recorded": 1, "commissions.commission.status_changed": 1,
			"commissions.balance.changed": 1, "commissions.notification.created": 1} {
			if after[typ]-before[typ] != n {
				t.Fatalf("events %v -> %v: want %d more %s", before, after, n, typ)
			}
		}
	})

	t.Run("after a partial refund: the rest is reversed", func(t *testing.T) {
		s := e.sale(t, ledger.SaleInput{TransactionID: "pi_partial", ProgramID: 2, CustomerID: 3, PartnerID: 33, AmountCents: 10000})
		e.refund(t, ledger.RefundInput{ProgramID: 2, TransactionID: "pi_partial", AmountCents: 2500, RefundID: "re_1"})
		e.openDispute(t, s.Sale.ID, "du_partial")
		res := e.closeDispute(t, "du_partial", ledger.DisputeLost)
		if res.Refund.Outcome != string(money.OutcomeReversed) || res.Refund.Applied != 7500 || res.Refund.Deduction.Minor != 750 {
			t.Fatalf("refund = %+v", res.Refund)
		}
		if got := e.balance(t, 33, money.USD); got != 0 {
			t.Fatalf("balance = %d", got)
		}
	})

	t.Run("closing a lost dispute again reverses nothing more", func(t *testing.T) {
		before := e.events(t)
		res := e.closeDispute(t, "du_a", ledger.DisputeLost)
		if res.Closed || res.Refund != nil || res.Dispute.Status != ledger.DisputeLost {
			t.Fatalf("second close = %+v", res)
		}
		sameEvents(t, e.events(t), before)
		if got := e.count(t, `SELECT count(*) FROM refunds WHERE refund_id = 'dispute:du_a'`); got != 1 {
			t.Fatalf("chargeback refunds = %d", got)
		}
	})

	t.Run("concurrent closes of one dispute reverse it once", func(t *testing.T) {
		s := e.sale(t, ledger.SaleInput{TransactionID: "pi_race", ProgramID: 2, CustomerID: 4, PartnerID: 34, AmountCents: 10000})
		e.openDispute(t, s.Sale.ID, "du_race")
		const n = 10
		results := make([]ledger.DisputeResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { results[i], errs[i] = e.svc.CloseDispute(ctx, "du_race", ledger.DisputeLost) })
		}
		wg.Wait()
		closed := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("close %d: %v", i, errs[i])
			}
			if results[i].Closed {
				closed++
			}
		}
		if closed != 1 {
			t.Fatalf("closed %d times", closed)
		}
		if got := e.balance(t, 34, money.USD); got != 0 {
			t.Fatalf("balance = %d", got)
		}
		if got := e.count(t, `SELECT count(*) FROM balance_entries WHERE partner_id = 34 AND kind = 'deduction'`); got != 1 {
			t.Fatalf("deductions = %d", got)
		}
	})

	t.Run("a sale without commission: its refunded total still grows", func(t *testing.T) {
		s := e.sale(t, ledger.SaleInput{TransactionID: "pi_nocomm", ProgramID: 2, CustomerID: 2, PartnerID: 32, AmountCents: 3000})
		if s.Commission != nil {
			t.Fatalf("second sale of customer 2 earned %+v", s.Commission)
		}
		e.openDispute(t, s.Sale.ID, "du_nocomm")
		res := e.closeDispute(t, "du_nocomm", ledger.DisputeLost)
		if res.Refund == nil || res.Refund.Outcome != ledger.OutcomeNoCommission || res.Refund.Applied != 3000 {
			t.Fatalf("refund = %+v", res.Refund)
		}
	})
}

func TestDisputeErrors(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 30})
	a := e.sale(t, ledger.SaleInput{TransactionID: "pi_a", ProgramID: 1, CustomerID: 1, AmountCents: 1000})
	b := e.sale(t, ledger.SaleInput{TransactionID: "pi_b", ProgramID: 1, CustomerID: 2, AmountCents: 1000})
	e.openDispute(t, a.Sale.ID, "du_a")

	cases := []struct {
		name string
		err  error
		is   error
		kind error
	}{
		{"closing an unknown dispute is not found", func() error { _, err := e.svc.CloseDispute(ctx, "du_unknown", ledger.DisputeWon); return err }(),
			ledger.ErrDisputeNotFound, errkind.NotFound},
		{"an outcome other than won or lost is invalid", func() error { _, err := e.svc.CloseDispute(ctx, "du_a", "warning_closed"); return err }(),
			ledger.ErrInvalidInput, errkind.Invalid},
		{"opening a dispute of an unknown sale is not found", e.svc.OpenDispute(ctx, 999999, "du_x"), ledger.ErrSaleNotFound, errkind.NotFound},
		{"a dispute id of another sale is a conflict", e.svc.OpenDispute(ctx, b.Sale.ID, "du_a"), ledger.ErrDisputeConflict, errkind.Conflict},
		{"a dispute without id is invalid", e.svc.OpenDispute(ctx, a.Sale.ID, ""), ledger.ErrInvalidInput, errkind.Invalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !errors.Is(c.err, c.is) || errkind.Of(c.err) != c.kind {
				t.Fatalf("err = %v, want %v (%v)", c.err, c.is, c.kind)
			}
		})
	}
	if got := e.count(t, `SELECT count(*) FROM disputes`); got != 1 {
		t.Fatalf("disputes = %d", got)
	}
	if c := e.commission(t, a.Commission.ID); c.Status != money.StatusPending {
		t.Fatalf("commission = %+v", c)
	}
}

func TestRefundTo(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 0})
	refundTo := func(t *testing.T, txn string, cumulative int64) ledger.RefundResult {
		t.Helper()
		r, err := e.svc.RefundTo(ctx, ledger.RefundToInput{ProgramID: 1, TransactionID: txn, CumulativeCents: cumulative,
			RefundID: fmt.Sprintf("ch_%s:%d", txn, cumulative), Reason: "requested_by_customer"})
		if err != nil {
			t.Fatalf("refund %s to %d: %v", txn, cumulative, err)
		}
		return r
	}

	t.Run("refund.created, then charge.refunded including it, then a larger cumulative", func(t *testing.T) {
		s := e.sale(t, ledger.SaleInput{TransactionID: "pi_1", ProgramID: 1, CustomerID: 1, PartnerID: 41, AmountCents: 10000})
		// refund.created re_X for 2500.
		r := e.refund(t, ledger.RefundInput{ProgramID: 1, TransactionID: "pi_1", AmountCents: 2500, RefundID: "re_X", Reason: "requested_by_customer"})
		if r.Outcome != string(money.OutcomeRefunded) || r.Deduction.Minor != 250 {
			t.Fatalf("refund.created = %+v", r)
		}
		// charge.refunded with amount_refunded 2500: re_X again, applied already.
		before, refunds := e.events(t), e.count(t, `SELECT count(*) FROM refunds`)
		r = refundTo(t, "pi_1", 2500)
		if r.Outcome != string(money.OutcomeSkipped) || r.SkipReason != ledger.SkipAlreadyApplied || r.Applied != 0 ||
			r.SaleID != s.Sale.ID || r.CommissionID != s.Commission.ID {
			t.Fatalf("charge.refunded 2500 = %+v", r)
		}
		sameEvents(t, e.events(t), before)
		if got := e.count(t, `SELECT count(*) FROM refunds`); got != refunds {
			t.Fatalf("refunds %d -> %d", refunds, got)
		}
		// charge.refunded with amount_refunded 4000: 1500 more.
		r = refundTo(t, "pi_1", 4000)
		if r.Outcome != string(money.OutcomeRefunded) || r.Applied != 1500 || r.Deduction.Minor != 150 || r.Debit.Minor != 150 {
			t.Fatalf("charge.refunded 4000 = %+v", r)
		}
		if got := e.count(t, `SELECT refunded_cents FROM sales WHERE id = $1`, s.Sale.ID); got != 4000 {
			t.Fatalf("sale refunded = %d", got)
		}
		if got := e.balance(t, 41, money.USD); got != 600 {
			t.Fatalf("balance = %d", got)
		}
		if got := e.count(t, `SELECT count(*) FROM refunds WHERE refund_id = 'ch_pi_1:4000' AND requested_cents = 1500 AND amount_cents = 1500`); got != 1 {
			t.Fatalf("cumulative refund rows = %d", got)
		}
		// Redelivered, or an older cumulative arriving late: nothing.
		for _, cum := range []int64{4000, 3000, 0} {
			if r := refundTo(t, "pi_1", cum); r.Outcome != string(money.OutcomeSkipped) || r.Applied != 0 {
				t.Fatalf("charge.refunded %d again = %+v", cum, r)
			}
		}
		// Refunded in full: reversed, the rest deducted.
		r = refundTo(t, "pi_1", 10000)
		if r.Outcome != string(money.OutcomeReversed) || r.Applied != 6000 || r.Deduction.Minor != 600 {
			t.Fatalf("charge.refunded 10000 = %+v", r)
		}
		if got := e.balance(t, 41, money.USD); got != 0 {
			t.Fatalf("balance = %d", got)
		}
		if got := e.count(t, `SELECT sum(amount_cents) FROM refunds WHERE sale_id = $1`, s.Sale.ID); got != 10000 {
			t.Fatalf("refunds add up to %d", got)
		}
		ns, err := e.svc.Notifications(ctx, ledger.RecipientPartner, 41)
		if err != nil || len(ns) != 3 {
			t.Fatalf("notifications = %d, %v (one per applied refund)", len(ns), err)
		}
	})

	t.Run("concurrent charge.refunded with one cumulative apply once", func(t *testing.T) {
		e.sale(t, ledger.SaleInput{TransactionID: "pi_2", ProgramID: 1, CustomerID: 2, PartnerID: 42, AmountCents: 10000})
		const n = 20
		results := make([]ledger.RefundResult, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				results[i], errs[i] = e.svc.RefundTo(ctx, ledger.RefundToInput{ProgramID: 1, TransactionID: "pi_2", CumulativeCents: 3000, RefundID: "ch_2:3000"})
			})
		}
		wg.Wait()
		outcomes := map[string]int{}
		var applied int64
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("refund %d: %v", i, errs[i])
			}
			outcomes[results[i].Outcome]++
			applied += results[i].Applied
		}
		if outcomes["refunded"] != 1 || outcomes["skipped"] != n-1 || applied != 3000 {
			t.Fatalf("outcomes = %v, applied %d", outcomes, applied)
		}
		if got := e.balance(t, 42, money.USD); got != 700 {
			t.Fatalf("balance = %d", got)
		}
		if got := e.count(t, `SELECT count(*) FROM refunds WHERE sale_id = (SELECT id FROM sales WHERE transaction_id = 'pi_2')`); got != 1 {
			t.Fatalf("refund rows = %d", got)
		}
	})

	t.Run("a sale without commission accumulates its refunded total", func(t *testing.T) {
		e.sale(t, ledger.SaleInput{TransactionID: "pi_3", ProgramID: 1, CustomerID: 2, PartnerID: 42, AmountCents: 5000})
		if r := refundTo(t, "pi_3", 2000); r.Outcome != ledger.OutcomeNoCommission || r.Applied != 2000 {
			t.Fatalf("refund = %+v", r)
		}
		if r := refundTo(t, "pi_3", 2000); r.Outcome != ledger.OutcomeNoCommission || r.Applied != 0 {
			t.Fatalf("again = %+v", r)
		}
		if got := e.count(t, `SELECT refunded_cents FROM sales WHERE transaction_id = 'pi_3'`); got != 2000 {
			t.Fatalf("sale refunded = %d", got)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct {
			name string
			in   ledger.RefundToInput
			is   error
		}{
			{"without refund id", ledger.RefundToInput{ProgramID: 1, TransactionID: "pi_1", CumulativeCents: 100}, ledger.ErrInvalidInput},
			{"negative cumulative", ledger.RefundToInput{ProgramID: 1, TransactionID: "pi_1", CumulativeCents: -1, RefundID: "x"}, ledger.ErrInvalidInput},
			{"unknown sale", ledger.RefundToInput{ProgramID: 1, TransactionID: "pi_none", CumulativeCents: 100, RefundID: "x"}, ledger.ErrSaleNotFound},
			{"another program's sale", ledger.RefundToInput{ProgramID: 2, TransactionID: "pi_1", CumulativeCents: 100, RefundID: "x"}, ledger.ErrSaleNotFound},
		} {
			t.Run(c.name, func(t *testing.T) {
				if _, err := e.svc.RefundTo(ctx, c.in); !errors.Is(err, c.is) {
					t.Fatalf("err = %v, want %v", err, c.is)
				}
			})
		}
	})
}

// TestProcessorRefund checks that refund.created (ProcessorRefund) and
// charge.refunded (RefundTo) never apply one refund twice, in any order.
func TestProcessorRefund(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 0})
	var customer int64
	newSale := func(t *testing.T) (string, int64) {
		t.Helper()
		customer++
		txn := fmt.Sprintf("pi_%d", customer)
		e.sale(t, ledger.SaleInput{TransactionID: txn, ProgramID: 1, CustomerID: customer, PartnerID: 50 + customer, AmountCents: 10000})
		return txn, 50 + customer
	}
	byID := func(t *testing.T, txn, id string, amount, wantApplied int64) {
		t.Helper()
		r, err := e.svc.ProcessorRefund(ctx, ledger.ProcessorRefundInput{ProgramID: 1, TransactionID: txn, RefundID: id, AmountCents: amount})
		if err != nil {
			t.Fatalf("refund.created %s: %v", id, err)
		}
		if r.Applied != wantApplied || (wantApplied == 0 && (r.Outcome != string(money.OutcomeSkipped) || r.SkipReason != ledger.SkipAlreadyApplied)) {
			t.Fatalf("refund.created %s %d = %+v, want %d applied", id, amount, r, wantApplied)
		}
	}
	cumulative := func(t *testing.T, txn string, cum, wantApplied int64) {
		t.Helper()
		r, err := e.svc.RefundTo(ctx, ledger.RefundToInput{ProgramID: 1, TransactionID: txn, CumulativeCents: cum, RefundID: fmt.Sprintf("ch_%s:%d", txn, cum)})
		if err != nil {
			t.Fatalf("charge.refunded %d: %v", cum, err)
		}
		if r.Applied != wantApplied {
			t.Fatalf("charge.refunded %d = %+v, want %d applied", cum, r, wantApplied)
		}
	}
	refunded := func(t *testing.T, txn string, partner, want int64) {
		t.Helper()
		if got := e.count(t, `SELECT refunded_cents FROM sales WHERE transaction_id = $1`, txn); got != want {
			t.Fatalf("sale refunded = %d, want %d", got, want)
		}
		if got := e.balance(t, partner, money.USD); got != 1000-want/10 {
			t.Fatalf("balance = %d, want %d", got, 1000-want/10)
		}
	}

	t.Run("refund.created first, then charge.refunded", func(t *testing.T) {
		txn, p := newSale(t)
		byID(t, txn, "re_X", 2500, 2500)
		byID(t, txn, "re_X", 2500, 0) // redelivered
		cumulative(t, txn, 2500, 0)
		cumulative(t, txn, 4000, 1500)
		byID(t, txn, "re_Y", 1500, 0) // the refund the cumulative 4000 counted
		refunded(t, txn, p, 4000)
	})

	t.Run("charge.refunded first, then the refund.created it counted, then a new refund", func(t *testing.T) {
		txn, p := newSale(t)
		cumulative(t, txn, 4000, 4000)
		byID(t, txn, "re_X", 2500, 0)
		byID(t, txn, "re_Y", 1500, 0)
		byID(t, txn, "re_Z", 1000, 1000)
		cumulative(t, txn, 5000, 0)
		refunded(t, txn, p, 5000)
	})

	t.Run("a new refund before the old ones' events: late, never twice", func(t *testing.T) {
		txn, p := newSale(t)
		cumulative(t, txn, 3000, 3000) // re_X 2500 + re_Y 500
		byID(t, txn, "re_Z", 1000, 0)  // not in 3000, but only a lower bound is known yet
		byID(t, txn, "re_X", 2500, 500)
		byID(t, txn, "re_Y", 500, 500)
		cumulative(t, txn, 4000, 0)
		refunded(t, txn, p, 4000)
	})

	t.Run("concurrent deliveries of one refund apply it once", func(t *testing.T) {
		txn, p := newSale(t)
		const n = 20
		errs := make([]error, n)
		results := make([]ledger.RefundResult, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				results[i], errs[i] = e.svc.ProcessorRefund(ctx, ledger.ProcessorRefundInput{ProgramID: 1, TransactionID: txn, RefundID: "re_1", AmountCents: 2000})
			})
		}
		wg.Wait()
		var applied int64
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("refund %d: %v", i, errs[i])
			}
			applied += results[i].Applied
		}
		if applied != 2000 {
			t.Fatalf("applied %d", applied)
		}
		refunded(t, txn, p, 2000)
	})

	t.Run("without refund id or amount it is invalid", func(t *testing.T) {
		for _, in := range []ledger.ProcessorRefundInput{
			{ProgramID: 1, TransactionID: "pi_1", AmountCents: 100},
			{ProgramID: 1, TransactionID: "pi_1", RefundID: "re_0"},
		} {
			if _, err := e.svc.ProcessorRefund(ctx, in); !errors.Is(err, ledger.ErrInvalidInput) {
				t.Fatalf("%+v: err = %v", in, err)
			}
		}
	})
}
