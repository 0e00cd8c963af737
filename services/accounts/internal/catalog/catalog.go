// Package catalog holds the accounts service's domain: the program catalog
// (advertisers, users, memberships, programs, program API keys, partners,
// partner-program records and referral links) and the rules for changing it.
// It knows nothing of HTTP, SQL or Kafka.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
)

// Errors wrap the kinds of libs/errkind (the service's one error encoder
// maps kinds to statuses).

// ErrSyncTimeout is the sync barrier's wait running out before every
// consumer applied the sequence: a real timeout (504 GatewayTimeoutError),
// so it wraps no kind (not errkind.Unavailable: nothing is down).
var ErrSyncTimeout = errors.New("timed out")

// ErrShuttingDown ends a sync barrier wait when the service begins to shut
// down: a wait may last up to a minute, longer than the shutdown grace,
// and the client is better told to retry (against another replica) than
// cut off.
var ErrShuttingDown = fmt.Errorf("the service is shutting down; retry the request: %w", errkind.Unavailable)

// FieldError is a validation failure that names the offending field. Its
// message is the one the client sees.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Message }
func (e *FieldError) Unwrap() error { return errkind.Invalid }

func invalid(field, msg string) error { return &FieldError{Field: field, Message: msg} }

// NotFoundError names what was missing, e.g. "program 42 not found".
type NotFoundError struct{ What string }

func (e *NotFoundError) Error() string { return e.What + " not found" }
func (e *NotFoundError) Unwrap() error { return errkind.NotFound }

// ConflictError explains which uniqueness rule a write broke.
type ConflictError struct{ Message string }

func (e *ConflictError) Error() string { return e.Message }
func (e *ConflictError) Unwrap() error { return errkind.Conflict }

// KeyExistsError is a program API key whose hash is already stored: an
// imported key sent twice, or a key already issued here. It names the stored
// key so an admin client (the local stack's seed) can recognise its own key.
type KeyExistsError struct {
	KeyID     int64
	ProgramID int64
}

func (e *KeyExistsError) Error() string { return "this API key already exists" }
func (e *KeyExistsError) Unwrap() error { return errkind.Conflict }

// Commission types, lead auth policies and payment tracking modes of the spec.
const (
	CommissionPercent          = "percent"
	CommissionFixed            = "fixed"
	CommissionRecurringPercent = "recurring_percent"
	CommissionRecurringFixed   = "recurring_fixed"

	LeadAuthServerRequired = "server_required"
	LeadAuthBrowserAllowed = "browser_allowed"

	PaymentProcessorConnect = "processor_connect"
	PaymentS2S              = "s2s"

	ProcessorNotConnected = "not_connected"
	ProcessorConnected    = "connected"
)

// Currencies a program may pay in: the currency of its fixed rewards
// (fixed and recurring_fixed commission_rate, lead_commission) and of its
// payouts. Codes are ISO 4217, upper case, matched exactly like the other
// enumerated program fields.
const (
	CurrencyUSD = "USD"
	CurrencyEUR = "EUR"
	CurrencyVND = "VND"
)

// currencyDecimals is each currency's number of decimal places in major
// units (cents for USD and EUR, none for VND), as commissions' money rules
// count them.
var currencyDecimals = map[string]int{CurrencyUSD: 2, CurrencyEUR: 2, CurrencyVND: 0}

// Defaults of a new program.
const (
	DefaultAttributionWindowDays = 60
	DefaultHoldDays              = 30
	DefaultDurationMonths        = 0
	DefaultCurrency              = CurrencyUSD
	DefaultLeadCommission        = "0" // no lead reward
)

type Advertiser struct {
	ID        int64
	Name      string
	Email     string
	CreatedAt time.Time
}

type User struct {
	ID           int64
	Email        string
	Name         string
	AdvertiserID int64 // 0 when the user has no advertiser yet
	Blocked      bool
	CreatedAt    time.Time
}

type Membership struct {
	ProgramID   int64
	UserID      int64
	Active      bool
	Permissions []string
}

// ProcessorConnection is the state of the program's payment-processor
// account, as last reported to accounts.
type ProcessorConnection struct {
	Status           string
	AccountID        string
	ChargesEnabled   bool
	PayoutsEnabled   bool
	DetailsSubmitted bool
	ConnectedAt      *time.Time
}

type Program struct {
	ID                    int64
	AdvertiserID          int64
	Name                  string
	Domain                string
	CommissionType        string
	CommissionRate        string // canonical decimal, e.g. "12.5"
	DurationMonths        int
	CookieDuration        *int // days; set when created from the CLI
	AttributionWindowDays int
	HoldDays              int
	LeadAuthPolicy        string
	PaymentTrackingMode   string
	Processor             ProcessorConnection
	AllowedOrigins        []string
	Currency              string // CurrencyUSD, CurrencyEUR or CurrencyVND
	LeadCommission        string // canonical decimal in major units of Currency, "0" for none
	CreatedAt             time.Time
	UpdatedAt             time.Time
}

type APIKey struct {
	ID        int64
	ProgramID int64
	Hash      []byte
	Prefix    string
	// Last4 is the key's last 4 characters, kept for masked display; empty
	// for keys issued before they were kept.
	Last4            string
	Test             bool
	RotationMarkedAt *time.Time
	RotationDeadline *time.Time
	// RevokedAt is set once the key is revoked; every service refuses it.
	RevokedAt *time.Time
	// LastUsedAt is the latest successful authentication reported by the
	// services that authenticate keys (within their report interval).
	LastUsedAt *time.Time
	CreatedAt  time.Time
}

type Partner struct {
	ID        int64
	Name      string
	Email     string
	CreatedAt time.Time
}

type PartnerProgram struct {
	ID        int64
	PartnerID int64
	ProgramID int64
	Approved  bool
	CreatedAt time.Time
}

type Link struct {
	ID        int64
	ProgramID int64
	PartnerID int64
	Code      string
	Active    bool
	CreatedAt time.Time
}

// SessionRevocation is a dashboard session signed out before its expiry.
// Session tokens are signed, not stored, so the revocation is what makes
// the token stop working: accounts keeps it, and publishes it on the
// catalog topic so every service that accepts sessions keeps it too, until
// ExpiresAt (the token's own expiry; after it the token is refused anyway).
type SessionRevocation struct {
	SessionID string // the token's jti
	UserID    int64
	ExpiresAt time.Time
	RevokedAt time.Time
}

// Seq is the catalog sequence number a write was published under. Waiting
// for every consumer to reach it is the propagation barrier.
type Seq int64

// Store persists the catalog. Every mutating method writes the entity and
// its catalog event in one transaction and returns the event's sequence.
type Store interface {
	CreateAdvertiser(ctx context.Context, a Advertiser) (Advertiser, Seq, error)
	CreateUser(ctx context.Context, u User) (User, Seq, error)
	CreateProgram(ctx context.Context, p Program) (Program, Seq, error)
	// UpdateProgram loads the program, applies fn and saves the result; fn
	// returning an error aborts the write.
	UpdateProgram(ctx context.Context, id int64, fn func(*Program) error) (Program, Seq, error)
	UpsertMembership(ctx context.Context, m Membership) (Membership, Seq, error)
	// CreateAPIKey returns *KeyExistsError, and writes nothing, when a key
	// with the same hash is already stored.
	CreateAPIKey(ctx context.Context, k APIKey) (APIKey, Seq, error)
	// UpdateAPIKey loads the key, applies fn and saves the result.
	UpdateAPIKey(ctx context.Context, id int64, fn func(*APIKey) error) (APIKey, Seq, error)
	CreatePartner(ctx context.Context, p Partner) (Partner, Seq, error)
	CreatePartnerProgram(ctx context.Context, pp PartnerProgram) (PartnerProgram, Seq, error)
	CreateLink(ctx context.Context, l Link) (Link, Seq, error)
	UpdateLink(ctx context.Context, id int64, fn func(*Link) error) (Link, Seq, error)
	// UpdateUser loads the user, applies fn and saves the result.
	UpdateUser(ctx context.Context, id int64, fn func(*User) error) (User, Seq, error)
	// RevokeSession stores r and publishes it; Seq 0 and no event when the
	// session was already revoked. Revocations whose tokens expired before
	// r.RevokedAt (less a margin for clock skew) are deleted in the same
	// transaction, a bounded batch, so the table holds only tokens that
	// could still be used.
	RevokeSession(ctx context.Context, r SessionRevocation) (Seq, error)
	// SessionRevoked reports whether the session id was revoked.
	SessionRevoked(ctx context.Context, id string) (bool, error)
	GetUser(ctx context.Context, id int64) (User, error)
	GetProgram(ctx context.Context, id int64) (Program, error)
	// GetPrograms reads the programs of ids that exist, by id, in one
	// statement (a console page lists up to 100).
	GetPrograms(ctx context.Context, ids []int64) ([]Program, error)

	// Reads for admin clients that find what exists before creating it. The
	// emails passed are already lower case; lists are ordered by id, and a
	// list under an advertiser or program that does not exist is a
	// *NotFoundError, not an empty list.
	FindUserByEmail(ctx context.Context, email string) (User, error)
	ListPrograms(ctx context.Context, advertiserID int64) ([]Program, error)
	FindPartnersByEmail(ctx context.Context, email string) ([]Partner, error)
	// ListLinks lists the program's links, only the one with code when code
	// is not nil.
	ListLinks(ctx context.Context, programID int64, code *string) ([]Link, error)
	ListAPIKeys(ctx context.Context, programID int64) ([]APIKey, error)

	// AppliedSeqs reports, per consuming service, the catalog sequence up to
	// which it has applied every event.
	AppliedSeqs(ctx context.Context) (map[string]Seq, error)
}
