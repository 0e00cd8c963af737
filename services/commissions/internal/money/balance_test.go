package money

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func TestFitWithdrawals(t *testing.T) {
	usd := func(m int64) Amount { return Amount{m, USD} }
	open := []Withdrawal{{ID: 1, Amount: usd(3000)}, {ID: 2, Amount: usd(2000)}, {ID: 3, Amount: usd(1000)}} // oldest first
	for _, tc := range []struct {
		name    string
		balance Amount
		open    []Withdrawal
		want    []WithdrawalChange
	}{
		{"fits", usd(6000), open, nil},
		{"more than fits", usd(10000), open, nil},
		{"no open withdrawals", usd(-500), nil, nil},
		{"newest reduced", usd(5500), open, []WithdrawalChange{{ID: 3, From: usd(1000), To: usd(500)}}},
		{"newest cancelled exactly", usd(5000), open, []WithdrawalChange{{ID: 3, From: usd(1000), To: usd(0), Cancelled: true}}},
		{"newest cancelled, next reduced", usd(4000), open, []WithdrawalChange{
			{ID: 3, From: usd(1000), To: usd(0), Cancelled: true},
			{ID: 2, From: usd(2000), To: usd(1000)},
		}},
		{"zero balance cancels all", usd(0), open, []WithdrawalChange{
			{ID: 3, From: usd(1000), To: usd(0), Cancelled: true},
			{ID: 2, From: usd(2000), To: usd(0), Cancelled: true},
			{ID: 1, From: usd(3000), To: usd(0), Cancelled: true},
		}},
		{"negative balance fits zero", usd(-700), open, []WithdrawalChange{
			{ID: 3, From: usd(1000), To: usd(0), Cancelled: true},
			{ID: 2, From: usd(2000), To: usd(0), Cancelled: true},
			{ID: 1, From: usd(3000), To: usd(0), Cancelled: true},
		}},
		{"one cent over", usd(5999), open, []WithdrawalChange{{ID: 3, From: usd(1000), To: usd(999)}}},
		{"vnd", Amount{150, VND}, []Withdrawal{{ID: 9, Amount: Amount{100, VND}}, {ID: 10, Amount: Amount{100, VND}}},
			[]WithdrawalChange{{ID: 10, From: Amount{100, VND}, To: Amount{50, VND}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FitWithdrawals(tc.balance, tc.open)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("FitWithdrawals(%v) = %+v, want %+v", tc.balance, got, tc.want)
			}
		})
	}
}

func TestFitWithdrawalsErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		balance Amount
		open    []Withdrawal
		err     error
	}{
		{"mixed currency", Amount{0, USD}, []Withdrawal{{ID: 1, Amount: Amount{1, EUR}}}, ErrCurrencyMismatch},
		{"zero withdrawal", Amount{0, USD}, []Withdrawal{{ID: 1, Amount: Amount{0, USD}}}, ErrInvalid},
		{"bad currency", Amount{0, "GBP"}, nil, ErrUnsupportedCurrency},
		{"total overflows", Amount{0, USD}, []Withdrawal{{ID: 1, Amount: Amount{math.MaxInt64, USD}}, {ID: 2, Amount: Amount{1, USD}}}, ErrOverflow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := FitWithdrawals(tc.balance, tc.open); !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
		})
	}
}

func TestPaidOut(t *testing.T) {
	eur := func(ms ...int64) []Amount {
		out := make([]Amount, len(ms))
		for i, m := range ms {
			out[i] = Amount{m, EUR}
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		commissions []Amount
		paid        int64
		want        int
	}{
		{"nothing paid", eur(100, 200), 0, 0},
		{"first covered exactly", eur(100, 200), 100, 1},
		{"first covered, second partly", eur(100, 200), 299, 1},
		{"both covered", eur(100, 200), 300, 2},
		{"overpaid", eur(100, 200), 1000, 2},
		{"oldest first: a small later one is not paid before", eur(500, 10), 100, 0},
		{"zero commission after the covered prefix", eur(100, 0, 50), 100, 2},
		{"none", nil, 100, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PaidOut(tc.commissions, Amount{tc.paid, EUR})
			if err != nil || got != tc.want {
				t.Fatalf("PaidOut(%v, %d) = %d, %v; want %d", tc.commissions, tc.paid, got, err, tc.want)
			}
		})
	}
	if _, err := PaidOut(eur(1), Amount{1, USD}); !errors.Is(err, ErrCurrencyMismatch) {
		t.Fatalf("mismatch: err = %v", err)
	}
	if _, err := PaidOut(eur(-1), Amount{1, EUR}); !errors.Is(err, ErrNegative) {
		t.Fatalf("negative commission: err = %v", err)
	}
	if _, err := PaidOut(eur(1), Amount{-1, EUR}); !errors.Is(err, ErrNegative) {
		t.Fatalf("negative paid: err = %v", err)
	}
}
