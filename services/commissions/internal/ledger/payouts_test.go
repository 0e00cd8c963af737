package ledger_test

import (
	"testing"

	"github.com/svc-dev/svc/services/commissions/internal/ledger"
)

// A program's payout takes the program's balance less its open payouts,
// never more than the partner's whole available balance, never negative.
func TestProgramAvailable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		f       ledger.ProgramFunds
		partner int64
		want    int64
	}{
		{"all of the program's money", ledger.ProgramFunds{Earned: 8000}, 13000, 8000},
		{"less what was paid and what is open", ledger.ProgramFunds{Earned: 8000, Paid: 3000, Open: 1000}, 13000, 4000},
		{"capped by the partner's available balance", ledger.ProgramFunds{Earned: 8000}, 5000, 5000},
		{"a refund after a payout leaves nothing", ledger.ProgramFunds{Earned: 1000, Paid: 3000}, 9000, 0},
		{"a partner in debt elsewhere", ledger.ProgramFunds{Earned: 8000}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ledger.ProgramAvailable(tc.f, tc.partner); got != tc.want {
				t.Fatalf("ProgramAvailable(%+v, %d) = %d, want %d", tc.f, tc.partner, got, tc.want)
			}
		})
	}
}
