// Package ingest is the tracking service's domain: recording clicks, leads
// and visits against the program catalog, with the rules of the interface
// specification (customer status, lead modes, test mode). It knows nothing
// of HTTP, SQL or Kafka.
package ingest

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
)

// The domain's own errors, each wrapping one errkind kind (the transport
// maps kinds to statuses in one table: errkind.Status). Refusals that need
// no name of their own use the kind itself (errkind.Invalid, Forbidden,
// Unauthenticated).
var (
	// ErrLinkDisabled: a click on a link the partner turned off (410, the
	// typed link_disabled envelope with a hint).
	ErrLinkDisabled = fmt.Errorf("referral link disabled: %w", errkind.Gone)
	// ErrNoAttribution: a payment whose customer cannot be credited to a
	// partner of the program (an attribution refused with code
	// no_attribution).
	ErrNoAttribution = fmt.Errorf("no attribution: %w", errkind.Invalid)
)

// Error is a business failure with the exact message the client sees.
type Error struct {
	// Kind is an errkind kind or one of the sentinels above.
	Kind    error
	Message string
	Hint    string
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Kind }

func fail(kind error, msg string) error { return &Error{Kind: kind, Message: msg} }

// The specification's messages.
const (
	MsgAffiliateURLRequired = "affiliate_url is required"
	MsgInvalidAffiliateURL  = "Invalid affiliate_url"
	MsgNoAffParameter       = "No aff parameter found in affiliate_url"
	MsgUnknownProgram       = "Unknown program_id"
	MsgLinkNotFound         = "Referral link not found"
	MsgInvalidLinkConfig    = "Invalid referral link configuration"
	MsgProgramKeyMismatch   = "program_id does not match the API key"
	MsgLinkDisabled         = "This referral link has been disabled"
	HintLinkDisabled        = "The partner's referral link is turned off; no click was recorded. Ask the partner for a current link."

	MsgClickIDOrKeyRequired  = "click_id or customer_key is required"
	MsgClickIDRequiredNoKey  = "click_id is required when no API key is sent"
	MsgCustomerNotFound      = "Customer not found. Provide a valid click_id or customer_key."
	MsgCustomerOtherProgram  = "Customer does not belong to this program"
	MsgLeadAfterSale         = "A sale was already recorded for this customer while its lead was provisional; the lead can no longer be settled"
	MsgTestProgramRequired   = "additional_data.program_id is required in test mode without an API key"
	MsgLeadSettled           = "Lead tracked successfully"
	MsgLeadProvisional       = "Lead recorded as provisional: this program requires leads to be confirmed by your server with the program API key"
	MsgTestClick             = "Test click recorded"
	MsgTestLead              = "Test lead recorded"
	MsgOriginNotAllowed      = "Origin is not allowed for this program"
	MsgProgramIDRequired     = "program_id is required"
	MsgPageURLRequired       = "page_url is required and must be an http or https URL"
	msgStatusCannotBeLeadFmt = "Customer status cannot be updated to lead. Current status: %s"
)

const (
	customerStatusClick      = "click"
	policyBrowserAllowed     = "browser_allowed"
	maxStoredTextLength      = 2048
	defaultAttributionWindow = 60
	clickIDPrefix            = "cust_"
)

// Key is the program API key a request carried, already authenticated.
type Key struct {
	ID        int64
	ProgramID int64
	// Usable is false for a key past its rotation deadline: it still names
	// its program, but grants nothing.
	Usable bool
	// Test is a test key: everything it sends is a test event, with or
	// without additional_data.test_mode, as on the sale route.
	Test bool
}

// test reports whether k is a test key (nil: no key).
func (k *Key) test() bool { return k != nil && k.Test }

// Program is what tracking knows of a program (from its catalog replica).
type Program struct {
	ID                    int64
	AttributionWindowDays int
	LeadAuthPolicy        string
	AllowedOrigins        []string
}

// AllowsOrigin reports whether a browser on origin may call the program's
// browser-mode routes.
func (p Program) AllowsOrigin(origin string) bool {
	for _, o := range p.AllowedOrigins {
		if o == origin {
			return true
		}
	}
	return false
}

// Link is a referral link with its program.
type Link struct {
	ID        int64
	Code      string
	PartnerID int64
	Active    bool
	Program   Program
	// ProgramKnown is false when the link's program is missing from the
	// replica: the link is unusable.
	ProgramKnown bool
}

// Customer is a visitor tracked through a click id.
type Customer struct {
	ID             int64
	ClickID        string
	ProgramID      int64
	Status         string
	FirstPartnerID int64
	CustomerKey    string
	SaleRecorded   bool
	HasProvisional bool
	Program        Program
	// FirstClickAt is when the customer was created by its first click:
	// the click a sale's attribution window is measured from.
	FirstClickAt time.Time
	// SignupDate is zero until a lead settles.
	SignupDate time.Time
	// ProcessorCustomerID is saved from the first attributed payment.
	ProcessorCustomerID string
	// FirstLinkID is the link of the customer's first click.
	FirstLinkID int64
	// FirstPurchaseDate is zero until the customer converts.
	FirstPurchaseDate time.Time
	// PartnerLinked: a partner-program record links the first partner to
	// the customer's program (loaded for sales only).
	PartnerLinked bool
}

// Enrichment is what the server derives from a click's IP and user agent.
type Enrichment struct {
	Country, Region, City, DeviceType, OS, Browser string
}

// Enricher derives geo, device, OS and browser data.
type Enricher interface {
	Enrich(ip netip.Addr, userAgent string) Enrichment
}

// ClickRecord is everything stored for one production click.
type ClickRecord struct {
	Link            Link
	ExistingClickID string // "" when none usable
	ProgramScoped   bool   // program_id was sent: reuse only a customer of that program
	NewClickID      func() string
	Details         ClickDetails
	IP              netip.Addr
	Enrichment      Enrichment
	At              time.Time
}

// ClickDetails are the optional descriptive fields of a click.
type ClickDetails struct {
	PageURL, PageTitle, ReferrerURL, SessionID, UserAgent string
	ScreenResolution, ViewportSize, Language, Timezone    string
	// AffiliateURL is the referral link followed; published, not stored.
	AffiliateURL string
}

// ClickResult is what the store did.
type ClickResult struct {
	EventID     int64
	ClickID     string
	CustomerID  int64
	NewCustomer bool
}

// TestClickRecord stores a test click: no customer, no counters.
type TestClickRecord struct {
	Link       Link
	ProgramID  int64
	Details    ClickDetails
	IP         netip.Addr
	Enrichment Enrichment
	At         time.Time
	// ViaKey: sent with a usable key of ProgramID. Only such a test click
	// counts toward the program's integration verification (the spec:
	// "only a test event sent with the program API key counts").
	ViaKey bool
}

// LeadDecision is what the domain decided for a locked customer.
type LeadDecision struct {
	// Nothing is written when Record is false (a repeated provisional lead).
	Record      bool
	Provisional bool
	CustomerKey string
	EmailHash   string
	EventName   string
	ViaKey      bool
	KeyID       int64
}

// LeadRef names the customer a lead is for.
type LeadRef struct {
	ClickID     string
	CustomerKey string
	// ProgramID limits a customer_key lookup to one program (server mode).
	ProgramID int64
}

// TestLeadRecord stores a test lead.
type TestLeadRecord struct {
	ProgramID   int64
	CustomerID  int64 // 0 when the test lead names no known customer
	ClickID     string
	CustomerKey string
	EmailHash   string
	EventName   string
	ViaKey      bool
	KeyID       int64
	At          time.Time
}

// Visit is one page view.
type Visit struct {
	ProgramID   int64
	ClickID     string
	PageURL     string
	ReferrerURL string
	SessionID   string
	IP          netip.Addr
	At          time.Time
}

// Store persists tracking records. Every write stores its event in the
// outbox in the same transaction.
type Store interface {
	Program(ctx context.Context, id int64) (Program, bool, error)
	// FindLink looks a code up in one program, or in all when programID is 0.
	FindLink(ctx context.Context, code string, programID int64) (Link, bool, error)
	RecordClick(ctx context.Context, rec ClickRecord) (ClickResult, error)
	RecordTestClick(ctx context.Context, rec TestClickRecord) (int64, error)
	// Lead locks the customer named by ref, passes it to decide, and writes
	// what decide returns. found is false when no customer matches.
	Lead(ctx context.Context, ref LeadRef, at time.Time, decide func(Customer) (LeadDecision, error)) (found bool, err error)
	FindCustomer(ctx context.Context, ref LeadRef) (Customer, bool, error)
	RecordTestLead(ctx context.Context, rec TestLeadRecord) (int64, error)
	RecordVisit(ctx context.Context, v Visit) (int64, error)
	AnyProgramAllowsOrigin(ctx context.Context, origin string) (bool, error)

	// Attribute answers the decision stored under req.TransactionID if
	// there is one (Replayed). Otherwise it resolves req.Ref to a customer
	// (locked), passes it to decide, applies what decide returns (a
	// settled lead, the conversion) but records no sale (a settled lead, the conversion, their
	// customer events) and stores the decision, all in one transaction;
	// a concurrent call that stored a decision first wins, and this one's
	// changes roll back. Nothing is stored when no customer matches.
	Attribute(ctx context.Context, req AttributionRequest, decide func(Customer) (PaymentDecision, error)) (AttributionResult, error)
}
