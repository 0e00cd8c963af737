package session

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrRevoked is matched, in addition to ErrInvalidToken, by a token whose
// signature and expiry are fine but whose session no longer stands: it was
// signed out, or its user was suspended where the service has no users of
// its own to say so otherwise. Like any invalid token it is cured by
// signing in again.
var ErrRevoked = errors.New("session token revoked")

// Revocations answers whether a verified session still stands. A signed
// token cannot be recalled, so every service that accepts sessions keeps
// the list of those ended early: accounts its own table, the others a
// replica fed by the catalog topic (catalog.session.revoked, and the
// user's blocked flag).
type Revocations interface {
	// Revoked reports whether the session c no longer stands. An error is
	// a failed lookup, never a refusal.
	Revoked(ctx context.Context, c Claims) (bool, error)
}

// Checker verifies a token of one kind, then asks Revocations whether its
// session still stands: what a route behind a session calls.
type Checker struct {
	verifier    *Verifier
	kind        string
	revocations Revocations
}

// NewChecker returns a Checker of kind tokens.
func NewChecker(v *Verifier, kind string, r Revocations) (*Checker, error) {
	if v == nil || r == nil {
		return nil, errors.New("new session checker: verifier and revocations are required")
	}
	if !validKind(kind) {
		return nil, fmt.Errorf("new session checker: unknown kind %q", kind)
	}
	return &Checker{verifier: v, kind: kind, revocations: r}, nil
}

// Check is VerifyKind followed by the revocation lookup. A refused token
// matches ErrInvalidToken (and ErrExpired or ErrRevoked when that is why);
// a lookup failure matches neither, so the caller answers it as a server
// error, not as a signed-out session.
func (c *Checker) Check(ctx context.Context, token string) (Claims, error) {
	claims, err := c.verifier.VerifyKind(token, c.kind)
	if err != nil {
		return Claims{}, err
	}
	revoked, err := c.revocations.Revoked(ctx, claims)
	if err != nil {
		return Claims{}, fmt.Errorf("check session %s: %w", claims.ID, err)
	}
	if revoked {
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalidToken, ErrRevoked)
	}
	return claims, nil
}

// Verify checks the token alone (signature, expiry, kind), without the
// revocation lookup: for signing out, which ends the session either way.
func (c *Checker) Verify(token string) (Claims, error) {
	return c.verifier.VerifyKind(token, c.kind)
}

// NewDashboardChecker is the dashboard-session check of a service that
// verifies accounts' tokens locally (analytics, commissions): publicKey
// (base64 Ed25519) and issuer verify the token, r holds the replica's
// revocations and suspensions. An empty publicKey answers nil: the
// service then signs every caller out, and says so at start.
func NewDashboardChecker(publicKey, issuer string, now func() time.Time, r Revocations) (*Checker, error) {
	if publicKey == "" {
		return nil, nil
	}
	pub, err := ParsePublicKey(publicKey)
	if err != nil {
		return nil, err
	}
	v, err := NewVerifier(pub, issuer, now)
	if err != nil {
		return nil, err
	}
	return NewChecker(v, KindDashboard, r)
}
