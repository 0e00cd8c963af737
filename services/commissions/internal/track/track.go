// Package track is the brand-facing money routes of commissions: POST
// /api/v1/track/sale and POST /api/v1/track/refund. A live sale is reserved
// in the ledger (its transaction id consumed), attributed by tracking
// (package attribution), then recorded with its commission; a refund is the
// ledger's. It holds the routes' rules and messages (the specification's
// Track sale and Track refund tables); the ledger holds the money.
package track

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/commissions/internal/attribution"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
	"github.com/svc-dev/svc/services/commissions/internal/money"
)

// The routes' messages: the specification's tables, and ours where it is
// silent.
const (
	MsgSaleTracked        = "Sale tracked successfully"
	MsgTestSale           = "Test sale recorded"
	MsgCustomerNotFound   = "Customer not found. Provide customer_key or click_id."
	MsgPartnerRequired    = "partnerId required to create commission"
	MsgDuplicate          = "Duplicate transaction_id. This sale has already been recorded."
	MsgSaleFailed         = "Sale tracking failed"
	MsgCommissionFailed   = "Failed to create commission"
	MsgRefundFailed       = "Refund tracking failed"
	MsgSaleNotFound       = "Sale not found for transaction_id"
	MsgNoCommission       = "This sale has no commission; nothing was reversed"
	msgUnsupportedCurrFmt = "currency %s is not supported"
)

// ErrNoAttribution is a sale no partner is credited for: the customer is
// unknown, of another program, outside the window, or without a partner
// (error.code no_attribution).
var ErrNoAttribution = fmt.Errorf("no attribution: %w", errkind.Invalid)

// Error is a refusal with the message the client reads; SaleID names the
// sale of a duplicate (error.details.sale_id).
type Error struct {
	Kind    error
	Message string
	SaleID  int64
}

func (e *Error) Error() string { return e.Message }

// Unwrap gives the kind, for the status and error.code.
func (e *Error) Unwrap() error { return e.Kind }

func fail(kind error, msg string) error { return &Error{Kind: kind, Message: msg} }

// Key is the program API key the request authenticated with.
type Key struct {
	ID        int64
	ProgramID int64
	Test      bool
}

// SaleInput is a decoded, shape-checked sale request.
type SaleInput struct {
	Key               Key
	TransactionID     string
	AmountCents       int64
	Currency          string
	OccurredAt        time.Time // the request time when not sent
	Provider          string
	ProviderPaymentID string
	Livemode          *bool
	ClickID           string
	CustomerKey       string
	TestMode          bool
}

// SaleOutput answers a sale: a recorded live sale, or a test sale (Test).
type SaleOutput struct {
	Test           bool
	SaleID         int64
	ProgramID      int64
	TransactionID  string
	ClickID        string
	CustomerStatus string
	// Commission is nil when the sale created none.
	Commission *ledger.Commission
}

// RefundInput is a decoded refund request (the test key's is answered
// before decoding).
type RefundInput struct {
	Key           Key
	TransactionID string
	AmountCents   int64
	RefundID      string
	Reason        string
}

// RefundOutput answers a refund.
type RefundOutput struct {
	Outcome      string // reversed, refunded, skipped, no_commission
	SkipReason   string
	CommissionID int64
	Deduction    money.Amount
}

// Attributor asks tracking for a payment's attribution decision
// (*attribution.Client).
type Attributor interface {
	Attribute(ctx context.Context, req attribution.Request) (attribution.Decision, error)
}

// Ledger is what the routes need of the ledger (*ledger.Service).
type Ledger interface {
	RecordSale(ctx context.Context, in ledger.SaleInput) (ledger.SaleResult, error)
	ReserveSale(ctx context.Context, in ledger.SaleInput, ref []byte) (ledger.Sale, error)
	CompleteSale(ctx context.Context, saleID int64, who ledger.Attributed) (ledger.SaleResult, error)
	ReleaseSale(ctx context.Context, saleID int64) (bool, error)
	Refund(ctx context.Context, in ledger.RefundInput) (ledger.RefundResult, error)
}

// Service is the routes' use cases.
type Service struct {
	ledger Ledger
	// attr is nil when tracking is not configured: every live sale then
	// answers 500 Sale tracking failed and records nothing.
	attr   Attributor
	now    func() time.Time
	logger *slog.Logger
}

// New wires the service; attr may be nil (see Service).
func New(l Ledger, attr Attributor, now func() time.Time, logger *slog.Logger) (*Service, error) {
	if l == nil || now == nil || logger == nil {
		return nil, errors.New("track: ledger, clock and logger are required")
	}
	return &Service{ledger: l, attr: attr, now: now, logger: logger}, nil
}

// Sale records a sale. A test sale (test_mode or a test key) is recorded
// at once without attribution or commission. A live one is reserved first,
// so its transaction id is consumed before tracking moves the customer;
// then tracking decides: refused or unknown customer → the reservation is
// released and the answer is 400; tracking unavailable → released, 500
// Sale tracking failed (the retry is safe: tracking answers the same
// decision for the same id); attributed → the sale is recorded with its
// commission. A failure after tracking's decision keeps the reservation:
// the retry answers 409, and the backstop (Resolve) completes it.
func (s *Service) Sale(ctx context.Context, in SaleInput) (SaleOutput, error) {
	in.OccurredAt = in.OccurredAt.UTC()
	if in.TestMode || in.Key.Test {
		return s.testSale(ctx, in)
	}
	if in.ClickID == "" && in.CustomerKey == "" {
		return SaleOutput{}, fail(ErrNoAttribution, MsgCustomerNotFound)
	}
	req := attribution.Request{
		ProgramID: in.Key.ProgramID, TransactionID: in.TransactionID, ClickID: in.ClickID, CustomerKey: in.CustomerKey,
		AmountCents: in.AmountCents, Currency: in.Currency, OccurredAt: in.OccurredAt, Source: attribution.SourceAPI,
	}
	ref, err := json.Marshal(req)
	if err != nil {
		return SaleOutput{}, fmt.Errorf("encode attribution request: %w", err)
	}
	sale, err := s.ledger.ReserveSale(ctx, ledger.SaleInput{
		TransactionID: in.TransactionID, ProgramID: in.Key.ProgramID, AmountCents: in.AmountCents, Currency: in.Currency,
		OccurredAt: in.OccurredAt, Source: ledger.SourceAPI,
	}, ref)
	if err != nil {
		return SaleOutput{}, saleError(err)
	}
	out, err := s.attribute(ctx, sale.ID, req, true)
	if err != nil {
		return SaleOutput{}, err
	}
	out.TransactionID = in.TransactionID
	return out, nil
}

// attribute asks tracking about a reserved sale and completes or releases
// it: Sale's second half, and the backstop's. releaseUndecided releases the
// sale when tracking could not decide (the route: its client retries and
// tracking answers the same decision then); the backstop keeps it reserved
// for its next run instead, since nobody else will ask again.
func (s *Service) attribute(ctx context.Context, saleID int64, req attribution.Request, releaseUndecided bool) (SaleOutput, error) {
	if s.attr == nil {
		if releaseUndecided {
			s.release(ctx, saleID)
		}
		return SaleOutput{}, fmt.Errorf("no attribution client (TRACKING_URL, INTERNAL_TOKEN): %w", errkind.Unavailable)
	}
	dec, err := s.attr.Attribute(ctx, req)
	switch {
	case errors.Is(err, attribution.ErrCustomerNotFound):
		s.release(ctx, saleID)
		return SaleOutput{}, fail(ErrNoAttribution, MsgCustomerNotFound)
	case err != nil:
		if releaseUndecided {
			s.release(ctx, saleID)
		}
		// Whatever tracking answered (a 5xx, a timeout, a 400 from a
		// replica behind ours), the sale is undecided: the route's 500,
		// whose retry is safe. Only the kind travels; the text is for
		// the log.
		return SaleOutput{}, fmt.Errorf("attribution of sale %d: %w (%v)", saleID, errkind.Unavailable, err)
	case !dec.Attributed():
		s.release(ctx, saleID)
		msg := MsgCustomerNotFound
		if dec.Refusal != nil && dec.Refusal.Message != "" {
			msg = dec.Refusal.Message
		}
		return SaleOutput{}, fail(ErrNoAttribution, msg)
	}
	res, err := s.ledger.CompleteSale(ctx, saleID, ledger.Attributed{
		ProgramID: req.ProgramID, CustomerID: dec.CustomerID, CustomerClickID: dec.ClickID, PartnerID: dec.PartnerID,
	})
	var notCreated *ledger.CommissionNotCreatedError
	switch {
	case errors.As(err, &notCreated) && errors.Is(err, ledger.ErrPartnerRequired):
		return SaleOutput{}, fail(ErrNoAttribution, MsgPartnerRequired)
	case errors.As(err, &notCreated):
		// The sale is recorded, its id consumed; the backstop creates the
		// commission once the program's terms are readable.
		return SaleOutput{}, &Error{Kind: fmt.Errorf("%w: %w", errkind.Internal, err), Message: MsgCommissionFailed}
	case err != nil:
		return SaleOutput{}, fmt.Errorf("record attributed sale %d: %w", saleID, err)
	}
	return SaleOutput{
		SaleID: res.Sale.ID, ProgramID: res.Sale.ProgramID, TransactionID: res.Sale.TransactionID,
		ClickID: dec.ClickID, CustomerStatus: dec.CustomerStatus, Commission: res.Commission,
	}, nil
}

// release gives a reserved sale's id back; a failure leaves it to the
// backstop (the id answers 409 until then).
func (s *Service) release(ctx context.Context, saleID int64) {
	if _, err := s.ledger.ReleaseSale(context.WithoutCancel(ctx), saleID); err != nil {
		s.logger.WarnContext(ctx, "release of a reserved sale failed; the backstop retries it", "sale_id", saleID, "err", err)
	}
}

// generatedAttempts bounds the retries of a generated test id taken by a
// concurrent test sale of the same nanosecond.
const generatedAttempts = 8

func (s *Service) testSale(ctx context.Context, in SaleInput) (SaleOutput, error) {
	txn, generated := in.TransactionID, in.TransactionID == ""
	var nanos int64
	if generated {
		nanos = s.now().UnixNano()
	}
	for attempt := 0; ; attempt++ {
		if generated {
			// The spec's shape, test_txn_<timestamp>: the next nanosecond
			// when this one is taken, so two test sales of one instant
			// (a clock's resolution, concurrent calls) both get an id.
			txn = "test_txn_" + strconv.FormatInt(nanos+int64(attempt), 10)
		}
		res, err := s.ledger.RecordSale(ctx, ledger.SaleInput{
			TransactionID: txn, ProgramID: in.Key.ProgramID, AmountCents: in.AmountCents, Currency: in.Currency,
			OccurredAt: in.OccurredAt, Source: ledger.SourceAPI, Test: true,
		})
		var dup *ledger.DuplicateSaleError
		if generated && errors.As(err, &dup) && attempt+1 < generatedAttempts {
			continue
		}
		if err != nil {
			return SaleOutput{}, saleError(err)
		}
		return SaleOutput{Test: true, SaleID: res.Sale.ID, ProgramID: in.Key.ProgramID, TransactionID: txn}, nil
	}
}

// saleError gives the ledger's refusals their route message.
func saleError(err error) error {
	var dup *ledger.DuplicateSaleError
	switch {
	case errors.As(err, &dup):
		return &Error{Kind: errkind.Conflict, Message: MsgDuplicate, SaleID: dup.SaleID}
	case errors.Is(err, ledger.ErrUnsupportedCurrency):
		// The transport checks the currency first; kept for the ledger's.
		return fail(errkind.Unprocessable, fmt.Sprintf(msgUnsupportedCurrFmt, err))
	}
	return err
}

// Refund applies a refund of the key's program's sale.
func (s *Service) Refund(ctx context.Context, in RefundInput) (RefundOutput, error) {
	res, err := s.ledger.Refund(ctx, ledger.RefundInput{
		ProgramID: in.Key.ProgramID, TransactionID: in.TransactionID, AmountCents: in.AmountCents,
		RefundID: in.RefundID, Reason: in.Reason,
	})
	if errors.Is(err, ledger.ErrSaleNotFound) {
		return RefundOutput{}, fail(errkind.NotFound, MsgSaleNotFound)
	}
	if err != nil {
		return RefundOutput{}, err
	}
	return RefundOutput{Outcome: res.Outcome, SkipReason: res.SkipReason, CommissionID: res.CommissionID, Deduction: res.Deduction}, nil
}

// ResolveResult is what Resolve did with the reserved sales it was given.
type ResolveResult struct {
	Completed, Released, Failed int
}

// Resolve decides the reserved sales recorded before olderThan again: the
// backstop for a process that died between its reservation and tracking's
// decision or its own write. Tracking answers the decision it stored for
// the transaction id (nothing moves twice), so each sale ends recorded with
// its commission, or released when tracking refused it. A sale tracking
// cannot decide now stays reserved for the next run.
func (s *Service) Resolve(ctx context.Context, reserved []ledger.Sale) ResolveResult {
	var r ResolveResult
	for _, sale := range reserved {
		var req attribution.Request
		if err := json.Unmarshal(sale.AttributionRef, &req); err != nil {
			s.logger.ErrorContext(ctx, "reserved sale has no usable attribution request", "sale_id", sale.ID, "err", err)
			r.Failed++
			continue
		}
		req.OccurredAt = sale.OccurredAt
		_, err := s.attribute(ctx, sale.ID, req, false)
		var be *Error
		switch {
		case err == nil:
			r.Completed++
		case errors.As(err, &be) && errors.Is(err, ErrNoAttribution) && be.Message != MsgPartnerRequired:
			r.Released++
		case errors.As(err, &be):
			// Recorded; the commission waits for EnsureCommission.
			r.Completed++
		default:
			s.logger.WarnContext(ctx, "reserved sale still undecided", "sale_id", sale.ID, "err", err)
			r.Failed++
		}
	}
	return r
}
