package ledger_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
	"github.com/svc-dev/svc/services/commissions/internal/ledger/pgstore"
	"github.com/svc-dev/svc/services/commissions/migrations"
)

// One transaction completes a group of reserved sales, each as it would
// be completed alone; a group naming one customer twice is refused as a
// whole (each call then runs alone), since the second would decide on a
// history without the first's commission.
func TestCompletionsOfOneGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, pool := openLedger(t)
	reserve := func(txn string, cents int64) int64 {
		s, err := svc.ReserveSale(ctx, ledger.SaleInput{TransactionID: txn, ProgramID: 1, AmountCents: cents, Currency: "USD", Source: ledger.SourceAPI}, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	who := func(customer, partner int64) ledger.Attributed {
		return ledger.Attributed{ProgramID: 1, CustomerID: customer, CustomerClickID: "click_" + string(rune('a'+customer)), PartnerID: partner}
	}
	done := reserve("order_done", 900)
	if _, err := svc.CompleteSale(ctx, done, who(4, 7)); err != nil {
		t.Fatal(err)
	}
	ids := []int64{reserve("order_1", 1000), reserve("order_2", 2000), done, reserve("order_3", 3000)}
	res, causes, err := svc.CompleteTogether(ctx, ids, []ledger.Attributed{who(1, 7), who(2, 0), who(4, 7), who(3, 7)})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{100, 0, 90, 300} {
		r := res[i]
		switch {
		case r.Sale.ID != ids[i] || r.Sale.Reserved:
			t.Errorf("call %d: sale %+v, want sale %d recorded", i, r.Sale, ids[i])
		case want == 0:
			if r.Commission != nil || !errors.Is(causes[i], ledger.ErrPartnerRequired) {
				t.Errorf("call %d (no partner): commission %+v, cause %v", i, r.Commission, causes[i])
			}
		case r.Commission == nil || r.Commission.Amount.Minor != want || causes[i] != nil:
			t.Errorf("call %d: commission %+v (cause %v), want %d cents", i, r.Commission, causes[i], want)
		case r.Commission.CustomerClickID != who(r.Sale.CustomerID, 7).CustomerClickID:
			t.Errorf("call %d: commission of click %q", i, r.Commission.CustomerClickID)
		}
	}
	// Two sales of customer 5 in one group: refused whole, nothing written.
	a, b := reserve("order_5a", 1000), reserve("order_5b", 2000)
	if _, _, err := svc.CompleteTogether(ctx, []int64{a, b}, []ledger.Attributed{who(5, 7), who(5, 7)}); err == nil {
		t.Fatal("a group naming one customer twice was run")
	}
	var reserved int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM sales WHERE id IN ($1, $2) AND reserved`, a, b).Scan(&reserved); err != nil || reserved != 2 {
		t.Fatalf("%d of the refused group's sales left reserved (%v), want 2", reserved, err)
	}
	// Alone, one after the other: the first earns, the second does not.
	first, err1 := svc.CompleteSale(ctx, a, who(5, 7))
	second, err2 := svc.CompleteSale(ctx, b, who(5, 7))
	if err1 != nil || err2 != nil || first.Commission == nil || second.Commission != nil || second.NoCommission != "already_commissioned" {
		t.Fatalf("alone: %+v %v / %+v %v", first.Commission, err1, second, err2)
	}
}

// One transaction applies a group of refunds of different sales, each as
// it would be alone; a sale not found is its own call's answer; a group
// naming one sale twice is refused whole.
func TestRefundsOfOneGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, pool := openLedger(t)
	record := func(txn string, customer, cents int64) ledger.SaleResult {
		res, err := svc.RecordSale(ctx, ledger.SaleInput{TransactionID: txn, ProgramID: 1, CustomerID: customer, PartnerID: 7,
			AmountCents: cents, Currency: "USD", Source: ledger.SourceAPI})
		if err != nil || res.Commission == nil {
			t.Fatalf("record %s: %+v %v", txn, res, err)
		}
		return res
	}
	a, b, c := record("order_a", 1, 10000), record("order_b", 2, 20000), record("order_c", 3, 5000)
	ins := []ledger.RefundInput{
		{ProgramID: 1, TransactionID: "order_a", AmountCents: 2500, RefundID: "re_1"},
		{ProgramID: 1, TransactionID: "order_missing", AmountCents: 100},
		{ProgramID: 1, TransactionID: "order_b", AmountCents: 0},   // the whole sale
		{ProgramID: 2, TransactionID: "order_c", AmountCents: 100}, // another program's id: not found
	}
	res, errs, err := svc.RefundTogether(ctx, ins)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != "refunded" || res[0].SaleID != a.Sale.ID || res[0].Deduction.Minor != 250 || errs[0] != nil {
		t.Errorf("partial refund: %+v %v, want refunded, 250 deducted", res[0], errs[0])
	}
	if res[2].Outcome != "reversed" || res[2].SaleID != b.Sale.ID || res[2].Deduction.Minor != 2000 || errs[2] != nil {
		t.Errorf("full refund: %+v %v, want reversed, 2000 deducted", res[2], errs[2])
	}
	for _, i := range []int{1, 3} {
		if !errors.Is(errs[i], ledger.ErrSaleNotFound) {
			t.Errorf("refund %d: %+v %v, want its own sale-not-found", i, res[i], errs[i])
		}
	}
	var refunds, refundedA, refundedC int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM refunds), (SELECT refunded_cents FROM sales WHERE id = $1),
			(SELECT refunded_cents FROM sales WHERE id = $2)`, a.Sale.ID, c.Sale.ID).Scan(&refunds, &refundedA, &refundedC); err != nil {
		t.Fatal(err)
	}
	if refunds != 2 || refundedA != 2500 || refundedC != 0 {
		t.Errorf("rows: %d refunds, sale a refunded %d, sale c %d; want 2, 2500, 0", refunds, refundedA, refundedC)
	}
	// The same refund again, in a group with another: skipped, nothing
	// written; and a group naming one sale twice is refused whole.
	res, errs, err = svc.RefundTogether(ctx, []ledger.RefundInput{ins[0], {ProgramID: 1, TransactionID: "order_c", AmountCents: 1000}})
	if err != nil || res[0].Outcome != "skipped" || res[0].SkipReason != ledger.SkipAlreadyApplied || res[1].Outcome != "refunded" || errs[1] != nil {
		t.Fatalf("again: %+v %v %v", res, errs, err)
	}
	if _, _, err := svc.RefundTogether(ctx, []ledger.RefundInput{{ProgramID: 1, TransactionID: "order_a", AmountCents: 100},
		{ProgramID: 1, TransactionID: "order_a", AmountCents: 200}}); err == nil {
		t.Fatal("a group naming one sale twice was run")
	}
}

// openLedger is a fresh commissions schema with program 1 (percent 10,
// hold 0) and a ledger service over it.
func openLedger(t *testing.T) (*ledger.Service, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	logger := slog.New(slog.DiscardHandler)
	if err := pg.Migrate(ctx, dsn, "commissions", migrations.FS, logger); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, dsn, "commissions", logger); err != nil {
		t.Fatal(err)
	}
	pool, err := pg.NewPool(ctx, dsn, pg.Options{Schema: "commissions", MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	svc, err := ledger.New(ledger.Config{Store: pgstore.New(pool), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO programs (id, advertiser_id, commission_type, commission_rate, duration_months, hold_days,
			currency, lead_commission, catalog_seq, updated_at) VALUES (1, 1001, 'percent', '10', 0, 0, 'USD', '0', 1, now())`); err != nil {
		t.Fatal(err)
	}
	return svc, pool
}
