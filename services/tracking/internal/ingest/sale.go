package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
)

// The sale route's messages (the specification's Track sale table) and ours
// where it is silent.
const (
	MsgSaleCustomerNotFound = "Customer not found. Provide customer_key or click_id."
	MsgSaleOtherProgram     = "No affiliate attribution found for this customer in this program"
	MsgSaleNoPartnerProgram = "No partner-program relationship found for this customer"
	MsgSaleDuplicate        = "Duplicate transaction_id. This sale has already been recorded."
	MsgSaleTracked          = "Sale tracked successfully"
	MsgTestSale             = "Test sale recorded"
	msgSaleOutsideWindowFmt = "No affiliate attribution: the customer's click is more than %d days (the program's attribution window) older than its signup or this payment"
)

// Sale sources.
const (
	SourceAPI       = "api"
	SourceProcessor = "processor"
)

// Customer statuses a sale moves between.
const (
	customerStatusLead       = "lead"
	customerStatusConversion = "conversion"
)

// SaleInput is a decoded, shape-checked sale request.
type SaleInput struct {
	Key               *Key // always set: the route requires a key
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

// SaleOutput answers a sale.
type SaleOutput struct {
	SaleID         int64
	TransactionID  string
	CustomerStatus string
	ClickID        string
	Message        string
	Test           *TestEvent
}

// SaleRef names the customer a payment is for. Lookups are tried in the
// order of the fields; ClickID matches in any program (so a customer of
// another program is reported as such), the others only in ProgramID.
type SaleRef struct {
	ProgramID           int64
	ClickID             string
	EmailHash           string
	ProcessorCustomerID string
	ClientReferenceID   string
	CustomerKey         string
}

// SaleWrite is one sale to store.
type SaleWrite struct {
	TransactionID       string
	AmountCents         int64
	Currency            string
	OccurredAt          time.Time
	Provider            string
	ProviderPaymentID   string
	Livemode            *bool
	Source              string
	PaymentKind         string
	ProcessorCustomerID string
	APIKeyID            int64
}

// PaymentDecision is what the domain decided for a locked customer.
type PaymentDecision struct {
	// SettleLead settles the customer's provisional lead (status lead).
	SettleLead bool
	// Sale is nil when the payment records no sale.
	Sale *SaleWrite
	// Convert moves the customer to conversion, first purchase at the sale.
	Convert bool
	// Refused writes nothing but the processor event: the payment could
	// not be attributed (a processor delivery is acknowledged, not failed).
	Refused error
}

// PaymentRequest is one payment to resolve and record.
type PaymentRequest struct {
	Ref SaleRef
	// TransactionID is checked for an existing sale first; "" when the
	// payment records no sale.
	TransactionID string
	Event         *ProcessorEvent
	At            time.Time
}

// PaymentResult is what Pay did.
type PaymentResult struct {
	Found          bool
	SaleID         int64
	CustomerStatus string
	ClickID        string
	LeadSettled    bool
	// Refused is the decision's refusal (the processor event is stored
	// with it as its outcome).
	Refused error
}

// ProcessorEvent is a payment-processor event as received.
type ProcessorEvent struct {
	ID        string
	Type      string
	AccountID string
	ProgramID int64
	Payload   []byte
	Outcome   string
}

// TestSaleRecord stores a test sale: no attribution, no commission.
type TestSaleRecord struct {
	ProgramID  int64
	CustomerID int64 // 0 when no customer of the program was named
	ClickID    string
	Sale       SaleWrite
	At         time.Time
}

func (s *service) Sale(ctx context.Context, in SaleInput) (SaleOutput, error) {
	if in.Key == nil {
		return SaleOutput{}, fail(errkind.Unauthenticated, "Invalid API token")
	}
	sale := SaleWrite{
		TransactionID: in.TransactionID, AmountCents: in.AmountCents, Currency: in.Currency, OccurredAt: in.OccurredAt.UTC(),
		Provider: in.Provider, ProviderPaymentID: in.ProviderPaymentID, Livemode: in.Livemode, Source: SourceAPI, APIKeyID: in.Key.ID,
	}
	if in.TestMode || in.Key.Test {
		return s.testSale(ctx, in, sale)
	}
	if in.ClickID == "" && in.CustomerKey == "" {
		return SaleOutput{}, fail(ErrNoAttribution, MsgSaleCustomerNotFound)
	}
	programID := in.Key.ProgramID
	res, err := s.store.Pay(ctx, PaymentRequest{
		Ref:           SaleRef{ProgramID: programID, ClickID: in.ClickID, CustomerKey: in.CustomerKey},
		TransactionID: sale.TransactionID, At: s.now().UTC(),
	}, func(c Customer) (PaymentDecision, error) {
		return attribute(c, programID, &sale, false)
	})
	if err != nil {
		return SaleOutput{}, err
	}
	if !res.Found {
		return SaleOutput{}, fail(ErrNoAttribution, MsgSaleCustomerNotFound)
	}
	return SaleOutput{SaleID: res.SaleID, TransactionID: sale.TransactionID, CustomerStatus: res.CustomerStatus,
		ClickID: res.ClickID, Message: MsgSaleTracked}, nil
}

func (s *service) testSale(ctx context.Context, in SaleInput, sale SaleWrite) (SaleOutput, error) {
	rec := TestSaleRecord{ProgramID: in.Key.ProgramID, Sale: sale, At: s.now().UTC()}
	if in.ClickID != "" || in.CustomerKey != "" {
		c, ok, err := s.store.FindCustomer(ctx, LeadRef{ClickID: in.ClickID, CustomerKey: in.CustomerKey, ProgramID: in.Key.ProgramID})
		if err != nil {
			return SaleOutput{}, err
		}
		if ok && c.ProgramID == in.Key.ProgramID {
			rec.CustomerID, rec.ClickID = c.ID, c.ClickID
		}
	}
	id, err := s.store.RecordTestSale(ctx, rec)
	if err != nil {
		return SaleOutput{}, err
	}
	return SaleOutput{SaleID: id, TransactionID: sale.TransactionID, Message: MsgTestSale,
		Test: &TestEvent{EventID: id, ProgramID: in.Key.ProgramID, Message: MsgTestSale}}, nil
}

// attribute is the sale rules for one customer: the program and partner
// checks, the attribution window, and the status change. With settle, a
// provisional lead is settled first (a processor checkout event), which
// also makes its signup the window's reference. sale may be nil (a payment
// of nothing, which can still settle the lead).
func attribute(c Customer, programID int64, sale *SaleWrite, settle bool) (PaymentDecision, error) {
	if c.ProgramID != programID {
		return PaymentDecision{}, fail(ErrNoAttribution, MsgSaleOtherProgram)
	}
	d := PaymentDecision{}
	status, signup, provisional := c.Status, c.SignupDate, c.HasProvisional && c.Status == customerStatusClick
	if settle && provisional {
		d.SettleLead, status, provisional = true, customerStatusLead, false
		if sale != nil {
			signup = sale.OccurredAt
		}
	}
	if sale == nil {
		return d, nil
	}
	if !c.PartnerLinked {
		return PaymentDecision{}, fail(ErrNoAttribution, MsgSaleNoPartnerProgram)
	}
	if status != customerStatusConversion {
		window := c.Program.AttributionWindowDays
		if window <= 0 {
			window = defaultAttributionWindow
		}
		ref := sale.OccurredAt
		if !signup.IsZero() {
			ref = signup
		}
		if ref.Sub(c.FirstClickAt) > time.Duration(window)*24*time.Hour {
			return PaymentDecision{}, fail(ErrNoAttribution, fmt.Sprintf(msgSaleOutsideWindowFmt, window))
		}
	}
	d.Sale = sale
	// A provisional lead stays provisional: the sale neither settles it nor
	// converts the customer (and a later Bearer lead is refused).
	d.Convert = !provisional && status != customerStatusConversion
	return d, nil
}

// isBusiness reports whether err is a refusal with a client-facing message.
func isBusiness(err error) bool {
	var be *Error
	return errors.As(err, &be)
}
