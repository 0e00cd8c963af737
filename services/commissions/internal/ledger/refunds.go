package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/services/commissions/internal/money"
)

// Refund outcomes beyond money's reversed, refunded and skipped.
const (
	OutcomeNoCommission = "no_commission"
	// SkipAlreadyApplied is the skip reason of a refund applied before (same
	// refund_id, or without one the same amount).
	SkipAlreadyApplied = "refund already applied"
)

// RefundInput is one refund of a sale (POST /track/refund, or the
// processor's refund event).
type RefundInput struct {
	ProgramID     int64
	TransactionID string
	// AmountCents: this refund in the sale's minor units; 0 refunds all
	// that is left.
	AmountCents int64
	// RefundID: the brand's refund id ("" when not sent); ignored when
	// AmountCents is 0.
	RefundID string
	// Reason: refund_reason, else reason (the transport decides).
	Reason string
}

// RefundResult answers a refund.
type RefundResult struct {
	// Outcome: reversed, refunded, skipped or no_commission.
	Outcome      string
	SkipReason   string
	SaleID       int64
	CommissionID int64
	// Applied is the part of the sale refunded by this call.
	Applied int64
	// Deduction is the commission share this refund covered
	// (deductionAmount), Debit what was taken from the balance.
	Deduction money.Amount
	Debit     money.Amount
	// notifyErr is why the refund's notifications could not be written
	// with it (they stay pending for the backstop); notifyRefund names
	// the refund row.
	notifyErr    error
	notifyRefund int64
}

// Refund applies the spec's refund table to the sale of TransactionID in
// ProgramID, in one transaction that locks the sale first, so concurrent
// refunds of one sale apply one after the other:
//   - no such sale in the program: ErrSaleNotFound;
//   - a positive amount whose refund_id (or, without one, whose amount) was
//     applied before: skipped, "refund already applied", nothing written;
//   - a sale without commission: its refunded total grows (capped) and the
//     outcome is no_commission;
//   - otherwise money.ApplyRefund: a reversed commission is skipped
//     ("already reversed"); else the sale's refunded total, the refund, the
//     commission's status and refunded amount, the balance deduction when
//     it was credited (open withdrawals reduced newest first to fit), the
//     partner's notification and, when the commission was already paid out,
//     the advertiser's manual-review warning, with their events.
//
// A non-test sale whose commission is undecided gets it decided first (as
// EnsureCommission), so a refund never races the backstop.
func (s *Service) Refund(ctx context.Context, in RefundInput) (RefundResult, error) {
	if in.TransactionID == "" || in.AmountCents < 0 {
		return RefundResult{}, fmt.Errorf("%w: refund of %q for %d", ErrInvalidInput, in.TransactionID, in.AmountCents)
	}
	res, err := s.refunds.Do(ctx, in)
	if err != nil {
		return RefundResult{}, err
	}
	s.refunded(res)
	return res, nil
}

// refundKey keeps two refunds of one sale out of one transaction: the
// second would read the sale before the first's writes.
func refundKey(in RefundInput) string { return in.TransactionID }

// errSameSale fails a group of refunds naming one transaction id twice
// (the group's Key keeps them apart): each then runs alone.
var errSameSale = errors.New("two refunds of one sale in one transaction")

// refundGroup applies a group of refunds (of different sales) in one
// transaction, each as it would be alone; a sale not found is its call's
// own answer, any other error fails the group (each then runs alone).
// Sales are locked in the calls' transaction id order, so two groups never
// wait on each other in a cycle.
func (s *Service) refundGroup(ctx context.Context, ins []RefundInput) ([]pg.GroupResult[RefundResult], error) {
	order := make([]int, len(ins))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ins[a].TransactionID, ins[b].TransactionID) })
	for k := 1; k < len(order); k++ {
		if ins[order[k-1]].TransactionID == ins[order[k]].TransactionID {
			return nil, errSameSale
		}
	}
	now := s.now().UTC()
	var out []pg.GroupResult[RefundResult]
	err := s.store.Atomic(ctx, func(tx Tx) error {
		out = make([]pg.GroupResult[RefundResult], len(ins))
		refundID := func(in RefundInput) string {
			if in.AmountCents == 0 {
				return ""
			}
			return in.RefundID
		}
		if len(ins) > 1 {
			locks := make([]RefundLock, len(order))
			for k, i := range order {
				locks[k] = RefundLock{ProgramID: ins[i].ProgramID, TransactionID: ins[i].TransactionID, RefundID: refundID(ins[i]), Requested: ins[i].AmountCents}
			}
			if err := tx.ReadAheadRefunds(ctx, locks); err != nil {
				return err
			}
		}
		for _, i := range order {
			in := ins[i]
			refundID := refundID(in)
			sale, err := tx.LockSaleForRefund(ctx, in.ProgramID, in.TransactionID, refundID, in.AmountCents)
			if errors.Is(err, ErrSaleNotFound) {
				out[i].Err = err // nothing read is locked, nothing written
				continue
			}
			if err != nil {
				return err
			}
			if err := s.refundLocked(ctx, tx, sale, in, refundID, now, &out[i].Out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// refunded is what follows a committed refund: it is counted, and when
// its notifications could not be written with it, that is reported (they
// stay pending for the backstop, NotifyPending; the answer is unchanged).
func (s *Service) refunded(res RefundResult) {
	s.onRefund(res.Outcome)
	if res.notifyErr != nil {
		s.onNotifyError(fmt.Errorf("notifications of refund %d (left for the backstop): %w", res.notifyRefund, res.notifyErr))
	}
}

// refundLocked applies a refund to a sale locked by the transaction (Refund's
// table, after the sale lookup); refundID is what the refund row keeps.
func (s *Service) refundLocked(ctx context.Context, tx Tx, sale Sale, in RefundInput, refundID string, now time.Time, res *RefundResult) error {
	res.SaleID = sale.ID
	if !sale.Test && sale.CommissionState == "" {
		d, err := s.decide(ctx, tx, sale, now)
		if err != nil {
			return err
		}
		if d.state == "" {
			return fmt.Errorf("refund of sale %d: %w", sale.ID, d.cause)
		}
	}
	c, hasCommission, err := tx.SaleCommission(ctx, sale.ID)
	if err != nil {
		return err
	}
	if hasCommission {
		res.CommissionID = c.ID
		res.Deduction = money.Amount{Currency: c.Amount.Currency}
		res.Debit = res.Deduction
	}
	if in.AmountCents > 0 {
		applied, err := tx.RefundApplied(ctx, sale.ID, refundID, in.AmountCents)
		if err != nil {
			return err
		}
		if applied {
			res.Outcome, res.SkipReason = string(money.OutcomeSkipped), SkipAlreadyApplied
			if !hasCommission {
				res.Outcome, res.SkipReason = OutcomeNoCommission, ""
			}
			return nil
		}
	}
	if !hasCommission {
		return s.refundWithoutCommission(ctx, tx, sale, in, refundID, now, res)
	}
	return s.refundCommission(ctx, tx, sale, c, in, refundID, now, res)
}

// SendRefundNotifications writes a refund's pending notifications, with
// their events, once: a refund whose notifications were sent (by another
// caller) sends nothing.
func (s *Service) SendRefundNotifications(ctx context.Context, refundID int64) error {
	return s.store.Atomic(ctx, func(tx Tx) error {
		notes, err := tx.TakeRefundNotifications(ctx, refundID)
		if err != nil {
			return err
		}
		for i := range notes {
			if err := tx.InsertNotification(ctx, &notes[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// NotifyPending sends the notifications still pending of up to limit
// refunds created before olderThan (the backstop): how many refunds it
// sent, and the first error.
func (s *Service) NotifyPending(ctx context.Context, olderThan time.Time, limit int) (int, error) {
	ids, err := s.store.RefundsToNotify(ctx, olderThan, limit)
	if err != nil {
		return 0, err
	}
	sent := 0
	var first error
	for _, id := range ids {
		if err := s.SendRefundNotifications(ctx, id); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		sent++
	}
	return sent, first
}

// refundWithoutCommission adds the refund to the sale's refunded total
// (capped; money.ApplyRefund over a zero commission does the arithmetic).
func (s *Service) refundWithoutCommission(ctx context.Context, tx Tx, sale Sale, in RefundInput, refundID string, now time.Time, res *RefundResult) error {
	res.Outcome = OutcomeNoCommission
	r, err := money.ApplyRefund(money.Refund{
		Commission: money.Amount{Currency: sale.Amount.Currency}, Status: money.StatusPending,
		SaleAmount: sale.Amount.Minor, SaleRefunded: sale.RefundedCents, Amount: in.AmountCents,
	})
	if err != nil {
		return internal(fmt.Sprintf("refund of sale %d", sale.ID), err)
	}
	res.Applied = r.Applied
	if r.Applied == 0 && in.AmountCents == 0 {
		return nil // nothing left, nothing to remember
	}
	if err := tx.SetSaleRefunded(ctx, sale.ID, r.SaleRefunded); err != nil {
		return err
	}
	sale.RefundedCents = r.SaleRefunded
	ref := Refund{SaleID: sale.ID, RefundID: refundID, Requested: in.AmountCents, Applied: r.Applied, Reason: in.Reason, CreatedAt: now}
	return tx.InsertRefund(ctx, &ref, sale)
}

func (s *Service) refundCommission(ctx context.Context, tx Tx, sale Sale, c Commission, in RefundInput, refundID string, now time.Time, res *RefundResult) error {
	r, err := money.ApplyRefund(money.Refund{
		Commission: c.Amount, Status: c.Status, Credited: c.Credited,
		SaleAmount: sale.Amount.Minor, SaleRefunded: sale.RefundedCents, Amount: in.AmountCents,
	})
	if err != nil {
		return internal(fmt.Sprintf("refund of sale %d", sale.ID), err)
	}
	res.Outcome, res.SkipReason = string(r.Outcome), r.SkipReason
	if r.Outcome == money.OutcomeSkipped {
		return nil
	}
	res.Applied, res.Deduction, res.Debit = r.Applied, r.Deduction, r.Debit

	// Was it paid out, before this refund reduced it?
	paidOut := false
	if c.Credited {
		if paidOut, err = s.paidOut(ctx, tx, c); err != nil {
			return err
		}
	}

	if err := tx.SetSaleRefunded(ctx, sale.ID, r.SaleRefunded); err != nil {
		return err
	}
	sale.RefundedCents = r.SaleRefunded
	notes, err := s.refundNotifications(ctx, tx, sale, c, r, in.Reason, paidOut, now)
	if err != nil {
		return err
	}
	ref := Refund{
		SaleID: sale.ID, CommissionID: c.ID, RefundID: refundID, Requested: in.AmountCents, Applied: r.Applied,
		Deduction: r.Deduction.Minor, Debited: r.Debit.Minor, Currency: c.Amount.Currency, Reason: in.Reason,
		Notifications: notes, CreatedAt: now,
	}
	if err := tx.InsertRefund(ctx, &ref, sale); err != nil {
		return err
	}
	if len(ref.Notifications) > 0 {
		res.notifyRefund = ref.ID
		err := tx.NotifyRefundAtCommit(ctx, ref.ID, ref.Notifications, func(err error) { res.notifyErr = err })
		if err != nil {
			return err
		}
	}
	from := c.Status
	c.Status, c.Refunded = r.Status, c.Refunded+r.Deduction.Minor
	if in.Reason != "" {
		c.Reason = in.Reason
	}
	if err := tx.UpdateCommission(ctx, c, StatusChange{From: from, Deduction: r.Deduction.Minor, At: now}); err != nil {
		return err
	}
	if r.Debit.Minor > 0 {
		bal, err := tx.PostEntry(ctx, Entry{
			PartnerID: c.PartnerID, Delta: money.Amount{Minor: -r.Debit.Minor, Currency: r.Debit.Currency}, Kind: EntryDeduction,
			CommissionID: c.ID, RefundID: ref.ID, ProgramID: c.ProgramID, At: now,
		})
		if err != nil {
			return err
		}
		if err := s.fitWithdrawals(ctx, tx, c, bal, now); err != nil {
			return err
		}
	}

	return nil
}

// refundNotifications are the notifications a refund of c sends: the
// partner's, and the advertiser's manual-review warning when c was already
// paid out.
func (s *Service) refundNotifications(ctx context.Context, tx Tx, sale Sale, c Commission, r money.RefundResult, reason string, paidOut bool, now time.Time) ([]Notification, error) {
	kind := NotifyCommissionRefunded
	if r.Status == money.StatusReversed {
		kind = NotifyCommissionReversed
	}
	payload := map[string]any{
		"commission_id": c.ID, "sale_id": sale.ID, "transaction_id": sale.TransactionID, "program_id": sale.ProgramID,
		"status": string(r.Status), "deduction": r.Deduction.Minor, "debited": r.Debit.Minor,
		"currency": string(c.Amount.Currency), "reason": reason,
		"refunded_cents": r.Applied, "sale_currency": string(sale.Amount.Currency),
	}
	out := []Notification{{
		RecipientKind: RecipientPartner, RecipientID: c.PartnerID, Kind: kind, Payload: payload, ProgramID: sale.ProgramID, CreatedAt: now,
	}}
	if !paidOut {
		return out, nil
	}
	prog, err := tx.Program(ctx, sale.ProgramID)
	if err != nil {
		return nil, fmt.Errorf("advertiser of program %d: %w", sale.ProgramID, err)
	}
	review := map[string]any{"partner_id": c.PartnerID}
	for k, v := range payload {
		review[k] = v
	}
	return append(out, Notification{
		RecipientKind: RecipientAdvertiser, RecipientID: prog.AdvertiserID, Kind: NotifyRefundReview, Payload: review,
		ProgramID: sale.ProgramID, CreatedAt: now,
	}), nil
}

// RefundToInput is the processor's cumulative refund of a sale (a
// charge.refunded event: the charge's amount_refunded).
type RefundToInput struct {
	ProgramID     int64
	TransactionID string
	// CumulativeCents: all that the processor has refunded of the sale so
	// far, in the sale's minor units.
	CumulativeCents int64
	// RefundID keys the part it applies (required), e.g. the charge id,
	// ":" and the cumulative amount.
	RefundID string
	Reason   string
}

// RefundTo refunds the sale up to CumulativeCents: in the transaction that
// locks the sale, the part not yet refunded (CumulativeCents minus the
// sale's refunded total, whichever refunds raised it: ProcessorRefund or
// Refund of a processor refund id, the refund route, an earlier RefundTo,
// a lost dispute) is applied
// exactly as Refund applies an amount, with RefundID. Nothing left to apply
// (the part is 0 or less) is skipped, "refund already applied", and writes
// nothing. So a refund.created applied by Refund and a later charge.refunded
// whose cumulative includes it apply that refund once, and concurrent or
// redelivered calls with one cumulative apply it once.
func (s *Service) RefundTo(ctx context.Context, in RefundToInput) (RefundResult, error) {
	if in.TransactionID == "" || in.RefundID == "" || in.CumulativeCents < 0 {
		return RefundResult{}, fmt.Errorf("%w: refund of %q to %d (refund id %q)", ErrInvalidInput, in.TransactionID, in.CumulativeCents, in.RefundID)
	}
	now := s.now().UTC()
	var res RefundResult
	err := s.store.Atomic(ctx, func(tx Tx) error {
		res = RefundResult{}
		sale, err := tx.LockSaleByTransaction(ctx, in.ProgramID, in.TransactionID)
		if err != nil {
			return err
		}
		part := in.CumulativeCents - sale.RefundedCents
		if part > 0 {
			ref := RefundInput{ProgramID: in.ProgramID, TransactionID: in.TransactionID, AmountCents: part, RefundID: in.RefundID, Reason: in.Reason}
			return s.refundLocked(ctx, tx, sale, ref, in.RefundID, now, &res)
		}
		return s.alreadyApplied(ctx, tx, sale, &res)
	})
	if err != nil {
		return RefundResult{}, err
	}
	s.refunded(res)
	return res, nil
}

// ProcessorRefundInput is one refund of the processor (refund.created or
// refund.updated with status succeeded).
type ProcessorRefundInput struct {
	ProgramID     int64
	TransactionID string
	// RefundID is the processor's refund id (re_…), required.
	RefundID string
	// AmountCents is this refund's own amount (positive).
	AmountCents int64
	Reason      string
}

// ProcessorRefund applies a processor refund, whichever of its events
// arrives first: its own (this call) or a charge.refunded whose cumulative
// includes it (RefundTo). In the transaction that locks the sale, the
// refund's id and amount are recorded once (a refund id seen before is
// skipped, "refund already applied", writing nothing); the processor's
// refunds of the sale then add up to a lower bound of its cumulative
// refunded amount, as every charge.refunded's is. What this raises above
// the sale's refunded total is applied, as Refund applies an amount, with
// RefundID; nothing (a charge.refunded counted it already) is skipped,
// "refund already applied", with only the id recorded. So no refund is
// applied twice, and once every event has arrived the sale is refunded
// exactly the processor's total.
func (s *Service) ProcessorRefund(ctx context.Context, in ProcessorRefundInput) (RefundResult, error) {
	if in.TransactionID == "" || in.RefundID == "" || in.AmountCents <= 0 {
		return RefundResult{}, fmt.Errorf("%w: processor refund %q of %q for %d", ErrInvalidInput, in.RefundID, in.TransactionID, in.AmountCents)
	}
	now := s.now().UTC()
	var res RefundResult
	err := s.store.Atomic(ctx, func(tx Tx) error {
		res = RefundResult{}
		sale, err := tx.LockSaleByTransaction(ctx, in.ProgramID, in.TransactionID)
		if err != nil {
			return err
		}
		total, seen, err := tx.ProcessorRefunds(ctx, sale.ID, in.RefundID)
		if err != nil {
			return err
		}
		if seen {
			return s.alreadyApplied(ctx, tx, sale, &res)
		}
		if err := tx.RecordProcessorRefund(ctx, sale.ID, in.RefundID, in.AmountCents, now); err != nil {
			return err
		}
		part := total + in.AmountCents - sale.RefundedCents
		if part <= 0 {
			return s.alreadyApplied(ctx, tx, sale, &res)
		}
		ref := RefundInput{ProgramID: in.ProgramID, TransactionID: in.TransactionID, AmountCents: min(part, in.AmountCents), RefundID: in.RefundID, Reason: in.Reason}
		return s.refundLocked(ctx, tx, sale, ref, in.RefundID, now, &res)
	})
	if err != nil {
		return RefundResult{}, err
	}
	s.refunded(res)
	return res, nil
}

// alreadyApplied answers a refund of a locked sale that applies nothing:
// skipped, "refund already applied" (no_commission without commission).
func (s *Service) alreadyApplied(ctx context.Context, tx Tx, sale Sale, res *RefundResult) error {
	res.SaleID = sale.ID
	res.Outcome, res.SkipReason = string(money.OutcomeSkipped), SkipAlreadyApplied
	c, ok, err := tx.SaleCommission(ctx, sale.ID)
	if err != nil {
		return err
	}
	if !ok {
		res.Outcome, res.SkipReason = OutcomeNoCommission, ""
		return nil
	}
	res.CommissionID = c.ID
	res.Deduction = money.Amount{Currency: c.Amount.Currency}
	res.Debit = res.Deduction
	return nil
}
