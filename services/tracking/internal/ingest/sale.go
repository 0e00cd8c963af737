package ingest

import (
	"errors"
	"fmt"
	"time"
)

// The attribution rules' messages (the specification's Track sale table,
// now answered by the commissions service with tracking's refusal) and ours
// where it is silent.
const (
	MsgSaleCustomerNotFound = "Customer not found. Provide customer_key or click_id."
	MsgSaleOtherProgram     = "No affiliate attribution found for this customer in this program"
	MsgSaleNoPartnerProgram = "No partner-program relationship found for this customer"
	msgSaleOutsideWindowFmt = "No affiliate attribution: the customer's click is more than %d days (the program's attribution window) older than its signup or this payment"
)

// Sale sources: a sale the brand's server sent (the commissions service's
// sale route) or a payment-processor event.
const (
	SourceAPI       = "api"
	SourceProcessor = "processor"
)

// Customer statuses a sale moves between.
const (
	customerStatusLead       = "lead"
	customerStatusConversion = "conversion"
)

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

// SaleWrite is the payment an attribution decision is for (the sale
// itself is recorded by the commissions service).
type SaleWrite struct {
	TransactionID       string
	AmountCents         int64
	Currency            string
	OccurredAt          time.Time
	Source              string
	ProcessorCustomerID string
}

// PaymentDecision is what the domain decided for a locked customer.
type PaymentDecision struct {
	// SettleLead settles the customer's provisional lead (status lead).
	SettleLead bool
	// Sale is nil when the payment records no sale.
	Sale *SaleWrite
	// Convert moves the customer to conversion, first purchase at the sale.
	Convert bool
	// Refused: the payment could not be attributed (the decision is
	// stored as refused; nothing else is written).
	Refused error
}

// PaymentResult is what applying a decision did to the customer.
type PaymentResult struct {
	CustomerStatus string
	LeadSettled    bool
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
