package money

import "fmt"

// Withdrawal is an open withdrawal of a partner's balance.
type Withdrawal struct {
	ID     int64
	Amount Amount
}

// WithdrawalChange is a reduction of an open withdrawal.
type WithdrawalChange struct {
	ID       int64
	From, To Amount
	// Cancelled: reduced to zero; the withdrawal is cancelled.
	Cancelled bool
}

// FitWithdrawals reduces open withdrawals so that their total fits the
// balance: after a deduction the open withdrawals may add up to at most
// max(balance, 0). open is in creation order, oldest first; the newest is
// reduced first, then the one before, and so on. A withdrawal reduced to
// zero is cancelled. It returns only the withdrawals that change, newest
// first; none when the total already fits. All amounts share the
// balance's currency (ErrCurrencyMismatch otherwise) and are positive.
func FitWithdrawals(balance Amount, open []Withdrawal) ([]WithdrawalChange, error) {
	if !balance.Currency.Valid() {
		return nil, fmt.Errorf("balance: %w: %q", ErrUnsupportedCurrency, string(balance.Currency))
	}
	var total int64
	for _, w := range open {
		if w.Amount.Currency != balance.Currency {
			return nil, fmt.Errorf("withdrawal %d: %w: %s against a %s balance", w.ID, ErrCurrencyMismatch, w.Amount.Currency, balance.Currency)
		}
		if w.Amount.Minor <= 0 {
			return nil, fmt.Errorf("withdrawal %d: %w: %d", w.ID, ErrInvalid, w.Amount.Minor)
		}
		var err error
		if total, err = addNonNeg(total, w.Amount.Minor); err != nil {
			return nil, fmt.Errorf("open withdrawals total: %w", err)
		}
	}
	excess := total - max(balance.Minor, 0)
	var changes []WithdrawalChange
	for i := len(open) - 1; i >= 0 && excess > 0; i-- {
		w := open[i]
		cut := min(excess, w.Amount.Minor)
		excess -= cut
		to := Amount{Minor: w.Amount.Minor - cut, Currency: w.Amount.Currency}
		changes = append(changes, WithdrawalChange{ID: w.ID, From: w.Amount, To: to, Cancelled: to.Minor == 0})
	}
	return changes, nil
}

// PaidOut says how many of a partner's commissions are paid out: a
// commission is paid out when the partner's paid withdrawals in its currency
// cover it, oldest commission first. commissions are the credited amounts
// (after refund deductions) in creation order, all in paid's currency; the
// first n are paid out, where n is the longest prefix whose total is at
// most paid. A commission of zero after the paid-out prefix's last one is
// paid out too (nothing of it is owed).
func PaidOut(commissions []Amount, paid Amount) (n int, err error) {
	if !paid.Currency.Valid() {
		return 0, fmt.Errorf("paid: %w: %q", ErrUnsupportedCurrency, string(paid.Currency))
	}
	if paid.Minor < 0 {
		return 0, fmt.Errorf("paid: %w: %d", ErrNegative, paid.Minor)
	}
	for _, c := range commissions {
		if c.Currency != paid.Currency {
			return 0, fmt.Errorf("commission: %w: %s against %s paid", ErrCurrencyMismatch, c.Currency, paid.Currency)
		}
		if c.Minor < 0 {
			return 0, fmt.Errorf("commission: %w: %d", ErrNegative, c.Minor)
		}
	}
	var covered int64
	for i, c := range commissions {
		if c.Minor > paid.Minor-covered {
			return i, nil
		}
		covered += c.Minor
	}
	return len(commissions), nil
}
