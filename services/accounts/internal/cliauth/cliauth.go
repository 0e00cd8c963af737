// Package cliauth is the command-line client's account side: sign-in
// sessions (a sign-in link, verified by the OpenID provider's id_token),
// login tokens, and the routes a login token opens (init: create a program
// with its first API key; programs: list them). It knows nothing of HTTP,
// SQL or OpenID libraries: the id_token verifier and the store are
// interfaces, and catalog writes go through the catalog service so their
// events reach the replicas.
package cliauth

import (
	"context"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// Error is the person's refusal type, shared with the dashboard sign-in
// and routes (identity.Error): the service's one error encoder words them
// all the same way.
type Error = identity.Error

// Refusals of the sign-in routes, with the contract's messages.
var (
	ErrMissingCallbackFields = &Error{Kind: errkind.Invalid, Message: "Missing required fields: state, id_token"}
	ErrSessionNotFoundOrUsed = &Error{Kind: errkind.NotFound, Message: "Session not found or already used"}
	ErrSessionExpired        = &Error{Kind: errkind.Invalid, Message: "Session expired"}
	ErrAccountBlocked        = identity.ErrAccountBlocked
	ErrEmailNotVerified      = identity.ErrEmailNotVerified
	ErrMissingState          = &Error{Kind: errkind.Invalid, Message: "Missing state parameter"}
	ErrSessionNotFound       = &Error{Kind: errkind.NotFound, Message: "Session not found"}
	ErrSessionConsumed       = &Error{Kind: errkind.Invalid, Message: "Session already consumed"}
	ErrInvalidIDToken        = identity.ErrInvalidIDToken
	// ErrNotConfigured answers the sign-in routes of a server started
	// without an OpenID provider.
	ErrNotConfigured = &Error{Kind: errkind.Unavailable, Message: "Command-line sign-in is not configured on this server"}
)

// Refusals of the login-token routes. The transport words the 401s per
// route (the contract's init and programs messages differ).
var (
	// ErrTokenInvalid: no login token has this value, or it expired.
	ErrTokenInvalid = &Error{Kind: errkind.Unauthenticated, Message: "Invalid or expired token"}
	// ErrUserNotFound: the token's user no longer exists.
	ErrUserNotFound       = &Error{Kind: errkind.Unauthenticated, Message: "User not found"}
	ErrNoAdvertiser       = &Error{Kind: errkind.Forbidden, Message: "No advertiser found for this account. Run \"svc login\" to sign in with the account of your advertiser."}
	ErrAdvertiserMismatch = &Error{Kind: errkind.Forbidden, Message: "advertiser_id does not match the authenticated account"}
)

// Session statuses answered by Poll.
const (
	StatusPending  = "pending"
	StatusExpired  = "expired"
	StatusComplete = "complete"
)

// Defaults.
const (
	// DefaultSessionTTL is the contract's sign-in link lifetime.
	DefaultSessionTTL = 5 * time.Minute
	// DefaultTokenTTL is how long a login token works.
	DefaultTokenTTL = 30 * 24 * time.Hour
	// LoginTokenPrefix marks login tokens so they are recognisable in a
	// leaked-secret scan and never mistaken for program keys.
	LoginTokenPrefix = "svc_cli_"
)

// Session is a command-line sign-in in progress.
type Session struct {
	ID        int64
	StateHash []byte
	Nonce     string
	// UserCode is shown by the CLI and on the page the sign-in lands on;
	// the person confirms there that the two match (see Confirm).
	UserCode   string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	UserID     int64 // 0 until the callback signs it in
	SignedInAt *time.Time
	// ConfirmHash is the SHA-256 of the one-time value the callback gave
	// the landing page; ConfirmedAt is set when the person confirmed.
	ConfirmHash []byte
	ConfirmedAt *time.Time
	ConsumedAt  *time.Time
}

// LoginToken is a login token as stored: its hash only.
type LoginToken struct {
	Hash      []byte
	UserID    int64
	SessionID int64
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Identity is what a verified id_token says about the person signing in.
type Identity struct {
	// Issuer and Subject identify the person at the provider for good; the
	// email can change or pass to someone else (identity.go).
	Issuer        string
	Subject       string
	Email         string
	EmailVerified bool
	Name          string
	Nonce         string
}

// IDTokenVerifier checks an id_token as OpenID Connect requires (signature
// against the provider's keys, issuer, audience, expiry). A token it
// refuses is an error matching errkind.Unauthenticated; a failure to reach the
// provider's keys matches errkind.Unavailable.
type IDTokenVerifier interface {
	Verify(ctx context.Context, rawIDToken string) (Identity, error)
}

// Store persists sessions and tokens and reads the users and programs they
// lead to. Catalog writes do not go through it.
type Store interface {
	CreateSession(ctx context.Context, s Session) (Session, error)
	// SessionByState returns ErrSessionNotFound when no session has the hash.
	SessionByState(ctx context.Context, stateHash []byte) (Session, error)
	// LinkSession signs an unsigned, unconsumed session in for userID if it
	// has not expired at `at`, with the hash of its confirmation value;
	// false when it no longer qualifies.
	LinkSession(ctx context.Context, id, userID int64, at time.Time, confirmHash []byte) (bool, error)
	// SessionByConfirm returns ErrConfirmNotFound when no session has the
	// confirmation hash.
	SessionByConfirm(ctx context.Context, confirmHash []byte) (Session, error)
	// ConfirmSession marks a signed-in, unconfirmed, unconsumed session
	// confirmed; false when it no longer qualifies.
	ConfirmSession(ctx context.Context, id int64, at time.Time) (bool, error)
	// ConsumeSession marks a confirmed session consumed and stores its login
	// token in one transaction; false when it was already consumed.
	ConsumeSession(ctx context.Context, id int64, at time.Time, tok LoginToken) (bool, error)
	IdentityStore
	// UserByEmail matches case-insensitively; a *catalog.NotFoundError when
	// there is none.
	UserByEmail(ctx context.Context, email string) (catalog.User, error)
	UserByID(ctx context.Context, id int64) (catalog.User, error)
	// UserByToken returns ErrTokenInvalid when no unexpired token has the
	// hash at now, and ErrUserNotFound when its user is gone.
	UserByToken(ctx context.Context, tokenHash []byte, now time.Time) (catalog.User, error)
	ProgramIDsByAdvertiser(ctx context.Context, advertiserID int64) ([]int64, error)
	// Sweep deletes sessions created before `before` and tokens expired
	// before it, a bounded batch at a time.
	Sweep(ctx context.Context, before time.Time) error
}

// Started is a new sign-in session: the state the client polls with and the
// link it opens.
type Started struct {
	State     string
	URL       string
	UserCode  string
	ExpiresAt time.Time
}

// SignedIn is the outcome of a successful callback: the user, the code to
// compare with the CLI's, and the one-time value that confirms it (for the
// landing page only; the poller never sees it).
type SignedIn struct {
	User         catalog.User
	UserCode     string
	ConfirmToken string
}

// Confirmed is the outcome of a confirmation.
type Confirmed struct {
	User     catalog.User
	UserCode string
}

// PollResult is a session's state as the polling client sees it. Token is
// set only once, on the first poll after sign-in.
type PollResult struct {
	Status         string
	Token          string
	TokenExpiresAt time.Time
	User           catalog.User
}

// InitInput is POST init's body: the program as sent (raw JSON numbers, see
// catalog.ProgramInput) and the optional advertiser_id as raw JSON.
type InitInput struct {
	Program      catalog.ProgramInput
	AdvertiserID *string
}

// Initialized is a program made by init and its first API key, shown once.
type Initialized struct {
	Program catalog.Program
	APIKey  string
	Seq     catalog.Seq
}

// Service is the command-line account routes' use cases.
type Service interface {
	Start(ctx context.Context) (Started, error)
	// Callback signs the session in; its token waits for Confirm.
	Callback(ctx context.Context, state, idToken string) (SignedIn, error)
	// Confirm records that the person who signed in saw the CLI's code on
	// the landing page and confirmed it, with the callback's one-time value.
	Confirm(ctx context.Context, confirmToken string) (Confirmed, error)
	// Identify verifies an id_token against nonce and resolves its user
	// (created when new), with the sign-in refusals: ErrInvalidIDToken,
	// ErrEmailNotVerified, ErrAccountBlocked, ErrNotConfigured.
	Identify(ctx context.Context, idToken, nonce string) (catalog.User, error)
	// IdentifyWith is Identify with another rule for newcomers (the
	// dashboard's sign-up, internal/signup).
	IdentifyWith(ctx context.Context, idToken, nonce string, n identity.Newcomers) (catalog.User, error)
	Poll(ctx context.Context, state string) (PollResult, error)
	// Authenticate resolves a login token to its user.
	Authenticate(ctx context.Context, token string) (catalog.User, error)
	Init(ctx context.Context, user catalog.User, in InitInput) (Initialized, error)
	Programs(ctx context.Context, user catalog.User) ([]catalog.Program, error)
}
