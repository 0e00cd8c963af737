package ledger_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
)

func TestErrorKinds(t *testing.T) {
	cases := []struct {
		name string
		err  error
		kind error
	}{
		{"duplicate transaction id is a conflict", fmt.Errorf("record: %w", &ledger.DuplicateSaleError{SaleID: 7}), errkind.Conflict},
		{"sale not found", ledger.ErrSaleNotFound, errkind.NotFound},
		{"no partner: sale stored, 400", &ledger.CommissionNotCreatedError{SaleID: 7, Cause: ledger.ErrPartnerRequired}, errkind.Invalid},
		{"terms unavailable: sale stored, 500", &ledger.CommissionNotCreatedError{SaleID: 7, Cause: ledger.ErrProgramUnknown}, errkind.Internal},
		{"withdrawal not open", ledger.ErrWithdrawalNotOpen, errkind.Conflict},
		{"withdrawal amount", ledger.ErrInvalidAmount, errkind.Invalid},
		{"unsupported currency", ledger.ErrUnsupportedCurrency, errkind.Unprocessable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := errkind.Of(c.err); got != c.kind {
				t.Fatalf("kind = %v, want %v", got, c.kind)
			}
		})
	}
	var dup *ledger.DuplicateSaleError
	if !errors.As(fmt.Errorf("x: %w", &ledger.DuplicateSaleError{SaleID: 42}), &dup) || dup.SaleID != 42 {
		t.Fatal("the duplicate's sale id is lost")
	}
}

func TestNewRequiresStoreAndClock(t *testing.T) {
	if _, err := ledger.New(ledger.Config{Now: time.Now}); err == nil {
		t.Fatal("no store accepted")
	}
}
