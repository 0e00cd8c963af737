// Package dashauth is the brand dashboard's browser sign-in: a sign-in
// started in the browser (state and nonce, stored hashed, 5 minutes, used
// once) goes to the OpenID provider, whose id_token comes back to the
// callback; the id_token is checked exactly as the command-line sign-in
// checks it (cliauth's Identify), and a dashboard session token is issued
// for the page named by return_to. It also lists the signed-in user's
// programs for the dashboard's program picker. No HTTP, SQL or OpenID
// library here: the store, the identity check and the token issuer are
// interfaces.
package dashauth

import (
	"context"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// Refusals. They are identity.Errors (one kind, a client message and an
// optional code) so the service's one error encoder words them the same
// way; the refusals of the person and their id_token are identity's, the
// same as the command-line sign-in's.
var (
	ErrBadReturnTo      = &identity.Error{Kind: errkind.Invalid, Message: "return_to must be a path under " + DashboardPrefix + ", like " + DashboardPrefix}
	ErrBadTabNonce      = &identity.Error{Kind: errkind.Invalid, Message: "tab_nonce must be 16 to 128 letters, digits, '-' or '_'"}
	ErrMissingFields    = &identity.Error{Kind: errkind.Invalid, Message: "Missing required fields: state, id_token"}
	ErrSessionNotFound  = &identity.Error{Kind: errkind.NotFound, Message: "Sign-in not found or already used. Sign in again."}
	ErrSessionExpired   = &identity.Error{Kind: errkind.Invalid, Message: "Sign-in expired. Sign in again."}
	ErrOtherBrowser     = &identity.Error{Kind: errkind.Invalid, Message: "This sign-in was started in another browser. Sign in again.", Code: "SIGNIN_BROWSER_MISMATCH"}
	ErrNotConfigured    = &identity.Error{Kind: errkind.Unavailable, Message: "Dashboard sign-in is not configured on this server"}
	ErrUserNotFound     = &identity.Error{Kind: errkind.Unauthenticated, Message: "Invalid session token. Sign in again."}
	ErrAccountBlocked   = identity.ErrAccountBlocked
	ErrInvalidIDToken   = identity.ErrInvalidIDToken
	ErrEmailNotVerified = identity.ErrEmailNotVerified
)

// DashboardPrefix is the dashboard page's path: a sign-in returns only
// under it. The page there is the one that checks the tab nonce; any other
// page of the site would take the session fragment without checking it.
const DashboardPrefix = "/dashboard/"

// DefaultSessionTTL is how long a started sign-in may take (the command-line
// link's lifetime).
const DefaultSessionTTL = 5 * time.Minute

// Session is a browser sign-in in progress.
type Session struct {
	ID        int64
	StateHash []byte
	Nonce     string
	ReturnTo  string
	// TabNonce is the value the dashboard page stored in its tab before
	// starting the sign-in ("" when it sent none); it goes back in the
	// fragment beside the session so the page can tell its own sign-in
	// from a link someone else made (login CSRF).
	TabNonce   string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	ConsumedAt *time.Time
}

// Membership is one program the user may open in the dashboard.
type Membership struct {
	ProgramID int64
	// AdvertiserID is the program's workspace.
	AdvertiserID int64
	Name         string
	Domain       string
	Permissions  []string
}

// Workspace is an advertiser the user owns (their own, users.advertiser_id)
// or works in (the workspace of a program they are an active member of).
type Workspace struct {
	ID    int64
	Name  string
	Owner bool
}

// Store keeps sign-in sessions and reads the catalog tables.
type Store interface {
	CreateSession(ctx context.Context, s Session) error
	// SessionByState answers ErrSessionNotFound when no session has the hash.
	SessionByState(ctx context.Context, stateHash []byte) (Session, error)
	// ConsumeSession marks an unconsumed session used if it has not
	// expired at `at`; false when it no longer qualifies (a race lost).
	ConsumeSession(ctx context.Context, id int64, at time.Time) (bool, error)
	// Sweep deletes sessions created before `before`, a bounded batch.
	Sweep(ctx context.Context, before time.Time) error
	// UserByID answers a *catalog.NotFoundError (errkind.NotFound) when
	// the user is gone.
	UserByID(ctx context.Context, id int64) (catalog.User, error)
	// Memberships lists the programs the user is an active member of, by id.
	Memberships(ctx context.Context, userID int64) ([]Membership, error)
	// Workspaces lists the user's own workspace and those of the programs
	// they are an active member of, by id.
	Workspaces(ctx context.Context, userID int64) ([]Workspace, error)
}

// Identifier checks an id_token against a nonce and resolves its user
// (the command-line sign-in's Identify, wired in server).
type Identifier interface {
	Identify(ctx context.Context, idToken, nonce string) (catalog.User, error)
}

// TokenIssuer signs dashboard session tokens (libs/auth/session).
type TokenIssuer interface {
	IssueDashboard(userID int64) (token string, expiresAt time.Time, err error)
}

// Started is a new browser sign-in: the provider's URL to send the browser
// to, and the state, which the transport also binds to the browser.
type Started struct {
	URL       string
	State     string
	ExpiresAt time.Time
}

// SignedIn is a finished sign-in: the dashboard session token and where
// the browser goes with it.
type SignedIn struct {
	Token     string
	ExpiresAt time.Time
	ReturnTo  string
	TabNonce  string
	User      catalog.User
}

// Me is the signed-in user, their workspaces and the programs they can
// open.
type Me struct {
	User       catalog.User
	Workspaces []Workspace
	Programs   []Membership
}

// Service is the dashboard sign-in's use cases.
type Service interface {
	// Start begins a sign-in that will return to returnTo ("" for the
	// dashboard's own path) with tabNonce ("" for none) in its fragment.
	Start(ctx context.Context, returnTo, tabNonce string) (Started, error)
	// Callback finishes it. browserState is the state the browser that
	// started it holds (its cookie); it must equal state.
	Callback(ctx context.Context, state, idToken, browserState string) (SignedIn, error)
	// Me lists the workspaces and programs of the session's user.
	Me(ctx context.Context, userID int64) (Me, error)
}
