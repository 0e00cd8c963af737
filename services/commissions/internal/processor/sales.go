package processor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/commissions/internal/attribution"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
)

// Payment kinds.
const (
	PaymentOneTime             = "one_time"
	PaymentSubscriptionFirst   = "subscription_first"
	PaymentSubscriptionRenewal = "subscription_renewal"
)

// MaxIdentifier is the longest identifier read from an event (tracking's
// limit on the attribution request's fields).
const MaxIdentifier = 255

// payment is what a sale event says, read by parse.
type payment struct {
	// skip is set for an event of a sale type that records nothing
	// (subscription checkout, unpaid checkout): its outcome.
	skip string
	kind string
	// programID is the metadata's program_id (0: absent).
	programID           int64
	clickID             string // metadata svc_click_id
	customerKey         string // metadata svc_customer_key
	clientReferenceID   string
	email               string
	processorCustomerID string
	// transactionID is the sale's id: the invoice, else the payment
	// intent, else the checkout session.
	transactionID string
	amountCents   int64
	currency      string
	refs          []PaymentRef
}

// metadata holds string values; the processor sends only strings, but a
// number is read rather than failing the delivery.
type metadata map[string]any

func (m metadata) get(k string) string {
	switch v := m[k].(type) {
	case string:
		return strings.TrimSpace(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return ""
}

type checkoutSession struct {
	ID                string   `json:"id"`
	Mode              string   `json:"mode"`
	PaymentStatus     string   `json:"payment_status"`
	AmountTotal       int64    `json:"amount_total"`
	Currency          string   `json:"currency"`
	Customer          string   `json:"customer"`
	CustomerEmail     string   `json:"customer_email"`
	ClientReferenceID string   `json:"client_reference_id"`
	PaymentIntent     string   `json:"payment_intent"`
	Invoice           string   `json:"invoice"`
	Metadata          metadata `json:"metadata"`
	CustomerDetails   *struct {
		Email string `json:"email"`
	} `json:"customer_details"`
}

type subscriptionDetails struct {
	Metadata metadata `json:"metadata"`
}

// invoice reads both API versions: from 2025-03-31 the subscription is
// under parent and the payments are InvoicePayments (payments.data[]
// .payment.payment_intent / .charge); earlier versions have
// subscription_details, payment_intent and charge at the top level.
type invoice struct {
	ID            string `json:"id"`
	Customer      string `json:"customer"`
	CustomerEmail string `json:"customer_email"`
	AmountPaid    int64  `json:"amount_paid"`
	Currency      string `json:"currency"`
	BillingReason string `json:"billing_reason"`
	Parent        *struct {
		SubscriptionDetails *subscriptionDetails `json:"subscription_details"`
	} `json:"parent"`
	SubscriptionDetails *subscriptionDetails `json:"subscription_details"`
	// Before 2025-03-31.
	PaymentIntent string `json:"payment_intent"`
	Charge        string `json:"charge"`
	// From 2025-03-31 (when the list is included).
	Payments *struct {
		Data []struct {
			Payment struct {
				PaymentIntent string `json:"payment_intent"`
				Charge        string `json:"charge"`
			} `json:"payment"`
		} `json:"data"`
	} `json:"payments"`
}

func (inv invoice) metadata() metadata {
	if inv.Parent != nil && inv.Parent.SubscriptionDetails != nil && len(inv.Parent.SubscriptionDetails.Metadata) > 0 {
		return inv.Parent.SubscriptionDetails.Metadata
	}
	if inv.SubscriptionDetails != nil {
		return inv.SubscriptionDetails.Metadata
	}
	return nil
}

func invalidEvent(msg string) error { return &Error{Kind: ErrInvalidEvent, Message: msg} }

// Error is a refused event with the message the processor's log shows.
type Error struct {
	Kind    error
	Message string
}

func (e *Error) Error() string { return e.Message }

// Unwrap gives the kind.
func (e *Error) Unwrap() error { return e.Kind }

// MsgEventInvalid is the 400 of an event whose shape cannot be read.
const MsgEventInvalid = "Invalid processor event: expected a JSON object with id, type and data.object"

// parse reads the payment of a sale event (nil for other types).
func (s *Service) parse(ev Event) (*payment, error) {
	var p payment
	var md metadata
	switch ev.Type {
	case TypeCheckoutCompleted:
		var cs checkoutSession
		if err := json.Unmarshal(ev.Object, &cs); err != nil {
			return nil, invalidEvent(MsgEventInvalid)
		}
		if cs.Mode == "subscription" {
			// The invoice event records the subscription's payments.
			p.skip = OutcomeSubscriptionSkip
			md = cs.Metadata
			break
		}
		if cs.Mode != "payment" || (cs.PaymentStatus != "paid" && cs.PaymentStatus != "no_payment_required") {
			p.skip = OutcomeStoredOnly
			md = cs.Metadata
			break
		}
		md = cs.Metadata
		p.kind = PaymentOneTime
		p.clientReferenceID = strings.TrimSpace(cs.ClientReferenceID)
		p.email = cs.CustomerEmail
		if cs.CustomerDetails != nil && cs.CustomerDetails.Email != "" {
			p.email = cs.CustomerDetails.Email
		}
		p.processorCustomerID, p.currency = cs.Customer, cs.Currency
		p.transactionID = cs.PaymentIntent
		if p.transactionID == "" {
			p.transactionID = cs.ID
		}
		if cs.PaymentStatus == "paid" {
			p.amountCents = cs.AmountTotal
		}
		p.refs = refs(PaymentRef{cs.PaymentIntent, RefPaymentIntent}, PaymentRef{cs.ID, RefCheckoutSession}, PaymentRef{cs.Invoice, RefInvoice})
	case TypeInvoicePaid:
		var inv invoice
		if err := json.Unmarshal(ev.Object, &inv); err != nil || inv.ID == "" {
			return nil, invalidEvent(MsgEventInvalid)
		}
		md = inv.metadata()
		p.email, p.processorCustomerID, p.currency = inv.CustomerEmail, inv.Customer, inv.Currency
		p.transactionID, p.amountCents = inv.ID, inv.AmountPaid
		p.kind = PaymentSubscriptionRenewal
		if inv.BillingReason == "subscription_create" {
			p.kind = PaymentSubscriptionFirst
		}
		r := []PaymentRef{{inv.ID, RefInvoice}, {inv.PaymentIntent, RefPaymentIntent}, {inv.Charge, RefCharge}}
		if inv.Payments != nil {
			for _, d := range inv.Payments.Data {
				r = append(r, PaymentRef{d.Payment.PaymentIntent, RefPaymentIntent}, PaymentRef{d.Payment.Charge, RefCharge})
			}
		}
		p.refs = refs(r...)
	default:
		return nil, nil
	}
	p.clickID, p.customerKey = md.get("svc_click_id"), md.get("svc_customer_key")
	if id, err := strconv.ParseInt(md.get("program_id"), 10, 64); err == nil && id > 0 {
		p.programID = id
	}
	for _, v := range []string{p.clickID, p.customerKey, p.clientReferenceID, p.email, p.processorCustomerID, p.transactionID} {
		if len(v) > MaxIdentifier {
			return nil, invalidEvent(fmt.Sprintf("Invalid processor event: identifiers are at most %d characters", MaxIdentifier))
		}
	}
	for _, r := range p.refs {
		if len(r.Ref) > MaxIdentifier {
			return nil, invalidEvent(fmt.Sprintf("Invalid processor event: identifiers are at most %d characters", MaxIdentifier))
		}
	}
	if p.amountCents < 0 {
		p.amountCents = 0
	}
	if p.skip == "" && strings.TrimSpace(p.transactionID) == "" {
		// Nothing to key the payment by (tracking and the ledger need an
		// id): refused rather than failed forever.
		return nil, invalidEvent(MsgEventInvalid)
	}
	return &p, nil
}

// refs drops the empty references and repeats.
func refs(in ...PaymentRef) []PaymentRef {
	var out []PaymentRef
	seen := map[string]bool{}
	for _, r := range in {
		r.Ref = strings.TrimSpace(r.Ref)
		if r.Ref == "" || seen[r.Ref] {
			continue
		}
		seen[r.Ref] = true
		out = append(out, r)
	}
	return out
}

var supportedCurrencies = map[string]bool{"USD": true, "EUR": true, "VND": true}

// hashEmail is tracking's form of an email: SHA-256 hex of the trimmed,
// lower-cased address ("" for none).
func hashEmail(email string) string {
	e := strings.ToLower(strings.TrimSpace(email))
	if e == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(e))
	return hex.EncodeToString(sum[:])
}

// pay records a payment of programID: a sale through the sale route's
// reserve → attribute → complete path when something was paid, else only
// the provisional lead's settlement (tracking, settle_lead, no sale).
func (s *Service) pay(ctx context.Context, programID int64, p payment, rec *Record) (Result, error) {
	currency := strings.ToUpper(p.currency)
	if !supportedCurrencies[currency] {
		return Result{Outcome: OutcomeUnsupportedCurr}, nil
	}
	if p.amountCents > MaxAmountCents {
		return Result{Outcome: OutcomeInvalidAmount}, nil
	}
	req := attribution.Request{
		ProgramID: programID, TransactionID: p.transactionID, ClickID: p.clickID, CustomerKey: p.customerKey,
		EmailHash: hashEmail(p.email), ProcessorCustomerID: p.processorCustomerID, AmountCents: p.amountCents,
		Currency: currency, OccurredAt: rec.Created.UTC(), SettleLead: true, Source: attribution.SourceProcessor,
	}
	// client_reference_id is the tracker's fallback for payment links and
	// buy buttons: read only when the metadata carries no click.
	if p.clickID == "" {
		req.ClientReferenceID = p.clientReferenceID
	}
	if s.attr == nil {
		return Result{}, fmt.Errorf("no attribution client (TRACKING_URL, INTERNAL_TOKEN): %w", errkind.Unavailable)
	}
	if p.amountCents == 0 {
		return s.settle(ctx, req)
	}
	ref, err := json.Marshal(req)
	if err != nil {
		return Result{}, fmt.Errorf("encode attribution request: %w", err)
	}
	sale, err := s.ledger.ReserveSale(ctx, ledger.SaleInput{
		TransactionID: p.transactionID, ProgramID: programID, AmountCents: p.amountCents, Currency: currency,
		OccurredAt: req.OccurredAt, Source: ledger.SourceProcessor,
	}, ref)
	var dup *ledger.DuplicateSaleError
	switch {
	case errors.As(err, &dup):
		// The brand's sale call, or an earlier delivery of this payment
		// under another event id, recorded it: keep the event, link the
		// references to that sale, change nothing else.
		rec.Refs = p.refs
		return Result{Outcome: OutcomeDuplicateSale, SaleID: dup.SaleID}, nil
	case err != nil:
		return Result{}, fmt.Errorf("reserve processor sale %s: %w", p.transactionID, err)
	}
	dec, err := s.attr.Attribute(ctx, req)
	switch {
	case errors.Is(err, attribution.ErrCustomerNotFound):
		s.release(ctx, sale.ID)
		return Result{Outcome: OutcomeNoCustomer}, nil
	case err != nil:
		// Tracking could not decide: nothing is kept, the processor
		// retries (tracking answers the same decision for the same id).
		s.release(ctx, sale.ID)
		return Result{}, fmt.Errorf("attribution of processor sale %s: %w", p.transactionID, err)
	case !dec.Attributed():
		s.release(ctx, sale.ID)
		return Result{Outcome: OutcomeNotAttributed, CustomerStatus: dec.CustomerStatus}, nil
	}
	res, err := s.ledger.CompleteSale(ctx, sale.ID, ledger.Attributed{
		ProgramID: programID, CustomerID: dec.CustomerID, CustomerClickID: dec.ClickID, PartnerID: dec.PartnerID,
	})
	var notCreated *ledger.CommissionNotCreatedError
	if errors.As(err, &notCreated) {
		res.Sale.ID = notCreated.SaleID
	} else if err != nil {
		// The reservation stays: the backstop completes it with tracking's
		// stored decision.
		return Result{}, fmt.Errorf("record processor sale %d: %w", sale.ID, err)
	}
	// Recorded (a commission not created now is the backstop's, as on the
	// sale route).
	rec.Refs = p.refs
	return Result{Outcome: OutcomeSaleRecorded, SaleID: res.Sale.ID, CustomerStatus: dec.CustomerStatus}, nil
}

// settle asks tracking to settle the provisional lead of a payment of
// nothing (a free checkout, a trial's $0 first invoice): no sale.
func (s *Service) settle(ctx context.Context, req attribution.Request) (Result, error) {
	dec, err := s.attr.Attribute(ctx, req)
	switch {
	case errors.Is(err, attribution.ErrCustomerNotFound):
		return Result{Outcome: OutcomeNoCustomer}, nil
	case err != nil:
		return Result{}, fmt.Errorf("settlement of %s: %w", req.TransactionID, err)
	case !dec.Attributed():
		return Result{Outcome: OutcomeNotAttributed, CustomerStatus: dec.CustomerStatus}, nil
	case dec.CustomerStatus == "lead":
		return Result{Outcome: OutcomeLeadSettled, CustomerStatus: dec.CustomerStatus}, nil
	}
	return Result{Outcome: OutcomeNothingToDo, CustomerStatus: dec.CustomerStatus}, nil
}

// release gives a reserved sale's id back; a failure leaves it to the
// backstop.
func (s *Service) release(ctx context.Context, saleID int64) {
	if _, err := s.ledger.ReleaseSale(context.WithoutCancel(ctx), saleID); err != nil {
		s.logger.WarnContext(ctx, "release of a reserved processor sale failed; the backstop retries it", "sale_id", saleID, "err", err)
	}
}
