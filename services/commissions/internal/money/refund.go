package money

import "fmt"

// Status is a commission's status (the spec's Commission status table).
type Status string

// The named commission statuses.
const (
	StatusPending  Status = "pending"
	StatusApproved Status = "approved"
	StatusRefunded Status = "refunded"
	StatusReversed Status = "reversed"
)

// RefundOutcome is the refund route's answer status.
type RefundOutcome string

// Refund outcomes with a commission (the route's `no_commission` is decided
// before, by the caller).
const (
	OutcomeReversed RefundOutcome = "reversed"
	OutcomeRefunded RefundOutcome = "refunded"
	OutcomeSkipped  RefundOutcome = "skipped"
)

// SkipAlreadyReversed is the reason the route answers for a commission that
// was already reversed.
const SkipAlreadyReversed = "already reversed"

// Refund is one refund of a sale that earned a commission.
type Refund struct {
	// Commission is the commission's full amount as created, before any
	// refund reduced it.
	Commission Amount
	Status     Status
	// Credited: the commission's amount was added to the partner's
	// balance (it was approved, and is not a test). A pending commission is
	// never credited, whatever this says; a refunded one is credited when it
	// was approved before its first refund, not when the refund cancelled it
	// while pending.
	Credited bool
	// SaleAmount is the sale's amount in minor units of its currency (> 0).
	SaleAmount int64
	// SaleRefunded is the sale's refunded total before this refund
	// (0 <= SaleRefunded <= SaleAmount).
	SaleRefunded int64
	// Amount is this refund in minor units of the sale (refund_amount_cents):
	// 0 refunds all that is left; more than is left is capped.
	Amount int64
}

// RefundResult is what a refund does.
type RefundResult struct {
	Outcome RefundOutcome
	// Status is the commission's status after the refund.
	Status Status
	// SkipReason is set when Outcome is skipped.
	SkipReason string
	// Applied is the part of the sale this refund refunds, after the cap.
	Applied int64
	// SaleRefunded is the sale's refunded total after this refund.
	SaleRefunded int64
	// Deduction is the commission share this refund covers (the route's
	// deductionAmount), in the commission's currency.
	Deduction Amount
	// Debit is what is taken from the partner's balance: Deduction when the
	// commission was credited, zero otherwise.
	Debit Amount
}

// Share is the commission share covered by a cumulative refunded total of
// the sale: round_half_up(commission × refunded / sale). It is 0 at 0,
// commission at sale, and never decreases as refunded grows.
func Share(commission, saleAmount, refunded int64) (int64, error) {
	if commission < 0 || saleAmount <= 0 || refunded < 0 || refunded > saleAmount {
		return 0, fmt.Errorf("%w: share of commission %d for %d of sale %d", ErrInvalid, commission, refunded, saleAmount)
	}
	return mulDivHalfUp(commission, refunded, saleAmount)
}

// ApplyRefund applies one refund of the sale to its commission:
//   - a reversed commission is skipped ("already reversed");
//   - the refund is this call's amount (0: all that is left), capped so the
//     sale's refunded total never exceeds the sale;
//   - the deduction is Share(after) − Share(before), so the deductions of
//     all refunds of a sale add up to exactly the commission once the sale
//     is fully refunded, whatever the split;
//   - when the sale's refunded total reaches the sale the commission becomes
//     reversed, otherwise refunded (an approved commission reduced by the
//     refunded fraction, a pending one cancelled whole by its first partial
//     refund; the deductionAmount of a not-credited commission is
//     informational);
//   - the balance is debited the deduction only when the commission was
//     credited.
func ApplyRefund(r Refund) (RefundResult, error) {
	if err := r.validate(); err != nil {
		return RefundResult{}, err
	}
	if r.Status == StatusReversed {
		return RefundResult{
			Outcome: OutcomeSkipped, Status: StatusReversed, SkipReason: SkipAlreadyReversed,
			SaleRefunded: r.SaleRefunded, Deduction: Amount{Currency: r.Commission.Currency}, Debit: Amount{Currency: r.Commission.Currency},
		}, nil
	}
	left := r.SaleAmount - r.SaleRefunded
	applied := left
	if r.Amount > 0 && r.Amount < left {
		applied = r.Amount
	}
	after := r.SaleRefunded + applied
	before, err := Share(r.Commission.Minor, r.SaleAmount, r.SaleRefunded)
	if err != nil {
		return RefundResult{}, err
	}
	upTo, err := Share(r.Commission.Minor, r.SaleAmount, after)
	if err != nil {
		return RefundResult{}, err
	}
	res := RefundResult{
		Outcome: OutcomeRefunded, Status: StatusRefunded,
		Applied: applied, SaleRefunded: after,
		Deduction: Amount{Minor: upTo - before, Currency: r.Commission.Currency},
		Debit:     Amount{Currency: r.Commission.Currency},
	}
	if after == r.SaleAmount {
		res.Outcome, res.Status = OutcomeReversed, StatusReversed
	}
	if r.Credited && r.Status != StatusPending {
		res.Debit = res.Deduction
	}
	return res, nil
}

func (r Refund) validate() error {
	switch r.Status {
	case StatusPending, StatusApproved, StatusRefunded, StatusReversed:
	default:
		return fmt.Errorf("%w: commission status %q", ErrInvalid, string(r.Status))
	}
	if !r.Commission.Currency.Valid() {
		return fmt.Errorf("commission: %w: %q", ErrUnsupportedCurrency, string(r.Commission.Currency))
	}
	if r.Commission.Minor < 0 {
		return fmt.Errorf("commission: %w: %d", ErrNegative, r.Commission.Minor)
	}
	if r.SaleAmount <= 0 {
		return fmt.Errorf("%w: sale amount %d is not positive", ErrInvalid, r.SaleAmount)
	}
	if r.SaleRefunded < 0 || r.SaleRefunded > r.SaleAmount {
		return fmt.Errorf("%w: sale refunded total %d outside 0..%d", ErrInvalid, r.SaleRefunded, r.SaleAmount)
	}
	if r.Amount < 0 {
		return fmt.Errorf("refund: %w: %d", ErrNegative, r.Amount)
	}
	return nil
}
