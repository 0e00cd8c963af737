package ledger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/svc-dev/svc/services/commissions/internal/money"
)

// ApproveDue approves every pending commission whose hold ended at now and
// credits its partner's balance, in transactions of ApproveBatch
// commissions. Several replicas may run it at once: each transaction locks
// its batch with SKIP LOCKED and re-checks the status, so every commission
// is approved and credited exactly once. It returns how many it approved.
func (s *Service) ApproveDue(ctx context.Context, now time.Time) (int, error) {
	now = now.UTC()
	total := 0
	for {
		n := 0
		err := s.store.Atomic(ctx, func(tx Tx) error {
			n = 0
			due, err := tx.DuePending(ctx, now, s.batch)
			if err != nil {
				return err
			}
			// Balances are locked in one order by every approver.
			slices.SortFunc(due, func(a, b Commission) int {
				return cmp.Or(cmp.Compare(a.PartnerID, b.PartnerID), cmp.Compare(a.Amount.Currency, b.Amount.Currency), cmp.Compare(a.ID, b.ID))
			})
			for _, c := range due {
				from := c.Status
				at := now
				c.Status, c.Credited, c.ApprovedAt = money.StatusApproved, true, &at
				if err := tx.UpdateCommission(ctx, c, StatusChange{From: from, At: now}); err != nil {
					return err
				}
				if _, err := tx.PostEntry(ctx, Entry{
					PartnerID: c.PartnerID, Delta: c.Amount, Kind: EntryCredit, CommissionID: c.ID, ProgramID: c.ProgramID, At: now,
				}); err != nil {
					return err
				}
			}
			n = len(due)
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("approve due commissions: %w", err)
		}
		total += n
		if n < s.batch {
			return total, nil
		}
	}
}

// ApprovalLag is how long the oldest pending commission due at now has
// been due (0 when none is): how late the approval scheduler is.
func (s *Service) ApprovalLag(ctx context.Context, now time.Time) (time.Duration, error) {
	since, ok, err := s.store.OldestDueSince(ctx, now)
	if err != nil || !ok {
		return 0, err
	}
	return max(now.Sub(since), 0), nil
}
