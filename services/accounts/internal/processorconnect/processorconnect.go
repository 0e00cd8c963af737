// Package processorconnect is the brand console's payment-processor
// connection: a member holding tracking:write asks for the processor's
// OAuth authorize URL (with a single-use, expiring state bound to the
// program and to them), the processor sends the person back with a code,
// the code is exchanged and the connected account read, and the account
// with its flags is stored on the program. The connection is catalog data
// (the program's processor_connection): every change is a catalog write
// with its event, so commissions routes the account's webhook events to the
// program and analytics' status route shows the payments step. No HTTP or
// SQL here.
package processorconnect

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// Refusals. The callback's are shown on an HTML page, so they say what to
// do next in words a person reads in a browser.
var (
	ErrReadOnly = &identity.Error{Kind: errkind.Forbidden, Message: "You do not have permission to change this program's payment processor"}
	// ErrNotConfigured answers a connect when the server has no processor
	// credentials (PROCESSOR_CONNECT_CLIENT_ID and the others).
	ErrNotConfigured = &identity.Error{Kind: errkind.Unavailable, Message: "Connecting a payment processor is not configured on this server"}
	// ErrBadState answers a callback whose state is unknown, expired or
	// already used (a replay, a bookmarked or forged link).
	ErrBadState = &identity.Error{Kind: errkind.Invalid,
		Message: "This connection link is invalid, has expired or was already used. Start again from the dashboard: Settings > Payments."}
	// ErrBadCallback answers a callback without a usable code or state.
	ErrBadCallback = &identity.Error{Kind: errkind.Invalid,
		Message: "This connection link is incomplete or malformed. Start again from the dashboard: Settings > Payments."}
	// ErrDeclined answers a callback where the person declined on the
	// processor's page.
	ErrDeclined = &identity.Error{Kind: errkind.Invalid,
		Message: "The payment processor did not approve the connection. Start again from the dashboard: Settings > Payments."}
	// ErrProcessor answers a callback whose code exchange or account
	// retrieval failed: nothing is stored, and the processor's own text is
	// not shown (it may name credentials).
	ErrProcessor = &identity.Error{Kind: errkind.Unavailable,
		Message: "The payment processor could not complete the connection. Nothing was changed; try again from the dashboard: Settings > Payments."}
)

// DefaultStateTTL is how long an authorize URL's state may be used.
const DefaultStateTTL = 15 * time.Minute

// Account is a connected account as the processor reports it.
type Account struct {
	ID               string
	ChargesEnabled   bool
	PayoutsEnabled   bool
	DetailsSubmitted bool
}

// Processor is the processor's OAuth and account API.
type Processor interface {
	// AuthorizeURL is the page where the person approves the connection;
	// it sends them back to the callback with a code and state.
	AuthorizeURL(state string) string
	// Exchange trades an authorization code for the connected account id.
	Exchange(ctx context.Context, code string) (accountID string, err error)
	// Account reads the connected account's flags.
	Account(ctx context.Context, accountID string) (Account, error)
}

// State is what a state was issued for.
type State struct {
	ProgramID int64
	UserID    int64
}

// Store keeps issued states by their hash, never the state itself.
type Store interface {
	SaveState(ctx context.Context, hash []byte, st State, expires time.Time) error
	// TakeState marks the state used and answers what it was issued for;
	// ok is false when it is unknown, used or expired at now.
	TakeState(ctx context.Context, hash []byte, now time.Time) (st State, ok bool, err error)
}

// Catalog is what the routes need of the catalog service: the program's
// guarded write with its event, and the sync barrier.
type Catalog interface {
	UpdateProgram(ctx context.Context, id int64, in catalog.ProgramInput) (catalog.Program, catalog.Seq, error)
	WaitForSync(ctx context.Context, seq catalog.Seq, timeout time.Duration) error
}

// Service is the connection's use cases; userID comes from a verified
// dashboard session, except in Callback where the state names the person.
type Service interface {
	// Connect answers the authorize URL for programID.
	Connect(ctx context.Context, userID, programID int64) (string, error)
	// Callback takes the state, exchanges the code and stores the account
	// on the state's program. Errors are the refusals above or
	// infrastructure failures.
	Callback(ctx context.Context, code, state, processorError string) (catalog.Program, catalog.Seq, error)
	// Disconnect clears programID's connection.
	Disconnect(ctx context.Context, userID, programID int64) (catalog.Program, catalog.Seq, error)
	CanChange(ctx context.Context, userID, programID int64) error
}

// Config wires the service. Processor nil: not configured (connect
// answers ErrNotConfigured; disconnect still works).
type Config struct {
	Access    identity.Authorizer
	Store     Store
	Catalog   Catalog
	Processor Processor
	Now       func() time.Time
	StateTTL  time.Duration // DefaultStateTTL when zero
	// SyncTimeout bounds the wait for the replicas after a change, so the
	// console's status reads the new connection when the person lands.
	SyncTimeout time.Duration
	// Random fills a state; crypto/rand when nil.
	Random func([]byte) error
}

type service struct{ cfg Config }

// NewService checks the wiring.
func NewService(cfg Config) (Service, error) {
	if cfg.Access == nil || cfg.Store == nil || cfg.Catalog == nil || cfg.Now == nil {
		return nil, errors.New("processorconnect: authorizer, store, catalog and clock are required")
	}
	if cfg.StateTTL <= 0 {
		cfg.StateTTL = DefaultStateTTL
	}
	if cfg.Random == nil {
		cfg.Random = func(b []byte) error { _, err := rand.Read(b); return err }
	}
	return &service{cfg: cfg}, nil
}

func (s *service) CanChange(ctx context.Context, userID, programID int64) error {
	err := s.cfg.Access.Authorize(ctx, userID, programID, identity.PermissionWrite)
	if errors.Is(err, identity.ErrReadOnly) {
		return ErrReadOnly
	}
	return err
}

// HashState is what the store keeps of a state.
func HashState(state string) []byte {
	h := sha256.Sum256([]byte(state))
	return h[:]
}

func (s *service) Connect(ctx context.Context, userID, programID int64) (string, error) {
	if err := s.CanChange(ctx, userID, programID); err != nil {
		return "", err
	}
	if s.cfg.Processor == nil {
		return "", ErrNotConfigured
	}
	b := make([]byte, 32)
	if err := s.cfg.Random(b); err != nil {
		return "", fmt.Errorf("state: %w", err)
	}
	state := base64.RawURLEncoding.EncodeToString(b)
	if err := s.cfg.Store.SaveState(ctx, HashState(state), State{ProgramID: programID, UserID: userID}, s.cfg.Now().Add(s.cfg.StateTTL)); err != nil {
		return "", fmt.Errorf("save state: %w", err)
	}
	return s.cfg.Processor.AuthorizeURL(state), nil
}

func (s *service) Callback(ctx context.Context, code, state, processorError string) (catalog.Program, catalog.Seq, error) {
	if state == "" {
		return catalog.Program{}, 0, ErrBadCallback
	}
	// The state is used up first, whatever follows: a link seen twice
	// (a replay, a reload) never connects twice.
	st, ok, err := s.cfg.Store.TakeState(ctx, HashState(state), s.cfg.Now())
	if err != nil {
		return catalog.Program{}, 0, fmt.Errorf("take state: %w", err)
	}
	if !ok {
		return catalog.Program{}, 0, ErrBadState
	}
	if processorError != "" {
		return catalog.Program{}, 0, ErrDeclined
	}
	if code == "" {
		return catalog.Program{}, 0, ErrBadCallback
	}
	// The person may have lost tracking:write (or been removed) since
	// they asked for the link.
	if err := s.CanChange(ctx, st.UserID, st.ProgramID); err != nil {
		return catalog.Program{}, 0, err
	}
	if s.cfg.Processor == nil {
		return catalog.Program{}, 0, ErrNotConfigured
	}
	acctID, err := s.cfg.Processor.Exchange(ctx, code)
	if err != nil || acctID == "" || len(acctID) > 255 {
		return catalog.Program{}, 0, errors.Join(ErrProcessor, err)
	}
	acct, err := s.cfg.Processor.Account(ctx, acctID)
	if err != nil || acct.ID != acctID {
		return catalog.Program{}, 0, errors.Join(ErrProcessor, err)
	}
	status := catalog.ProcessorConnected
	now := s.cfg.Now().UTC()
	p, seq, err := s.cfg.Catalog.UpdateProgram(ctx, st.ProgramID, catalog.ProgramInput{Processor: &catalog.ProcessorInput{
		Status: &status, AccountID: &acct.ID, ChargesEnabled: &acct.ChargesEnabled, PayoutsEnabled: &acct.PayoutsEnabled,
		DetailsSubmitted: &acct.DetailsSubmitted, ConnectedAt: &now,
	}})
	if err != nil {
		return catalog.Program{}, 0, fmt.Errorf("store connection of program %d: %w", st.ProgramID, err)
	}
	s.wait(ctx, seq)
	return p, seq, nil
}

func (s *service) Disconnect(ctx context.Context, userID, programID int64) (catalog.Program, catalog.Seq, error) {
	if err := s.CanChange(ctx, userID, programID); err != nil {
		return catalog.Program{}, 0, err
	}
	status, none, off := catalog.ProcessorNotConnected, "", false
	p, seq, err := s.cfg.Catalog.UpdateProgram(ctx, programID, catalog.ProgramInput{Processor: &catalog.ProcessorInput{
		Status: &status, AccountID: &none, ChargesEnabled: &off, PayoutsEnabled: &off, DetailsSubmitted: &off, ConnectedAtNull: true,
	}})
	if err != nil {
		return catalog.Program{}, 0, fmt.Errorf("disconnect program %d: %w", programID, err)
	}
	s.wait(ctx, seq)
	return p, seq, nil
}

// wait lets the replicas catch up before the answer, so the console's
// next status read shows the change. The change is stored either way: a
// slow replica is not the person's failure, so a timeout is not an error.
func (s *service) wait(ctx context.Context, seq catalog.Seq) {
	if s.cfg.SyncTimeout > 0 && seq > 0 {
		_ = s.cfg.Catalog.WaitForSync(ctx, seq, s.cfg.SyncTimeout)
	}
}
