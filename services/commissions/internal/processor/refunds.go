package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/svc-dev/svc/services/commissions/internal/ledger"
)

// Event types of refunds and disputes.
const (
	TypeChargeRefunded = "charge.refunded"
	TypeRefundCreated  = "refund.created"
	TypeRefundUpdated  = "refund.updated"
	TypeDisputeCreated = "charge.dispute.created"
	TypeDisputeClosed  = "charge.dispute.closed"
)

// Outcomes of refund and dispute events.
const (
	// OutcomeAwaitingPayment: the payment the event names is not recorded
	// (yet): the event is kept and applied when it is (applyWaiting, and
	// the backstop's RetryWaiting).
	OutcomeAwaitingPayment = "awaiting_payment"
	// OutcomeRefundApplied: the reversal ran (the sale's refunded total
	// grew; its commission reversed or reduced when it has one).
	OutcomeRefundApplied = "refund_applied"
	// OutcomeRefundSkipped: nothing left to apply (the refund was applied
	// before under another event, or the commission is reversed already).
	OutcomeRefundSkipped = "refund_skipped"
	// OutcomeRefundNotSucceeded: a refund pending, failed or canceled moves
	// no money; its succeeded update does.
	OutcomeRefundNotSucceeded = "refund_not_succeeded"
	OutcomeCurrencyMismatch   = "currency_mismatch"
	OutcomeDisputeOpened      = "dispute_opened"
	OutcomeDisputeWon         = "dispute_won"
	OutcomeDisputeLost        = "dispute_lost"
	// OutcomeDisputeClosedBefore: a close (or open) of a dispute closed
	// before changes nothing.
	OutcomeDisputeClosedBefore = "dispute_already_closed"
	// OutcomeDisputeConflict: the dispute id names another sale than the
	// one this event's payment is (never seen from a real processor).
	OutcomeDisputeConflict = "dispute_conflict"
)

// Kinds of reversal.
const (
	reverseCumulative = "cumulative"    // charge.refunded: amount_refunded so far
	reverseRefund     = "refund"        // refund.created/updated: one refund's amount
	reverseDispute    = "dispute_open"  // charge.dispute.created
	reverseClose      = "dispute_close" // charge.dispute.closed
)

// reversal is what a refund or dispute event says, read by parseReversal.
type reversal struct {
	// skip is set for an event that moves nothing (a refund not
	// succeeded, a dispute closed with a status that is neither outcome):
	// its outcome.
	skip     string
	kind     string
	id       string // the charge (cumulative), refund or dispute id
	amount   int64
	currency string
	// outcome of a closed dispute: ledger.DisputeWon or DisputeLost.
	outcome string
	reason  string
	// refs name the payment: charge, payment intent, and the invoice in
	// API versions before 2025-03-31 (basil removed Charge.invoice).
	refs []string
}

// expandable is a reference the processor sends as an id, or as the
// expanded object when the endpoint asks for it.
type expandable string

func (e *expandable) UnmarshalJSON(b []byte) error {
	var id string
	if err := json.Unmarshal(b, &id); err == nil {
		*e = expandable(id)
		return nil
	}
	var obj struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	*e = expandable(obj.ID)
	return nil
}

// reversalObject reads the Charge (charge.refunded), Refund (refund.*) and
// Dispute (charge.dispute.*) objects: the fields the reversal needs.
type reversalObject struct {
	ID             string     `json:"id"`
	Amount         int64      `json:"amount"`
	AmountRefunded int64      `json:"amount_refunded"`
	Currency       string     `json:"currency"`
	Status         string     `json:"status"`
	Reason         string     `json:"reason"`
	Charge         expandable `json:"charge"`
	PaymentIntent  expandable `json:"payment_intent"`
	// Charge.invoice, before 2025-03-31 only.
	Invoice expandable `json:"invoice"`
}

// parseReversal reads a refund or dispute event (nil for other types).
func parseReversal(ev Event) (*reversal, error) {
	var kind string
	switch ev.Type {
	case TypeChargeRefunded:
		kind = reverseCumulative
	case TypeRefundCreated, TypeRefundUpdated:
		kind = reverseRefund
	case TypeDisputeCreated:
		kind = reverseDispute
	case TypeDisputeClosed:
		kind = reverseClose
	default:
		return nil, nil
	}
	var o reversalObject
	if err := json.Unmarshal(ev.Object, &o); err != nil || strings.TrimSpace(o.ID) == "" {
		return nil, invalidEvent(MsgEventInvalid)
	}
	r := &reversal{kind: kind, id: strings.TrimSpace(o.ID), currency: strings.ToUpper(o.Currency), reason: o.Reason, amount: o.Amount}
	if kind == reverseCumulative {
		// A charge: its own id is a reference of the payment too.
		r.amount, r.reason = o.AmountRefunded, ""
		r.refs = refStrings(o.ID, string(o.PaymentIntent), string(o.Invoice))
	} else {
		r.refs = refStrings(string(o.Charge), string(o.PaymentIntent))
	}
	for _, v := range append([]string{r.id, r.reason, r.currency}, r.refs...) {
		if len(v) > MaxIdentifier {
			return nil, invalidEvent(fmt.Sprintf("Invalid processor event: identifiers are at most %d characters", MaxIdentifier))
		}
	}
	switch kind {
	case reverseRefund:
		if o.Status != "succeeded" {
			r.skip = OutcomeRefundNotSucceeded
		}
	case reverseClose:
		switch o.Status {
		case "lost":
			r.outcome = ledger.DisputeLost
		case "won", "warning_closed":
			// An inquiry closed without becoming a chargeback releases the
			// hold as a won dispute does.
			r.outcome = ledger.DisputeWon
		default:
			r.skip = OutcomeStoredOnly
		}
	}
	if len(r.refs) == 0 && r.skip == "" {
		// Nothing names the payment: refused rather than kept forever.
		return nil, invalidEvent(MsgEventInvalid)
	}
	return r, nil
}

func refStrings(in ...string) []string {
	var out []string
	for _, r := range refs(func() []PaymentRef {
		prs := make([]PaymentRef, len(in))
		for i, s := range in {
			prs[i] = PaymentRef{Ref: s}
		}
		return prs
	}()...) {
		out = append(out, r.Ref)
	}
	return out
}

// reverse applies a refund or dispute event to the sale it names, or keeps
// it waiting for that sale.
func (s *Service) reverse(ctx context.Context, programID int64, r reversal, rec *Record) (Result, error) {
	if r.skip != "" {
		return Result{Outcome: r.skip}, nil
	}
	if (r.kind == reverseCumulative || r.kind == reverseRefund) && (r.amount < 0 || r.amount > MaxAmountCents || (r.kind == reverseRefund && r.amount == 0)) {
		return Result{Outcome: OutcomeInvalidAmount}, nil
	}
	sale, ok, err := s.store.SaleFor(ctx, programID, r.refs)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		rec.Waiting = r.refs
		return Result{Outcome: OutcomeAwaitingPayment}, nil
	}
	rec.ProgramID = sale.ProgramID
	res := Result{SaleID: sale.ID}
	switch r.kind {
	case reverseCumulative, reverseRefund:
		if r.currency != sale.Currency {
			res.Outcome = OutcomeCurrencyMismatch
			return res, nil
		}
		var out ledger.RefundResult
		if r.kind == reverseCumulative {
			// Keyed by the cumulative amount: a redelivery, or another
			// event with the same total, applies nothing more.
			out, err = s.ledger.RefundTo(ctx, ledger.RefundToInput{
				ProgramID: sale.ProgramID, TransactionID: sale.TransactionID, CumulativeCents: r.amount,
				RefundID: r.id + ":" + strconv.FormatInt(r.amount, 10),
			})
		} else {
			out, err = s.ledger.ProcessorRefund(ctx, ledger.ProcessorRefundInput{
				ProgramID: sale.ProgramID, TransactionID: sale.TransactionID, RefundID: r.id, AmountCents: r.amount, Reason: r.reason,
			})
		}
		if errors.Is(err, ledger.ErrSaleNotFound) {
			rec.Waiting = r.refs
			return Result{Outcome: OutcomeAwaitingPayment}, nil
		}
		if err != nil {
			return Result{}, fmt.Errorf("refund %s of sale %d: %w", r.id, sale.ID, err)
		}
		res.Outcome = OutcomeRefundApplied
		if out.Outcome == "skipped" {
			res.Outcome = OutcomeRefundSkipped
		}
		return res, nil
	case reverseDispute:
		res.Outcome = OutcomeDisputeOpened
		err = s.ledger.OpenDispute(ctx, sale.ID, r.id)
	default:
		res.Outcome, err = s.closeDispute(ctx, sale.ID, r)
	}
	switch {
	case errors.Is(err, ledger.ErrDisputeConflict):
		res.Outcome = OutcomeDisputeConflict
	case errors.Is(err, ledger.ErrSaleNotFound):
		rec.Waiting = r.refs
		return Result{Outcome: OutcomeAwaitingPayment}, nil
	case err != nil:
		return Result{}, fmt.Errorf("dispute %s of sale %d: %w", r.id, sale.ID, err)
	}
	return res, nil
}

// closeDispute closes the dispute with the processor's outcome; a close
// whose open never arrived (or arrives later) opens it first, so the
// outcome applies either way and the late open changes nothing.
func (s *Service) closeDispute(ctx context.Context, saleID int64, r reversal) (string, error) {
	out, err := s.ledger.CloseDispute(ctx, r.id, r.outcome)
	if errors.Is(err, ledger.ErrDisputeNotFound) {
		if err := s.ledger.OpenDispute(ctx, saleID, r.id); err != nil {
			return "", err
		}
		out, err = s.ledger.CloseDispute(ctx, r.id, r.outcome)
	}
	if err != nil {
		return "", err
	}
	switch {
	case !out.Closed:
		return OutcomeDisputeClosedBefore, nil
	case r.outcome == ledger.DisputeLost:
		return OutcomeDisputeLost, nil
	}
	return OutcomeDisputeWon, nil
}

// applyWaiting applies the events kept awaiting a payment once it is
// recorded: those naming one of refs, or with refs nil those of any
// payment recorded before recordedBefore (the backstop). Each is applied as on its first
// delivery and its stored outcome replaced; one still waiting stays. It
// answers how many were applied.
func (s *Service) applyWaiting(ctx context.Context, refs []string, recordedBefore time.Time, limit int) (int, error) {
	waiting, err := s.store.Waiting(ctx, refs, recordedBefore, limit)
	if err != nil {
		return 0, err
	}
	applied := 0
	for _, w := range waiting {
		r, err := parseReversal(w.Event)
		if err != nil || r == nil {
			// Stored as valid, so this is a type or shape this version no
			// longer reads: leave it for an operator.
			s.logger.WarnContext(ctx, "a waiting processor event cannot be read again", "event_id", w.ID, "type", w.Type)
			continue
		}
		rec := w
		res, err := s.reverse(ctx, w.ProgramID, *r, &rec)
		if err != nil {
			return applied, err
		}
		if res.Outcome == OutcomeAwaitingPayment {
			continue
		}
		if err := s.store.Resolve(ctx, w.ID, res.Outcome, res.SaleID); err != nil {
			return applied, err
		}
		s.outcome(res.Outcome)
		applied++
	}
	return applied, nil
}

// RetryWaiting is the backstop of applyWaiting: it applies the waiting
// events whose payment was recorded before recordedBefore (a process
// stopped between a sale and its waiting refunds, or the brand's sale route
// recorded the payment). The grace leaves a payment just recorded to the
// delivery that recorded it: both would apply the refund once (the ledger
// keys it), but the second would store the event's outcome as
// refund_skipped.
func (s *Service) RetryWaiting(ctx context.Context, recordedBefore time.Time, limit int) (int, error) {
	return s.applyWaiting(ctx, nil, recordedBefore, limit)
}

// WaitingStats counts the events waiting for their payment and gives the
// oldest one's receipt time (zero when none): a refund that finds no
// payment for long is money a partner keeps that the brand gave back.
func (s *Service) WaitingStats(ctx context.Context) (int64, time.Time, error) {
	return s.store.WaitingStats(ctx)
}
