package ingest

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Payment kinds of processor sales.
const (
	PaymentOneTime             = "one_time"
	PaymentSubscriptionFirst   = "subscription_first"
	PaymentSubscriptionRenewal = "subscription_renewal"
)

// Outcomes stored with each processor event (and returned to the
// processor, which shows them in its delivery log).
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
	OutcomeStoredOnly       = "stored"
	OutcomeDuplicateEvent   = "duplicate_event"
	OutcomeSubscriptionSkip = "subscription_checkout"
	OutcomeTestModeEvent    = "test_mode_event"
)

// PaymentInput is a processor event, decoded by the transport.
type PaymentInput struct {
	Event ProcessorEvent
	// Act is false for events stored but not acted on here (refunds,
	// which the commissions service reverses; unknown types); Skip names
	// why.
	Act  bool
	Skip string
	// ProgramID is the metadata's program_id (0 when absent).
	ProgramID           int64
	ClickID             string // metadata svc_click_id
	CustomerKey         string // metadata svc_customer_key
	ClientReferenceID   string
	Email               string
	ProcessorCustomerID string
	// The payment: AmountCents 0 records no sale (a free checkout, a trial's
	// first invoice) but can still settle a provisional lead.
	TransactionID string
	AmountCents   int64
	Currency      string
	OccurredAt    time.Time
	Livemode      *bool
	Kind          string
}

// PaymentOutput says what a processor event did.
type PaymentOutput struct {
	Outcome   string
	Duplicate bool
	SaleID    int64
}

var supportedCurrencies = map[string]bool{"USD": true, "EUR": true, "VND": true}

// SupportedCurrency reports whether code (upper case) is a sale currency.
func SupportedCurrency(code string) bool { return supportedCurrencies[code] }

func (s *service) ProcessorPayment(ctx context.Context, in PaymentInput) (PaymentOutput, error) {
	ev := in.Event
	stored := func(outcome string) (PaymentOutput, error) {
		ev.Outcome = outcome
		dup, err := s.store.RecordProcessorEvent(ctx, ev)
		if err != nil {
			return PaymentOutput{}, err
		}
		if dup {
			return PaymentOutput{Outcome: OutcomeDuplicateEvent, Duplicate: true}, nil
		}
		return PaymentOutput{Outcome: outcome}, nil
	}
	// The connected account decides the program; metadata may only agree.
	programID := in.ProgramID
	if ev.AccountID != "" {
		p, ok, err := s.store.ProgramByProcessorAccount(ctx, ev.AccountID)
		if err != nil {
			return PaymentOutput{}, err
		}
		if !ok {
			return stored(OutcomeUnknownAccount)
		}
		if programID != 0 && programID != p.ID {
			ev.ProgramID = p.ID
			return stored(OutcomeProgramMismatch)
		}
		programID = p.ID
	} else if programID != 0 {
		if _, ok, err := s.store.Program(ctx, programID); err != nil {
			return PaymentOutput{}, err
		} else if !ok {
			return stored(OutcomeUnknownAccount)
		}
	}
	ev.ProgramID = programID
	if !in.Act {
		return stored(in.Skip)
	}
	if programID == 0 {
		return stored(OutcomeUnknownAccount)
	}
	currency := strings.ToUpper(in.Currency)
	var sale *SaleWrite
	txn := ""
	if in.AmountCents > 0 {
		if !SupportedCurrency(currency) {
			return stored(OutcomeUnsupportedCurr)
		}
		txn = in.TransactionID
		sale = &SaleWrite{
			TransactionID: txn, AmountCents: in.AmountCents, Currency: currency, OccurredAt: in.OccurredAt.UTC(),
			Livemode: in.Livemode, Source: SourceProcessor, PaymentKind: in.Kind, ProcessorCustomerID: in.ProcessorCustomerID,
		}
	}
	ref := SaleRef{ProgramID: programID, ClickID: in.ClickID, EmailHash: hashEmail(in.Email),
		ProcessorCustomerID: in.ProcessorCustomerID, CustomerKey: in.CustomerKey}
	// client_reference_id is the tracker's fallback for payment links and
	// buy buttons: read only when the metadata carries no click.
	if in.ClickID == "" {
		ref.ClientReferenceID = in.ClientReferenceID
	}
	ev.Outcome = OutcomeNothingToDo
	res, err := s.store.Pay(ctx, PaymentRequest{Ref: ref, TransactionID: txn, Event: &ev, At: s.now().UTC()},
		func(c Customer) (PaymentDecision, error) {
			d, err := attribute(c, programID, sale, true)
			if err != nil && isBusiness(err) {
				return PaymentDecision{Refused: err}, nil
			}
			return d, err
		})
	var be *Error
	switch {
	case errors.As(err, &be) && errors.Is(be, ErrDuplicate):
		// The brand's own sale call (or an earlier delivery under another
		// event id) recorded this payment: keep the event, change nothing.
		return stored(OutcomeDuplicateSale)
	case errors.Is(err, ErrDuplicateEvent):
		return PaymentOutput{Outcome: OutcomeDuplicateEvent, Duplicate: true}, nil
	case err != nil:
		return PaymentOutput{}, err
	}
	return PaymentOutput{Outcome: res.Outcome(), SaleID: res.SaleID}, nil
}

// ErrDuplicateEvent is what a store returns from Pay when the processor
// event was already stored (a redelivery racing the first).
var ErrDuplicateEvent = errors.New("processor event already received")

// Outcome names what a payment did, as stored with its processor event.
func (r PaymentResult) Outcome() string {
	switch {
	case !r.Found:
		return OutcomeNoCustomer
	case r.Refused != nil:
		return OutcomeNotAttributed
	case r.SaleID != 0:
		return OutcomeSaleRecorded
	case r.LeadSettled:
		return OutcomeLeadSettled
	}
	return OutcomeNothingToDo
}
