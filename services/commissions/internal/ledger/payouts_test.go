package ledger_test

import (
	"testing"

	"github.com/svc-dev/svc/services/commissions/internal/ledger"
)

// A program's payout takes the program's balance less its open payouts,
// never negative, whatever the partner's balance in other programs.
func TestProgramAvailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    ledger.ProgramFunds
		want int64
	}{
		{"all of the program's money", ledger.ProgramFunds{Earned: 8000}, 8000},
		{"less what was paid and what is open", ledger.ProgramFunds{Earned: 8000, Paid: 3000, Open: 1000}, 4000},
		{"a refund after a payout leaves nothing", ledger.ProgramFunds{Earned: 1000, Paid: 3000}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ledger.ProgramAvailable(tc.f); got != tc.want {
				t.Fatalf("ProgramAvailable(%+v) = %d, want %d", tc.f, got, tc.want)
			}
		})
	}
}
