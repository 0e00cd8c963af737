package httpapi

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
)

func TestStatusAndMessage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		status  int
		message string
	}{
		{"decode error keeps its status", &httpkit.DecodeError{Status: 413, Message: "too big"}, 413, "too big"},
		{"field error is 400", &httpkit.FieldError{Field: "id", Want: "a positive integer"}, 400, "id must be a positive integer"},
		{"unknown commission is 404", fmt.Errorf("commission 9: %w", ledger.ErrCommissionNotFound), 404, "commission 9: commission not found"},
		{"unknown sale is 404", ledger.ErrSaleNotFound, 404, "sale not found for transaction_id"},
		{"more than available is 400", fmt.Errorf("%w: 5 requested", ledger.ErrInvalidAmount), 400, "invalid amount: 5 requested"},
		{"closed withdrawal is 409", fmt.Errorf("withdrawal 1 is paid: %w", ledger.ErrWithdrawalNotOpen), 409, "withdrawal 1 is paid: withdrawal is not open"},
		{"unsupported currency is 422", ledger.ErrUnsupportedCurrency, 422, "unsupported currency"},
		{"unknown error is 500", fmt.Errorf("boom"), http.StatusInternalServerError, "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Status(tc.err); got != tc.status {
				t.Errorf("Status = %d, want %d", got, tc.status)
			}
			if tc.status < 500 {
				if got := clientMessage(tc.err); got != tc.message {
					t.Errorf("message = %q, want %q", got, tc.message)
				}
			}
		})
	}
}
