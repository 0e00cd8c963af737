package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/commissions/internal/money"
)

// LeadInput is a settled lead (tracking's LeadRecorded with status
// settled): provisional leads are not settled and must not be passed.
type LeadInput struct {
	ProgramID  int64
	CustomerID int64
	// ClickID is the customer's click id (the lead event's).
	ClickID string
	// PartnerID: the customer's first partner, credited with the lead.
	PartnerID int64
	Test      bool
}

// LeadResult is the lead's commission, or why there is none (a
// money.Reason).
type LeadResult struct {
	Commission   *Commission
	NoCommission string
}

// RecordLead creates the per-lead commission of a settled lead
// (money.Terms.LeadCommission: the program's lead_commission in its
// currency; none when it is 0 or the lead a test), with the same hold as a
// sale commission. A customer earns at most one lead commission per program
// (a unique key): recording the lead again answers the commission that
// exists, so redelivered lead events are harmless.
func (s *Service) RecordLead(ctx context.Context, in LeadInput) (LeadResult, error) {
	if in.ProgramID <= 0 || in.CustomerID <= 0 {
		return LeadResult{}, fmt.Errorf("%w: lead of customer %d in program %d", ErrInvalidInput, in.CustomerID, in.ProgramID)
	}
	if in.PartnerID == 0 {
		return LeadResult{}, ErrPartnerRequired
	}
	now := s.now().UTC()
	var res LeadResult
	err := s.store.Atomic(ctx, func(tx Tx) error {
		res = LeadResult{}
		prog, err := tx.Program(ctx, in.ProgramID)
		if err != nil {
			return err
		}
		terms, err := money.NewTerms(prog.Terms)
		if err != nil {
			return fmt.Errorf("program %d: %w: %w", prog.ID, ErrProgramUnknown, err)
		}
		d := terms.LeadCommission(in.Test)
		if !d.Due {
			res.NoCommission = string(d.Reason)
			return nil
		}
		c := Commission{
			ProgramID: in.ProgramID, PartnerID: in.PartnerID, CustomerID: in.CustomerID, CustomerClickID: in.ClickID, Kind: KindLead,
			Status: money.StatusPending, Amount: d.Amount, CreatedAt: now,
			HoldUntil: now.Add(time.Duration(max(prog.HoldDays, 0)) * 24 * time.Hour),
		}
		if prog.HoldDays <= 0 {
			c.Status, c.Credited, c.ApprovedAt = money.StatusApproved, true, &now
		}
		created, err := tx.InsertCommission(ctx, &c)
		if err != nil {
			return err
		}
		if !created {
			existing, ok, err := tx.LeadCommission(ctx, in.ProgramID, in.CustomerID)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("lead of customer %d: commission neither created nor found: %w", in.CustomerID, errkind.Internal)
			}
			res.Commission = &existing
			return nil
		}
		if c.Credited {
			if _, err := tx.PostEntry(ctx, Entry{
				PartnerID: c.PartnerID, Delta: c.Amount, Kind: EntryCredit, CommissionID: c.ID, ProgramID: c.ProgramID, At: now,
			}); err != nil {
				return err
			}
		}
		res.Commission = &c
		return nil
	})
	if err != nil {
		return LeadResult{}, err
	}
	return res, nil
}
