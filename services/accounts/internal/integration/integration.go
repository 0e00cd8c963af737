// Package integration is the domain behind the command-line routes that a
// program API key calls to check and exercise its integration: the program's
// integration state (which tracking steps have test events, how sales are
// tracked) and test events sent through the real tracking path, alone or as
// a synthetic click → lead → sale chain on test fixtures. It knows nothing of
// HTTP, SQL or Kafka.
package integration

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

// ErrRateLimited is a limit counted inside the endpoint being reached (the
// chain cap, or tracking's own limits): a 429 with Retry-After, which no
// libs/errkind kind means, so it is its own case of the service's error
// encoder. Refusals otherwise wrap errkind's kinds; anything else is an
// infrastructure failure (500).
var ErrRateLimited = errors.New("rate limited")

// EventType is what POST test-event sends.
type EventType string

const (
	EventClick EventType = "click"
	EventLead  EventType = "lead"
	EventSale  EventType = "sale"
)

// InvalidEventTypeError is a test-event body whose event_type is not one of
// the three; Value is what the client sent, rendered as text.
type InvalidEventTypeError struct{ Value string }

func (e *InvalidEventTypeError) Error() string {
	return "Invalid event_type: " + e.Value + ". Valid: click, lead, sale"
}
func (e *InvalidEventTypeError) Unwrap() error { return errkind.Invalid }

// ParseEventType accepts exactly the contract's three values.
func ParseEventType(v string) (EventType, error) {
	switch t := EventType(v); t {
	case EventClick, EventLead, EventSale:
		return t, nil
	}
	return "", &InvalidEventTypeError{Value: v}
}

// StepRecorded is the outcome of a chain step tracking recorded; a step
// that fails fails the whole chain, so it is the only outcome answered.
const StepRecorded = "recorded"

// ChainStep is one step of a synthetic chain and what became of it.
type ChainStep struct {
	Step    EventType
	Status  string
	EventID int64
}

// ChainLimitError refuses a chain over the per-program hourly cap.
type ChainLimitError struct {
	Limit      int
	RetryAfter time.Duration
}

func (e *ChainLimitError) Error() string {
	return fmt.Sprintf("Too many synthetic chains (max %d/program/hour).", e.Limit)
}
func (e *ChainLimitError) Unwrap() error { return ErrRateLimited }

// UpstreamLimitError is tracking refusing a test event with its own rate
// limit (per client address); the client may retry after RetryAfter.
type UpstreamLimitError struct {
	Message    string
	RetryAfter time.Duration
}

func (e *UpstreamLimitError) Error() string { return e.Message }
func (e *UpstreamLimitError) Unwrap() error { return ErrRateLimited }

// Step statuses of the status route.
const (
	StepPending  = "pending"
	StepComplete = "complete"
)

// MaxListedTestEvents caps testEventCount, as the contract's tracking status
// does ("up to 10").
const MaxListedTestEvents = 10

// TestEvent is one test event as the status route shows it.
type TestEvent struct {
	ID        int64
	Timestamp time.Time // when the event happened (the click or lead time)
	CreatedAt time.Time // when tracking committed it
}

// EventStats summarises one step's test events.
type EventStats struct {
	Count  int // up to MaxListedTestEvents
	Latest *TestEvent
}

// Has reports whether the step has at least one test event.
func (s EventStats) Has() bool { return s.Count > 0 }

// Step is the step status the events give.
func (s EventStats) Step() string {
	if s.Has() {
		return StepComplete
	}
	return StepPending
}

// Payments is how the program tracks sales.
type Payments struct {
	Mode             string
	ConnectionStatus string
	AccountID        string
	ChargesEnabled   bool
	PayoutsEnabled   bool
	DetailsSubmitted bool
	ConnectedAt      *time.Time
}

// Connected reports whether a payment processor account is connected.
func (p Payments) Connected() bool { return p.ConnectionStatus == catalog.ProcessorConnected }

// Ready is the payments step: a connected processor, or sales sent by the
// brand's server.
func (p Payments) Ready() bool { return p.Connected() || p.Mode == catalog.PaymentS2S }

// Step is the payments step status.
func (p Payments) Step() string {
	if p.Ready() {
		return StepComplete
	}
	return StepPending
}

// Status is a program's integration state.
type Status struct {
	ProgramID   int64
	Pageview    EventStats // test clicks sent with the program key
	Referrals   EventStats // test leads sent with the program key
	Payments    Payments
	HasPartners bool
	GeneratedAt time.Time
}

// Kinds of stored test events.
const (
	KindClick = "click"
	KindLead  = "lead"
)

// RecordedEvent is a tracking event as the status keeps it.
type RecordedEvent struct {
	Kind        string
	EventID     int64
	ProgramID   int64
	OccurredAt  time.Time
	PublishedAt time.Time
}

// CountsForVerification says whether a tracking event counts toward the
// program's integration state: a test click or lead sent with the program
// API key ("only a test event sent with the program API key counts toward
// integration verification"); anyone can send a key-less one naming any
// program. Analytics' status and readiness apply the same rule.
func CountsForVerification(kind string, isTest, viaAPIKey bool) bool {
	switch kind {
	case KindClick, KindLead:
		return isTest && viaAPIKey
	}
	return false
}

// Caller is who asked for a test event: the program key is forwarded to
// tracking as the caller's own credential, and the client address and
// request id so tracking limits and logs it as the caller's request.
type Caller struct {
	ProgramID int64
	APIKey    string
	ClientIP  string
	RequestID string
}

// TestClick is the test click sent to tracking.
type TestClick struct {
	ProgramID    int64
	AffiliateURL string
	PageURL      string
}

// TestLead is the test lead sent to tracking.
type TestLead struct {
	ProgramID int64
	EventName string
}

// Recorded is tracking's answer to a test event.
type Recorded struct {
	EventID   int64
	ProgramID int64
	Message   string
}

// Test sale amount: a fixed, small, round sum (USD 10.00), so a test sale
// is plain to spot as one in any report that shows it.
const (
	TestSaleAmountCents = 1000
	TestSaleCurrency    = "USD"
)

// TestSale is the test sale sent to tracking. It names no click: the
// chain's test click is recorded without a customer (tracking answers an
// event id, not a click id), so there is no customer to link the sale to.
type TestSale struct {
	ProgramID   int64
	AmountCents int64
	Currency    string
}

// Tracker sends test events through the real tracking routes.
type Tracker interface {
	TestClick(ctx context.Context, c Caller, click TestClick) (Recorded, error)
	TestLead(ctx context.Context, c Caller, lead TestLead) (Recorded, error)
	TestSale(ctx context.Context, c Caller, sale TestSale) (Recorded, error)
}

// FixtureLink is the program's test link as stored.
type FixtureLink struct {
	ID        int64
	PartnerID int64
	Active    bool
}

// Store is what the service reads and counts in accounts' own tables.
// Catalog writes never go through it: they go through Catalog, so catalog
// events reach the replicas.
type Store interface {
	// TestEvents counts a program's stored test events of kind, up to
	// limit, and returns the latest.
	TestEvents(ctx context.Context, programID int64, kind string, limit int) (EventStats, error)
	// HasApprovedPartners reports whether an approved partner-program record
	// exists for the program, leaving out partners with exceptEmail (the
	// test fixture partner).
	HasApprovedPartners(ctx context.Context, programID int64, exceptEmail string) (bool, error)
	FindLink(ctx context.Context, programID int64, code string) (FixtureLink, bool, error)
	// FindPartnerByEmail returns the oldest partner with this email.
	FindPartnerByEmail(ctx context.Context, email string) (int64, bool, error)
	PartnerEnrolled(ctx context.Context, programID, partnerID int64) (bool, error)
	// CatalogSeq is the sequence of the last committed catalog event.
	CatalogSeq(ctx context.Context) (catalog.Seq, error)
	// ReserveChainRun records a chain run for the program at now unless
	// limit runs already started within window before now; then it records
	// nothing and returns how long until a run is allowed again.
	ReserveChainRun(ctx context.Context, programID int64, now time.Time, window time.Duration, limit int, requestID string) (retryAfter time.Duration, ok bool, err error)
}

// Catalog is the part of the catalog service the fixtures need.
type Catalog interface {
	GetProgram(ctx context.Context, id int64) (catalog.Program, error)
	CreatePartner(ctx context.Context, in catalog.PartnerInput) (catalog.Partner, catalog.Seq, error)
	AddPartnerToProgram(ctx context.Context, programID int64, in catalog.PartnerProgramInput) (catalog.PartnerProgram, catalog.Seq, error)
	CreateLink(ctx context.Context, programID int64, in catalog.LinkInput) (catalog.Link, catalog.Seq, error)
	SetLinkActive(ctx context.Context, linkID int64, active bool) (catalog.Link, catalog.Seq, error)
	WaitForSync(ctx context.Context, seq catalog.Seq, timeout time.Duration) error
}
