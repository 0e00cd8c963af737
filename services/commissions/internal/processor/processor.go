// Package processor is the payment processor's webhook on commissions
// (POST /api/v1/webhooks/processor): each verified event is stored once
// (its id is the idempotency key) with what it did, and payments are
// recorded through the same reserve → attribute → complete path as the
// brand's POST /api/v1/track/sale, with source "processor", so one payment
// is one sale and one commission whoever reports it first.
//
// The dispatch on the event type is in one place (Service.dispatch):
// checkout.session.completed and invoice.payment_succeeded record sales
// (sales.go); charge.refunded, refund.created/updated and
// charge.dispute.created/closed reverse them (refunds.go). A refund or
// dispute whose payment is not recorded yet is kept (awaiting_payment) and
// applied when it is.
package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/commissions/internal/attribution"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
)

// Outcomes stored with each processor event and answered to the processor
// (it shows them in its delivery log).
const (
	OutcomeSaleRecorded     = "sale_recorded"
	OutcomeLeadSettled      = "lead_settled"
	OutcomeNothingToDo      = "nothing_to_do"
	OutcomeNoCustomer       = "no_customer"
	OutcomeNotAttributed    = "not_attributed"
	OutcomeDuplicateSale    = "duplicate_transaction"
	OutcomeUnknownAccount   = "unknown_account"
	OutcomeProgramMismatch  = "program_mismatch"
	OutcomeUnsupportedCurr  = "unsupported_currency"
	OutcomeInvalidAmount    = "invalid_amount"
	OutcomeStoredOnly       = "stored"
	OutcomeDuplicateEvent   = "duplicate_event"
	OutcomeSubscriptionSkip = "subscription_checkout"
	OutcomeTestModeEvent    = "test_mode_event"
	OutcomeS2SProgram       = "s2s_program"
)

// Event types acted on.
const (
	TypeCheckoutCompleted = "checkout.session.completed"
	TypeInvoicePaid       = "invoice.payment_succeeded"
)

// PaymentTrackingS2S is the program mode in which the brand reports its
// sales itself (the sale route): processor events then change nothing.
const PaymentTrackingS2S = "s2s"

// MaxAmountCents is the sale route's cap (10^12 minor units).
const MaxAmountCents = 1_000_000_000_000

// ErrInvalidEvent is an event whose object cannot be read (400, nothing
// stored).
var ErrInvalidEvent = fmt.Errorf("invalid processor event: %w", errkind.Invalid)

// Event is a verified delivery: the envelope's fields, the raw data.object
// and the raw body (stored as received).
type Event struct {
	ID        string
	Type      string
	AccountID string
	// Livemode is false only for an event that says livemode: false (the
	// processor's test mode).
	Livemode bool
	// Created is the event's time (the request's when absent).
	Created time.Time
	Object  json.RawMessage
	Payload []byte
}

// Program is what the webhook needs of a program in the catalog replica.
type Program struct {
	ID                  int64
	PaymentTrackingMode string
}

// PaymentRef is one of the processor's references of a payment.
type PaymentRef struct {
	Ref  string
	Kind string // RefPaymentIntent, RefCharge, RefInvoice, RefCheckoutSession
}

// Kinds of payment references.
const (
	RefPaymentIntent   = "payment_intent"
	RefCharge          = "charge"
	RefInvoice         = "invoice"
	RefCheckoutSession = "checkout_session"
)

// Record is a handled event as stored: the event, its program (0: none),
// what it did, its sale (0: none) and the sale's payment references.
type Record struct {
	Event
	ProgramID int64
	Outcome   string
	SaleID    int64
	Refs      []PaymentRef
	// Waiting: the references of the payment an awaiting_payment event
	// waits for.
	Waiting    []string
	ReceivedAt time.Time
}

// SaleRef is the recorded live sale a refund or dispute names.
type SaleRef struct {
	ID            int64
	ProgramID     int64
	TransactionID string
	Currency      string
}

// Store keeps the processor events and payment references
// (processor/pgstore).
type Store interface {
	// EventSeen reports whether the event id was stored (handled) before.
	EventSeen(ctx context.Context, id string) (bool, error)
	// ProgramByAccount finds the program connected to a processor account.
	ProgramByAccount(ctx context.Context, account string) (Program, bool, error)
	// Program reads a program of the replica.
	Program(ctx context.Context, id int64) (Program, bool, error)
	// Save stores the event and the sale's references in one transaction;
	// duplicate is true when the event id was stored meanwhile (nothing is
	// written then).
	Save(ctx context.Context, r Record) (duplicate bool, err error)
	// SaleFor finds the recorded live sale of programID (0: any program)
	// named by one of refs: a payment reference linked to it, else its
	// transaction id.
	SaleFor(ctx context.Context, programID int64, refs []string) (SaleRef, bool, error)
	// Waiting lists, oldest first, the awaiting_payment events naming one
	// of refs, or with refs nil those whose payment was recorded before
	// recordedBefore.
	Waiting(ctx context.Context, refs []string, recordedBefore time.Time, limit int) ([]Record, error)
	// Resolve replaces a waiting event's outcome once it is applied (no-op
	// when it is not waiting any more).
	Resolve(ctx context.Context, eventID, outcome string, saleID int64) error
	// WaitingStats counts the awaiting_payment events and gives the
	// receipt time of the oldest (zero when none).
	WaitingStats(ctx context.Context) (int64, time.Time, error)
}

// Ledger is what the webhook needs of the ledger (*ledger.Service): the
// sale route's three steps, the processor's refunds and disputes.
type Ledger interface {
	ReserveSale(ctx context.Context, in ledger.SaleInput, ref []byte) (ledger.Sale, error)
	CompleteSale(ctx context.Context, saleID int64, who ledger.Attributed) (ledger.SaleResult, error)
	ReleaseSale(ctx context.Context, saleID int64) (bool, error)
	RefundTo(ctx context.Context, in ledger.RefundToInput) (ledger.RefundResult, error)
	ProcessorRefund(ctx context.Context, in ledger.ProcessorRefundInput) (ledger.RefundResult, error)
	OpenDispute(ctx context.Context, saleID int64, disputeID string) error
	CloseDispute(ctx context.Context, disputeID, outcome string) (ledger.DisputeResult, error)
}

// Attributor asks tracking for a payment's attribution decision
// (*attribution.Client).
type Attributor interface {
	Attribute(ctx context.Context, req attribution.Request) (attribution.Decision, error)
}

// Result is what an event did.
type Result struct {
	Outcome        string
	Duplicate      bool
	SaleID         int64
	CustomerStatus string
}

// Config wires the Service.
type Config struct {
	Store  Store
	Ledger Ledger
	// Attributor is nil when tracking is not configured: an event that
	// needs a decision then fails (5xx), so the processor retries.
	Attributor Attributor
	Now        func() time.Time
	Logger     *slog.Logger
	// OnOutcome counts every handled event by outcome (a metric).
	OnOutcome func(outcome string)
	// MetadataRouting routes an event without account (a payment on the
	// platform's own processor account) by its metadata program_id; off,
	// such an event is stored as unknown_account and changes nothing
	// (PROCESSOR_PLATFORM_ACCOUNT turns it on).
	MetadataRouting bool
}

// Service handles processor events.
type Service struct {
	metadataRouting bool
	store           Store
	ledger          Ledger
	attr            Attributor
	now             func() time.Time
	logger          *slog.Logger
	outcome         func(string)
}

// New builds the Service.
func New(c Config) (*Service, error) {
	if c.Store == nil || c.Ledger == nil || c.Now == nil || c.Logger == nil {
		return nil, errors.New("processor: store, ledger, clock and logger are required")
	}
	if c.OnOutcome == nil {
		c.OnOutcome = func(string) {}
	}
	return &Service{metadataRouting: c.MetadataRouting, store: c.Store, ledger: c.Ledger, attr: c.Attributor, now: c.Now, logger: c.Logger, outcome: c.OnOutcome}, nil
}

// Handle acts on one verified event once. A redelivery of a stored event
// is a no-op (Duplicate). An event that cannot be acted on (unknown
// account, test mode, a type not handled, no customer, …) is stored with
// its outcome and acknowledged. A failure (database, tracking) returns an
// error and stores nothing, so the processor's retry does the work.
func (s *Service) Handle(ctx context.Context, ev Event) (Result, error) {
	if seen, err := s.store.EventSeen(ctx, ev.ID); err != nil {
		return Result{}, err
	} else if seen {
		s.outcome(OutcomeDuplicateEvent)
		return Result{Outcome: OutcomeDuplicateEvent, Duplicate: true}, nil
	}
	p, err := s.parse(ev)
	if err != nil {
		return Result{}, err
	}
	rv, err := parseReversal(ev)
	if err != nil {
		return Result{}, err
	}
	rec := Record{Event: ev, ReceivedAt: s.now().UTC()}
	res, err := s.dispatch(ctx, ev, p, rv, &rec)
	if err != nil {
		return Result{}, err
	}
	rec.Outcome, rec.SaleID = res.Outcome, res.SaleID
	dup, err := s.store.Save(ctx, rec)
	if err != nil {
		return Result{}, err
	}
	if dup {
		res = Result{Outcome: OutcomeDuplicateEvent, Duplicate: true}
	}
	s.outcome(res.Outcome)
	if !dup && len(rec.Refs) > 0 && res.SaleID != 0 {
		// Refunds and disputes that came before this payment apply now.
		// A failure leaves them to the backstop (RetryWaiting): the
		// payment is recorded and the answer stands.
		refs := make([]string, len(rec.Refs))
		for i, r := range rec.Refs {
			refs[i] = r.Ref
		}
		if _, err := s.applyWaiting(context.WithoutCancel(ctx), refs, time.Time{}, WaitingBatch); err != nil {
			s.logger.WarnContext(ctx, "waiting refunds of a recorded payment not applied; the backstop retries", "sale_id", res.SaleID, "err", err)
		}
	}
	return res, nil
}

// WaitingBatch bounds the waiting events applied at once.
const WaitingBatch = 100

// dispatch is the one place an event type chooses its handling.
func (s *Service) dispatch(ctx context.Context, ev Event, p *payment, rv *reversal, rec *Record) (Result, error) {
	programID, outcome, err := s.program(ctx, ev, p)
	if err != nil {
		return Result{}, err
	}
	rec.ProgramID = programID
	if outcome != "" {
		return Result{Outcome: outcome}, nil
	}
	switch ev.Type {
	case TypeCheckoutCompleted, TypeInvoicePaid:
		if p.skip != "" {
			return Result{Outcome: p.skip}, nil
		}
		return s.pay(ctx, programID, *p, rec)
	case TypeChargeRefunded, TypeRefundCreated, TypeRefundUpdated, TypeDisputeCreated, TypeDisputeClosed:
		return s.reverse(ctx, programID, *rv, rec)
	default:
		return Result{Outcome: OutcomeStoredOnly}, nil
	}
}

// program chooses the event's program: its connected account (metadata
// program_id may only agree), else, when the operator allowed it
// (MetadataRouting), metadata program_id for an event without account. A
// non-empty outcome ends the handling there.
func (s *Service) program(ctx context.Context, ev Event, p *payment) (int64, string, error) {
	var mdProgram int64
	if p != nil {
		mdProgram = p.programID
	}
	var prog Program
	switch {
	case ev.AccountID != "":
		found, ok, err := s.store.ProgramByAccount(ctx, ev.AccountID)
		if err != nil {
			return 0, "", err
		}
		if !ok {
			return 0, OutcomeUnknownAccount, nil
		}
		if mdProgram != 0 && mdProgram != found.ID {
			return found.ID, OutcomeProgramMismatch, nil
		}
		prog = found
	case mdProgram != 0 && !s.metadataRouting:
		// Anyone who can create a payment on the platform's own account
		// would choose the program (and the partner paid) with metadata.
		return 0, OutcomeUnknownAccount, nil
	case mdProgram != 0:
		found, ok, err := s.store.Program(ctx, mdProgram)
		if err != nil {
			return 0, "", err
		}
		if !ok {
			return 0, OutcomeUnknownAccount, nil
		}
		prog = found
	}
	if !ev.Livemode {
		// The processor's test mode (a brand trying its checkout) must not
		// convert customers or pay partners.
		return prog.ID, OutcomeTestModeEvent, nil
	}
	if prog.ID == 0 {
		if p == nil {
			return 0, "", nil // stored for whoever handles its type
		}
		return 0, OutcomeUnknownAccount, nil
	}
	if prog.PaymentTrackingMode == PaymentTrackingS2S && p != nil {
		// The brand reports its sales through the sale route.
		return prog.ID, OutcomeS2SProgram, nil
	}
	return prog.ID, "", nil
}
