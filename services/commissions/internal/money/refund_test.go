package money

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestApplyRefund(t *testing.T) {
	usd := func(m int64) Amount { return Amount{m, USD} }
	for _, tc := range []struct {
		name string
		in   Refund
		want RefundResult
	}{
		{
			"approved partial refund reduces by the fraction",
			Refund{Commission: usd(1000), Status: StatusApproved, Credited: true, SaleAmount: 10000, Amount: 2500},
			RefundResult{Outcome: OutcomeRefunded, Status: StatusRefunded, Applied: 2500, SaleRefunded: 2500, Deduction: usd(250), Debit: usd(250)},
		},
		{
			"approved full refund reverses",
			Refund{Commission: usd(1000), Status: StatusApproved, Credited: true, SaleAmount: 10000, Amount: 10000},
			RefundResult{Outcome: OutcomeReversed, Status: StatusReversed, Applied: 10000, SaleRefunded: 10000, Deduction: usd(1000), Debit: usd(1000)},
		},
		{
			"amount omitted refunds all that is left",
			Refund{Commission: usd(1000), Status: StatusRefunded, Credited: true, SaleAmount: 10000, SaleRefunded: 2500},
			RefundResult{Outcome: OutcomeReversed, Status: StatusReversed, Applied: 7500, SaleRefunded: 10000, Deduction: usd(750), Debit: usd(750)},
		},
		{
			"amount beyond the sale is capped",
			Refund{Commission: usd(1000), Status: StatusRefunded, Credited: true, SaleAmount: 10000, SaleRefunded: 9000, Amount: 5000},
			RefundResult{Outcome: OutcomeReversed, Status: StatusReversed, Applied: 1000, SaleRefunded: 10000, Deduction: usd(100), Debit: usd(100)},
		},
		{
			"pending partial refund cancels, informational deduction, no debit",
			Refund{Commission: usd(1000), Status: StatusPending, SaleAmount: 10000, Amount: 3000},
			RefundResult{Outcome: OutcomeRefunded, Status: StatusRefunded, Applied: 3000, SaleRefunded: 3000, Deduction: usd(300), Debit: usd(0)},
		},
		{
			"pending is never credited",
			Refund{Commission: usd(1000), Status: StatusPending, Credited: true, SaleAmount: 10000, Amount: 3000},
			RefundResult{Outcome: OutcomeRefunded, Status: StatusRefunded, Applied: 3000, SaleRefunded: 3000, Deduction: usd(300), Debit: usd(0)},
		},
		{
			"pending full refund reverses without debit",
			Refund{Commission: usd(1000), Status: StatusPending, SaleAmount: 10000},
			RefundResult{Outcome: OutcomeReversed, Status: StatusReversed, Applied: 10000, SaleRefunded: 10000, Deduction: usd(1000), Debit: usd(0)},
		},
		{
			"refunded while pending, then the rest: reversed without debit",
			Refund{Commission: usd(1000), Status: StatusRefunded, Credited: false, SaleAmount: 10000, SaleRefunded: 3000, Amount: 7000},
			RefundResult{Outcome: OutcomeReversed, Status: StatusReversed, Applied: 7000, SaleRefunded: 10000, Deduction: usd(700), Debit: usd(0)},
		},
		{
			"reversed is skipped",
			Refund{Commission: usd(1000), Status: StatusReversed, Credited: true, SaleAmount: 10000, SaleRefunded: 10000, Amount: 100},
			RefundResult{Outcome: OutcomeSkipped, Status: StatusReversed, SkipReason: "already reversed", SaleRefunded: 10000, Deduction: usd(0), Debit: usd(0)},
		},
		{
			"half cent rounds up on the first refund",
			Refund{Commission: usd(1), Status: StatusApproved, Credited: true, SaleAmount: 2, Amount: 1},
			RefundResult{Outcome: OutcomeRefunded, Status: StatusRefunded, Applied: 1, SaleRefunded: 1, Deduction: usd(1), Debit: usd(1)},
		},
		{
			"and the last refund takes what is left: nothing",
			Refund{Commission: usd(1), Status: StatusRefunded, Credited: true, SaleAmount: 2, SaleRefunded: 1, Amount: 1},
			RefundResult{Outcome: OutcomeReversed, Status: StatusReversed, Applied: 1, SaleRefunded: 2, Deduction: usd(0), Debit: usd(0)},
		},
		{
			"thirds: 333 + 334 + 333 of 1000, second refund",
			Refund{Commission: usd(1000), Status: StatusRefunded, Credited: true, SaleAmount: 3, SaleRefunded: 1, Amount: 1},
			RefundResult{Outcome: OutcomeRefunded, Status: StatusRefunded, Applied: 1, SaleRefunded: 2, Deduction: usd(334), Debit: usd(334)}, // 667 − 333
		},
		{
			"vnd commission on a usd sale (fixed)",
			Refund{Commission: Amount{50000, VND}, Status: StatusApproved, Credited: true, SaleAmount: 999, Amount: 333},
			RefundResult{Outcome: OutcomeRefunded, Status: StatusRefunded, Applied: 333, SaleRefunded: 333, Deduction: Amount{16667, VND}, Debit: Amount{16667, VND}}, // 16666.67
		},
		{
			"eur tiny refund rounds to zero",
			Refund{Commission: Amount{10, EUR}, Status: StatusApproved, Credited: true, SaleAmount: 10000, Amount: 1},
			RefundResult{Outcome: OutcomeRefunded, Status: StatusRefunded, Applied: 1, SaleRefunded: 1, Deduction: Amount{0, EUR}, Debit: Amount{0, EUR}},
		},
		{
			"eur refund at exactly half a cent of commission",
			Refund{Commission: Amount{10, EUR}, Status: StatusApproved, Credited: true, SaleAmount: 10000, Amount: 500},
			RefundResult{Outcome: OutcomeRefunded, Status: StatusRefunded, Applied: 500, SaleRefunded: 500, Deduction: Amount{1, EUR}, Debit: Amount{1, EUR}}, // 0.5
		},
		{
			"sale already fully refunded but commission not reversed: reversed with the rest",
			Refund{Commission: usd(1000), Status: StatusRefunded, Credited: true, SaleAmount: 10000, SaleRefunded: 10000, Amount: 10},
			RefundResult{Outcome: OutcomeReversed, Status: StatusReversed, Applied: 0, SaleRefunded: 10000, Deduction: usd(0), Debit: usd(0)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ApplyRefund(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("ApplyRefund(%+v)\n got %+v\nwant %+v", tc.in, got, tc.want)
			}
		})
	}
}

func TestApplyRefundErrors(t *testing.T) {
	ok := Refund{Commission: Amount{1000, USD}, Status: StatusApproved, Credited: true, SaleAmount: 10000}
	for _, tc := range []struct {
		name string
		edit func(*Refund)
		err  error
	}{
		{"unknown status", func(r *Refund) { r.Status = "paid" }, ErrInvalid},
		{"bad currency", func(r *Refund) { r.Commission.Currency = "GBP" }, ErrUnsupportedCurrency},
		{"negative commission", func(r *Refund) { r.Commission.Minor = -1 }, ErrNegative},
		{"zero sale", func(r *Refund) { r.SaleAmount = 0 }, ErrInvalid},
		{"refunded beyond sale", func(r *Refund) { r.SaleRefunded = 10001 }, ErrInvalid},
		{"negative refunded", func(r *Refund) { r.SaleRefunded = -1 }, ErrInvalid},
		{"negative refund", func(r *Refund) { r.Amount = -5 }, ErrNegative},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.edit(&r)
			if _, err := ApplyRefund(r); !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
		})
	}
}

// TestSplitRefundsAddUp: whatever the split of a sale into refunds
// (including amounts beyond what is left, and omitted amounts), the
// deductions add up to exactly the commission once the sale is fully
// refunded, each is non-negative, and only the last reverses.
func TestSplitRefundsAddUp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		cur := []Currency{USD, EUR, VND}[rng.IntN(3)]
		var sale, commission int64
		switch rng.IntN(3) {
		case 0: // small numbers, where rounding matters most
			sale = 1 + rng.Int64N(50)
			commission = rng.Int64N(60)
		case 1:
			sale = 1 + rng.Int64N(1_000_000)
			commission = rng.Int64N(sale + 1)
		default: // huge: products beyond int64
			sale = 1 + rng.Int64N(1<<62)
			commission = rng.Int64N(1 << 62)
		}
		status := []Status{StatusPending, StatusApproved}[rng.IntN(2)]
		credited := status == StatusApproved
		var refunded, total, debited int64
		for step := 0; ; step++ {
			amount := int64(0)
			if rng.IntN(8) != 0 {
				amount = 1 + rng.Int64N(max(1, (sale-refunded)/int64(1+rng.IntN(4))+1))
			}
			res, err := ApplyRefund(Refund{Commission: Amount{commission, cur}, Status: status, Credited: credited,
				SaleAmount: sale, SaleRefunded: refunded, Amount: amount})
			if err != nil {
				t.Fatalf("case %d step %d: %v", i, step, err)
			}
			if res.Deduction.Minor < 0 || res.Deduction.Currency != cur {
				t.Fatalf("case %d step %d: deduction %v", i, step, res.Deduction)
			}
			if credited && res.Debit != res.Deduction || !credited && res.Debit.Minor != 0 {
				t.Fatalf("case %d step %d: debit %v for deduction %v (credited %v)", i, step, res.Debit, res.Deduction, credited)
			}
			if res.SaleRefunded != refunded+res.Applied || res.SaleRefunded > sale {
				t.Fatalf("case %d step %d: refunded %d + applied %d = %d", i, step, refunded, res.Applied, res.SaleRefunded)
			}
			total += res.Deduction.Minor
			debited += res.Debit.Minor
			refunded = res.SaleRefunded
			if total > commission {
				t.Fatalf("case %d step %d: deductions %d exceed commission %d", i, step, total, commission)
			}
			status = res.Status
			if res.Outcome == OutcomeReversed {
				if refunded != sale || total != commission {
					t.Fatalf("case %d: reversed with refunded %d of %d, deductions %d of commission %d", i, refunded, sale, total, commission)
				}
				if credited && debited != commission {
					t.Fatalf("case %d: debited %d of commission %d", i, debited, commission)
				}
				break
			}
			if res.Outcome != OutcomeRefunded || refunded >= sale {
				t.Fatalf("case %d step %d: outcome %s with refunded %d of %d", i, step, res.Outcome, refunded, sale)
			}
		}
		// A further refund is skipped.
		res, err := ApplyRefund(Refund{Commission: Amount{commission, cur}, Status: status, Credited: credited, SaleAmount: sale, SaleRefunded: refunded})
		if err != nil || res.Outcome != OutcomeSkipped || res.Deduction.Minor != 0 {
			t.Fatalf("case %d: refund after reversal = %+v, %v", i, res, err)
		}
	}
}

func TestShareIsMonotonic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		sale := 1 + rng.Int64N(500)
		commission := rng.Int64N(1000)
		prev := int64(0)
		for s := int64(0); s <= sale; s++ {
			got, err := Share(commission, sale, s)
			if err != nil || got < prev {
				t.Fatalf("Share(%d, %d, %d) = %d, %v after %d", commission, sale, s, got, err, prev)
			}
			prev = got
		}
		if prev != commission {
			t.Fatalf("Share at the full sale = %d, want %d", prev, commission)
		}
	}
}
