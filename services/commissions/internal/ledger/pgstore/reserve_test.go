package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/svc-dev/svc/services/commissions/internal/ledger"
	"github.com/svc-dev/svc/services/commissions/internal/ledger/pgstore"
	"github.com/svc-dev/svc/services/commissions/internal/money"
)

// TestReservationsCommittedTogether drives one group of reservations as
// the store's group commit runs them: each gets the answer it would have
// had alone, in the group's order.
func TestReservationsCommittedTogether(t *testing.T) {
	t.Parallel()
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD"})
	before := e.sale(t, ledger.SaleInput{TransactionID: "order_before", ProgramID: 1, AmountCents: 100, CustomerID: 9})
	sale := func(txn string, cents int64) *ledger.Sale {
		ref, _ := json.Marshal(map[string]string{"transaction_id": txn})
		return &ledger.Sale{TransactionID: txn, ProgramID: 1, Amount: money.Amount{Minor: cents, Currency: money.USD},
			Source: ledger.SourceAPI, Reserved: true, AttributionRef: ref, OccurredAt: t0, CreatedAt: t0}
	}
	group := []*ledger.Sale{sale("order_a", 100), sale("order_b", 200), sale("order_before", 300), sale("order_a", 400), sale("order_c", 500)}
	res, err := pgstore.ReserveSales(e.store, ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(group) {
		t.Fatalf("%d results for %d reservations", len(res), len(group))
	}
	ids := map[string]int64{}
	for i, want := range []string{"order_a", "order_b", "", "", "order_c"} {
		if want == "" {
			continue
		}
		if res[i].Err != nil || res[i].Out == 0 {
			t.Fatalf("reservation %d (%s): %d %v, want a new sale", i, want, res[i].Out, res[i].Err)
		}
		ids[want] = res[i].Out
		var amount int64
		var reserved bool
		var ref string
		if err := e.pool.QueryRow(ctx, `SELECT amount_cents, reserved, attribution_ref->>'transaction_id' FROM sales WHERE id = $1 AND transaction_id = $2`,
			res[i].Out, want).Scan(&amount, &reserved, &ref); err != nil {
			t.Fatalf("reservation %s: %v", want, err)
		}
		if amount != group[i].Amount.Minor || !reserved || ref != want {
			t.Errorf("reservation %s stored %d reserved=%v ref %q", want, amount, reserved, ref)
		}
	}
	// A duplicate of a sale recorded before, and the group's second call
	// with order_a: each names the sale that holds the id.
	for i, holder := range map[int]int64{2: before.Sale.ID, 3: ids["order_a"]} {
		var dup *ledger.DuplicateSaleError
		if !errors.As(res[i].Err, &dup) || dup.SaleID != holder {
			t.Errorf("reservation %d: %v, want a duplicate of sale %d", i, res[i].Err, holder)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM sales`); n != 4 {
		t.Errorf("%d sales stored, want 4 (one before, three reserved)", n)
	}
}
