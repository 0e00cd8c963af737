package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
)

// paid lists the CommissionPaid events written so far, oldest first.
func (e *env) paid(t *testing.T) []*eventsv1.CommissionPaid {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT payload FROM outbox WHERE event_type = $1 ORDER BY id`, eventsv1.TypeCommissionPaid)
	if err != nil {
		t.Fatal(err)
	}
	payloads, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*eventsv1.CommissionPaid, 0, len(payloads))
	for _, p := range payloads {
		var env eventsv1.Envelope
		var ev eventsv1.CommissionPaid
		if err := proto.Unmarshal(p, &env); err != nil {
			t.Fatal(err)
		}
		if err := proto.Unmarshal(env.GetPayload(), &ev); err != nil {
			t.Fatal(err)
		}
		if env.GetProgramId() != ev.GetProgramId() {
			t.Fatalf("envelope keyed by program %d for commission %d of program %d", env.GetProgramId(), ev.GetCommissionId(), ev.GetProgramId())
		}
		out = append(out, &ev)
	}
	return out
}

// Paying a program's payout tells each of that program's commissions its
// payment covered (the program's paid payouts cover its credited
// commissions oldest first, net of refunds): once, never for one refunded
// to nothing, never for another program's commission, a cancelled
// withdrawal, a payment that covers no whole commission or the operator's
// partner-wide withdrawal.
func TestPayingWithdrawalsTellsTheCommissionsPaid(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 0})
	e.program(t, 2, terms{typ: "percent", rate: "10", currency: "USD", hold: 0})
	const p = 42
	// The partner's oldest commission is program 2's: program 1's payouts
	// must still never tell it paid (another brand paid nothing of it).
	c := e.sale(t, ledger.SaleInput{TransactionID: "c", ProgramID: 2, CustomerID: 3, PartnerID: p, AmountCents: 3000}) // 300
	e.clock.Advance(time.Second)
	a := e.sale(t, ledger.SaleInput{TransactionID: "a", ProgramID: 1, CustomerID: 1, PartnerID: p, AmountCents: 10000}) // 1000
	e.sale(t, ledger.SaleInput{TransactionID: "b", ProgramID: 1, CustomerID: 2, PartnerID: p, AmountCents: 5000})       // 500
	// Another partner's commission is never told paid by this partner's payouts.
	e.sale(t, ledger.SaleInput{TransactionID: "other", ProgramID: 1, CustomerID: 4, PartnerID: p + 1, AmountCents: 100})
	e.refund(t, ledger.RefundInput{ProgramID: 1, TransactionID: "b"}) // b's net is 0
	pay := func(program int64, amount int64) ledger.Withdrawal {
		t.Helper()
		w, err := e.svc.OpenProgramWithdrawal(ctx, program, p, "USD", amount)
		if err != nil {
			t.Fatal(err)
		}
		if w, err = e.svc.PayProgramWithdrawal(ctx, program, w.ID, "tr"); err != nil {
			t.Fatal(err)
		}
		return w
	}
	ids := func(evs []*eventsv1.CommissionPaid) string {
		var s []int64
		for _, ev := range evs {
			s = append(s, ev.GetCommissionId())
		}
		return fmt.Sprint(s)
	}

	// A cancelled withdrawal pays nothing.
	w, err := e.svc.OpenProgramWithdrawal(ctx, 1, p, "USD", 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CancelProgramWithdrawal(ctx, 1, w.ID); err != nil {
		t.Fatal(err)
	}
	// Program 1's 600 covers none of its commissions (a is 1000); by the
	// partner-wide rule it would have covered program 2's older c.
	pay(1, 600)
	if got := e.paid(t); len(got) != 0 {
		t.Fatalf("told paid after 600: %s", ids(got))
	}
	// 1,000 paid covers a, and b (nothing left of it: not told).
	w2 := pay(1, 400)
	got := e.paid(t)
	if ids(got) != fmt.Sprint([]int64{a.Commission.ID}) {
		t.Fatalf("told paid after 1,000: %s, want a (%d)", ids(got), a.Commission.ID)
	}
	ev := got[0]
	if ev.GetProgramId() != 1 || ev.GetPartnerId() != p || ev.GetSaleId() == 0 || ev.GetKind() != "sale" || ev.GetStatus() != "approved" ||
		ev.GetAmount() != 1000 || ev.GetRefundedAmount() != 0 || ev.GetCurrency() != "USD" || ev.GetWithdrawalId() != w2.ID ||
		ev.GetWithdrawalProgramId() != 1 || !ev.GetPaidAt().AsTime().Equal(e.clock.Now()) {
		t.Fatalf("commission.paid %v", ev)
	}
	// Program 2's own payout covers c.
	pay(2, 300)
	got = e.paid(t)
	if ids(got) != fmt.Sprint([]int64{a.Commission.ID, c.Commission.ID}) || got[1].GetProgramId() != 2 || got[1].GetWithdrawalProgramId() != 2 {
		t.Fatalf("told paid after program 2's payout: %s", ids(got))
	}
	// A withdrawal the operator pays for the partner as a whole tells no
	// program (as payout.paid does not).
	e.sale(t, ledger.SaleInput{TransactionID: "d", ProgramID: 1, CustomerID: 5, PartnerID: p, AmountCents: 2000}) // 200
	admin, err := e.svc.OpenWithdrawal(ctx, p, "USD", 200)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.PayWithdrawal(ctx, admin.ID); err != nil {
		t.Fatal(err)
	}
	if n := len(e.paid(t)); n != 2 {
		t.Fatalf("%d commission.paid events after the operator's withdrawal, want 2", n)
	}
	// Paying again is refused and tells nothing more.
	if _, err := e.svc.PayProgramWithdrawal(ctx, 1, w2.ID, "tr"); err == nil {
		t.Fatal("paid twice")
	}
	if n := len(e.paid(t)); n != 2 {
		t.Fatalf("%d commission.paid events, want 2", n)
	}
}
