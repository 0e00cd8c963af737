// Package sessions ends dashboard sessions before their expiry (sign-out)
// and answers, for every accounts route behind a session, whether a
// session still stands. Session tokens are signed and verified without a
// lookup (libs/auth/session), so a token would otherwise work until its
// expiry whatever its user did: a sign-out records the token's id as a
// catalog revocation, which accounts checks itself and publishes on the
// catalog topic for the other services' replicas (analytics). No HTTP or
// SQL here.
package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

// DefaultPropagationTimeout bounds how long a sign-out waits for every
// replica to hold the revocation before it answers: the answer then means
// the session is refused everywhere. Past it the sign-out answers anyway
// (the revocation is stored and reaches the replicas when they catch up).
const DefaultPropagationTimeout = 5 * time.Second

// Catalog is what the service needs of the catalog: the revocations and
// the sync barrier (catalog.Service).
type Catalog interface {
	RevokeSession(ctx context.Context, r catalog.SessionRevocation) (catalog.Seq, error)
	SessionRevoked(ctx context.Context, sessionID string) (bool, error)
	WaitForSync(ctx context.Context, seq catalog.Seq, timeout time.Duration) error
}

// Tokens verifies session tokens (*session.Verifier).
type Tokens interface {
	VerifyKind(token, kind string) (session.Claims, error)
}

// Config wires the service.
type Config struct {
	Catalog            Catalog
	Tokens             Tokens
	Now                func() time.Time
	PropagationTimeout time.Duration // DefaultPropagationTimeout when zero
}

// SignedOut is what a sign-out did.
type SignedOut struct {
	// Revoked: the token was a live dashboard session, now ended (or
	// already ended by an earlier sign-out).
	Revoked bool
	// Lag is set when a replica had not applied the revocation when the
	// wait ended: why, for the logs. The session is refused by accounts
	// already and by the others once they catch up.
	Lag error
}

// Service is the sessions' use cases.
type Service interface {
	// SignOut ends the dashboard session token names. A token that opens
	// nothing (missing, invalid, expired, another kind) is left alone: a
	// sign-out always succeeds, and writes nothing for such a token.
	SignOut(ctx context.Context, token string) (SignedOut, error)
	// Revoked reports whether the session was signed out
	// (session.Revocations). A suspended user is the domain's concern
	// in accounts (routes answer it 403 from the users table).
	Revoked(ctx context.Context, c session.Claims) (bool, error)
}

type service struct{ cfg Config }

// NewService checks the wiring.
func NewService(cfg Config) (Service, error) {
	if cfg.Catalog == nil || cfg.Tokens == nil || cfg.Now == nil {
		return nil, errors.New("sessions: catalog, tokens and clock are required")
	}
	if cfg.PropagationTimeout <= 0 {
		cfg.PropagationTimeout = DefaultPropagationTimeout
	}
	return &service{cfg: cfg}, nil
}

func (s *service) SignOut(ctx context.Context, token string) (SignedOut, error) {
	if token == "" {
		return SignedOut{}, nil
	}
	c, err := s.cfg.Tokens.VerifyKind(token, session.KindDashboard)
	if err != nil {
		return SignedOut{}, nil
	}
	seq, err := s.cfg.Catalog.RevokeSession(ctx, catalog.SessionRevocation{
		SessionID: c.ID, UserID: c.UserID, ExpiresAt: c.ExpiresAt, RevokedAt: s.cfg.Now().UTC(),
	})
	if err != nil {
		return SignedOut{}, fmt.Errorf("revoke session %s of user %d: %w", c.ID, c.UserID, err)
	}
	if seq == 0 {
		// Signed out before: that sign-out waited for the replicas.
		return SignedOut{Revoked: true}, nil
	}
	if err := s.cfg.Catalog.WaitForSync(ctx, seq, s.cfg.PropagationTimeout); err != nil {
		return SignedOut{Revoked: true, Lag: err}, nil
	}
	return SignedOut{Revoked: true}, nil
}

func (s *service) Revoked(ctx context.Context, c session.Claims) (bool, error) {
	return s.cfg.Catalog.SessionRevoked(ctx, c.ID)
}
