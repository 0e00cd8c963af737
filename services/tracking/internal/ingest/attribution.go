package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
)

// Attribution outcomes (POST /internal/v1/attributions).
const (
	AttributionAttributed = "attributed"
	AttributionRefused    = "refused"
)

// RefusalNoAttribution is the refusal code of every attribution refusal
// (the Track sale table's error.code for the same rules).
const RefusalNoAttribution = "no_attribution"

var supportedCurrencies = map[string]bool{"USD": true, "EUR": true, "VND": true}

// SupportedCurrency reports whether code (upper case) is a sale currency.
func SupportedCurrency(code string) bool { return supportedCurrencies[code] }

// ErrCustomerNotFound: no customer matches the identifiers of an
// attribution request (404; never stored: the customer may be tracked
// later).
var ErrCustomerNotFound = fmt.Errorf("customer not found: %w", errkind.NotFound)

// AttributionInput is a decoded, shape-checked request of the commissions
// service for an attribution decision.
type AttributionInput struct {
	ProgramID int64
	// TransactionID is the caller's idempotency key.
	TransactionID       string
	ClickID             string
	CustomerKey         string
	EmailHash           string // SHA-256 hex of the lower-cased, trimmed address
	ProcessorCustomerID string
	// ClientReferenceID is a processor checkout's client_reference_id (the
	// tracker's click for payment links): looked up after the processor
	// customer id, in ProgramID only.
	ClientReferenceID string
	// AmountCents 0 (only with SettleLead) is a payment of nothing: it
	// settles a provisional lead and records no purchase.
	AmountCents int64
	Currency    string
	OccurredAt  time.Time
	// SettleLead settles a provisional lead before the rules run (a
	// processor checkout).
	SettleLead bool
	Source     string
}

// Attribution is one stored decision.
type Attribution struct {
	TransactionID string
	ProgramID     int64
	Outcome       string
	CustomerID    int64
	ClickID       string
	// PartnerID is the customer's first partner: who earns the commission.
	PartnerID      int64
	LinkID         int64
	CustomerStatus string
	// FirstPurchaseDate is zero while the customer has not converted.
	FirstPurchaseDate time.Time
	RefusalCode       string
	RefusalMessage    string
	Source            string
	DecidedAt         time.Time
}

// AttributionOutput answers an attribution request.
type AttributionOutput struct {
	Attribution
	// Replayed: the decision was made by an earlier call with the same
	// transaction id and is answered unchanged.
	Replayed bool
}

// AttributionRequest is one decision to make and store.
type AttributionRequest struct {
	Ref           SaleRef
	TransactionID string
	Source        string
	At            time.Time
}

// AttributionResult is what the store did.
type AttributionResult struct {
	// Found is false when no decision was stored and no customer matched.
	Found    bool
	Replayed bool
	Decision Attribution
}

// Refusal is the code and message an attribution refusal is stored with.
func Refusal(err error) (code, message string) {
	var be *Error
	if errors.As(err, &be) {
		message = be.Message
	} else {
		message = err.Error()
	}
	return RefusalNoAttribution, message
}

// Attribute decides whether a payment is attributed to the customer's first
// partner, with the payment rules (attribute), and moves the customer as a
// sale would (lead settled, conversion), without recording a sale: the
// commissions service records it. An attributed decision is kept per
// program and transaction id, and a later call with both gets it again; a
// refusal is not kept (it moved nothing), so a corrected retry, or another
// program's payment under the same id, is decided afresh.
func (s *service) Attribute(ctx context.Context, in AttributionInput) (AttributionOutput, error) {
	if _, ok, err := s.store.Program(ctx, in.ProgramID); err != nil {
		return AttributionOutput{}, err
	} else if !ok {
		return AttributionOutput{}, fail(errkind.Invalid, MsgUnknownProgram)
	}
	var sale *SaleWrite
	if in.AmountCents > 0 {
		sale = &SaleWrite{
			TransactionID: in.TransactionID, AmountCents: in.AmountCents, Currency: in.Currency, OccurredAt: in.OccurredAt.UTC(),
			Source: in.Source, ProcessorCustomerID: in.ProcessorCustomerID,
		}
	}
	ref := SaleRef{ProgramID: in.ProgramID, ClickID: in.ClickID, EmailHash: in.EmailHash,
		ProcessorCustomerID: in.ProcessorCustomerID, ClientReferenceID: in.ClientReferenceID, CustomerKey: in.CustomerKey}
	res, err := s.store.Attribute(ctx, AttributionRequest{Ref: ref, TransactionID: in.TransactionID, Source: in.Source, At: s.now().UTC()},
		func(c Customer) (PaymentDecision, error) {
			d, err := attribute(c, in.ProgramID, sale, in.SettleLead)
			if err != nil && isBusiness(err) {
				return PaymentDecision{Refused: err}, nil
			}
			return d, err
		})
	if err != nil {
		return AttributionOutput{}, err
	}
	if !res.Found {
		return AttributionOutput{}, fail(ErrCustomerNotFound, MsgSaleCustomerNotFound)
	}
	return AttributionOutput{Attribution: res.Decision, Replayed: res.Replayed}, nil
}
