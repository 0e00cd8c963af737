package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/svc-dev/svc/services/commissions/internal/ledger"
)

// Every successful refund reports its outcome to OnRefund (the service's
// commissions_refunds_total); a failed one reports nothing.
func TestRefundOutcomesAreReported(t *testing.T) {
	e := open(t)
	var got []string
	svc, err := ledger.New(ledger.Config{Store: e.store, Now: e.clock.Now, OnRefund: func(o string) { got = append(got, o) }})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 0})
	e.sale(t, ledger.SaleInput{TransactionID: "r-1", ProgramID: 1, CustomerID: 1, AmountCents: 10000})
	e.sale(t, ledger.SaleInput{TransactionID: "r-test", ProgramID: 1, CustomerID: 2, AmountCents: 10000, Test: true})
	for _, in := range []ledger.RefundInput{
		{ProgramID: 1, TransactionID: "r-1", AmountCents: 2000},
		{ProgramID: 1, TransactionID: "r-1", AmountCents: 2000}, // a retry
		{ProgramID: 1, TransactionID: "r-1"},
		{ProgramID: 1, TransactionID: "r-test", AmountCents: 100},
	} {
		e.refund(t, in)
	}
	if _, err := svc.Refund(context.Background(), ledger.RefundInput{ProgramID: 1, TransactionID: "none", AmountCents: 1}); !errors.Is(err, ledger.ErrSaleNotFound) {
		t.Fatalf("refund of no sale: %v", err)
	}
	if want := "[refunded skipped reversed no_commission]"; fmt.Sprint(got) != want {
		t.Fatalf("outcomes %v, want %s", got, want)
	}
}

// The admin reads: a commission with its transaction id and paid-out
// state, a sale with its commission ids (test or live), the scheduler's
// lag and the backstop's backlog.
func TestAdminReads(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 14})
	res := e.sale(t, ledger.SaleInput{TransactionID: "a-1", ProgramID: 1, CustomerID: 1, AmountCents: 10000})
	d, err := e.svc.CommissionDetail(ctx, res.Commission.ID)
	if err != nil || d.TransactionID != "a-1" || d.PaidOut || d.Status != "pending" {
		t.Fatalf("detail %+v %v", d, err)
	}
	if _, err := e.svc.CommissionDetail(ctx, 999); !errors.Is(err, ledger.ErrCommissionNotFound) {
		t.Fatalf("unknown commission: %v", err)
	}
	sd, err := e.svc.SaleDetail(ctx, "a-1", false)
	if err != nil || fmt.Sprint(sd.CommissionIDs) != fmt.Sprint([]int64{res.Commission.ID}) {
		t.Fatalf("sale detail %+v %v", sd, err)
	}
	if _, err := e.svc.SaleDetail(ctx, "a-1", true); !errors.Is(err, ledger.ErrSaleNotFound) {
		t.Fatalf("live sale asked as test: %v", err)
	}

	if lag, err := e.svc.ApprovalLag(ctx, e.clock.Now()); err != nil || lag != 0 {
		t.Fatalf("lag before the hold ends: %v %v", lag, err)
	}
	now := e.clock.Advance(14*day + 5*time.Minute)
	if lag, err := e.svc.ApprovalLag(ctx, now); err != nil || lag != 5*time.Minute {
		t.Fatalf("lag: %v %v, want 5m", lag, err)
	}
	if n, err := e.svc.ApproveDue(ctx, now); err != nil || n != 1 {
		t.Fatalf("approve: %d %v", n, err)
	}
	if lag, err := e.svc.ApprovalLag(ctx, now); err != nil || lag != 0 {
		t.Fatalf("lag after approving: %v %v", lag, err)
	}
	w, err := e.svc.OpenWithdrawal(ctx, 7, "USD", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.PayWithdrawal(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	if d, err := e.svc.CommissionDetail(ctx, res.Commission.ID); err != nil || !d.PaidOut {
		t.Fatalf("paid out: %+v %v", d, err)
	}
	// A commission credited after that payout and reversed before another:
	// nothing of it was paid, nothing of it is owed. Not paid out (the paid
	// withdrawal covers the first commission, and a prefix of net amounts
	// "covers" a zero after it as well: it answered true).
	res2 := e.sale(t, ledger.SaleInput{TransactionID: "a-2", ProgramID: 1, CustomerID: 2, AmountCents: 10000})
	now = e.clock.Advance(14*day + time.Minute)
	if n, err := e.svc.ApproveDue(ctx, now); err != nil || n != 1 {
		t.Fatalf("approve the second: %d %v", n, err)
	}
	if r := e.refund(t, ledger.RefundInput{ProgramID: 1, TransactionID: "a-2"}); r.Outcome != "reversed" {
		t.Fatalf("refund of the second: %+v", r)
	}
	if d, err := e.svc.CommissionDetail(ctx, res2.Commission.ID); err != nil || d.PaidOut || d.Status != "reversed" || !d.Credited {
		t.Fatalf("reversed before any payout reached it: %+v %v, want not paid out", d, err)
	}
	if d, err := e.svc.CommissionDetail(ctx, res.Commission.ID); err != nil || !d.PaidOut {
		t.Fatalf("the first, after the second's reversal: %+v %v", d, err)
	}

	// A sale of a program not in the replica: in the backlog once older
	// than the grace.
	if _, err := e.svc.RecordSale(ctx, ledger.SaleInput{TransactionID: "a-late", ProgramID: 2, CustomerID: 3, PartnerID: 7, AmountCents: 100, Currency: "USD", Source: ledger.SourceAPI}); !errors.Is(err, ledger.ErrProgramUnknown) {
		t.Fatalf("sale of an unknown program: %v", err)
	}
	if n, err := e.svc.BackstopBacklog(ctx, e.clock.Now().Add(-time.Minute)); err != nil || n != 0 {
		t.Fatalf("backlog within the grace: %d %v", n, err)
	}
	e.clock.Advance(2 * time.Minute)
	if n, err := e.svc.BackstopBacklog(ctx, e.clock.Now().Add(-time.Minute)); err != nil || n != 1 {
		t.Fatalf("backlog: %d %v, want 1", n, err)
	}
}
