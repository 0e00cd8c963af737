package ledger

import (
	"context"
	"fmt"
)

// ReasonChargeback is the refund reason of a dispute closed lost.
const ReasonChargeback = "chargeback"

// OpenDispute records that the processor opened dispute disputeID on the
// sale: while it is open, ApproveDue does not approve the sale's commission
// (a commission approved before stays credited). It is idempotent per
// dispute id: opening it again (a redelivered event) changes nothing, and
// so does opening it after it closed. It locks the sale, the dispute, then
// the sale's commission (if any), so the dispute and an approval of that
// commission apply one after the other. A sale unknown, or still reserved, is
// ErrSaleNotFound; a dispute id opened before on another sale is
// ErrDisputeConflict. No event is written (there is no dispute event yet).
func (s *Service) OpenDispute(ctx context.Context, saleID int64, disputeID string) error {
	if saleID <= 0 || disputeID == "" {
		return fmt.Errorf("%w: dispute %q of sale %d", ErrInvalidInput, disputeID, saleID)
	}
	now := s.now().UTC()
	return s.store.Atomic(ctx, func(tx Tx) error {
		sale, err := tx.LockSale(ctx, saleID)
		if err != nil {
			return err
		}
		if sale.Reserved {
			return fmt.Errorf("sale %d is reserved, not recorded: %w", saleID, ErrSaleNotFound)
		}
		d := Dispute{DisputeID: disputeID, SaleID: sale.ID, Status: DisputeOpen, OpenedAt: now}
		created, err := tx.InsertDispute(ctx, &d)
		if err != nil {
			return err
		}
		if !created {
			existing, err := tx.LockDispute(ctx, disputeID)
			if err != nil {
				return err
			}
			if existing.SaleID != sale.ID {
				return fmt.Errorf("dispute %q is of sale %d, not %d: %w", disputeID, existing.SaleID, sale.ID, ErrDisputeConflict)
			}
			return nil
		}
		// Wait for an approval holding the commission: it commits first
		// (the commission stays credited) or finds the dispute open.
		_, _, err = tx.SaleCommission(ctx, sale.ID)
		return err
	})
}

// DisputeResult answers CloseDispute.
type DisputeResult struct {
	Dispute Dispute
	// Closed: this call closed the dispute. False when it was closed
	// before (nothing written, Dispute is as it stands).
	Closed bool
	// Refund is the chargeback's reversal when this call closed the
	// dispute lost (nil otherwise): Refund's result, its outcome counted
	// and its notifications sent as Refund's are.
	Refund *RefundResult
}

// CloseDispute closes an open dispute with the processor's outcome, won or
// lost, in one transaction that locks the sale, then the dispute:
//   - won: the hold is released; the next ApproveDue approves the commission
//     if its hold ended (and no other dispute of the sale is open);
//   - lost: the commission is reversed exactly as by a full refund (Refund
//     with amount 0) with reason chargeback, the refund row keyed
//     "dispute:<id>": a pending commission is reversed without balance
//     change, a credited one is deducted from the balance, with the
//     partner's notification (and the advertiser's manual review when it
//     was paid out);
//   - closed before (whatever the outcome now): nothing changes, Closed is
//     false.
//
// An unknown dispute id is ErrDisputeNotFound.
func (s *Service) CloseDispute(ctx context.Context, disputeID, outcome string) (DisputeResult, error) {
	if disputeID == "" || (outcome != DisputeWon && outcome != DisputeLost) {
		return DisputeResult{}, fmt.Errorf("%w: close dispute %q as %q", ErrInvalidInput, disputeID, outcome)
	}
	// The sale comes first in the lock order: find it, lock it, then lock
	// the dispute and look at its status again.
	d, err := s.store.Dispute(ctx, disputeID)
	if err != nil {
		return DisputeResult{}, err
	}
	now := s.now().UTC()
	var res DisputeResult
	var refund RefundResult
	err = s.store.Atomic(ctx, func(tx Tx) error {
		res, refund = DisputeResult{}, RefundResult{}
		// The dispute id names one sale for good (InsertDispute).
		sale, err := tx.LockSale(ctx, d.SaleID)
		if err != nil {
			return err
		}
		if res.Dispute, err = tx.LockDispute(ctx, disputeID); err != nil {
			return err
		}
		if res.Dispute.Status != DisputeOpen {
			return nil
		}
		res.Dispute.Status, res.Dispute.ClosedAt, res.Closed = outcome, &now, true
		if err := tx.CloseDispute(ctx, res.Dispute); err != nil {
			return err
		}
		if outcome == DisputeWon {
			return nil
		}
		// A full refund (amount 0: all that is left), keyed by the dispute.
		in := RefundInput{ProgramID: sale.ProgramID, TransactionID: sale.TransactionID, Reason: ReasonChargeback}
		return s.refundLocked(ctx, tx, sale, in, "dispute:"+disputeID, now, &refund)
	})
	if err != nil {
		return DisputeResult{}, err
	}
	if res.Closed && outcome == DisputeLost {
		s.refunded(refund)
		res.Refund = &refund
	}
	return res, nil
}
