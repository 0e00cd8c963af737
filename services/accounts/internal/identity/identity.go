// Package identity is who the person calling accounts is and what they may
// do, shared by the command-line sign-in (cliauth), the dashboard sign-in
// (dashauth) and every dashboard route (settings and the console's
// features): the refusals about the person (suspended, unverified email,
// an id_token refused), the secrets their sign-ins carry, and the one
// program permission check, Authorize. No HTTP or SQL here.
package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"

	"github.com/svc-dev/svc/libs/errkind"
)

// Error is a refusal whose Message (and Code, when set) the client sees as
// the contract writes them. Kind is one of libs/errkind's kinds. The
// service's one error encoder (httperr) words every Error the same way:
// the message, and details.code when Code is set.
type Error struct {
	Kind    error
	Message string
	Code    string
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Kind }

// Refusals of the person at sign-in.
var (
	ErrAccountBlocked   = &Error{Kind: errkind.Forbidden, Message: "Your account has been suspended.", Code: "ACCOUNT_BLOCKED"}
	ErrEmailNotVerified = &Error{Kind: errkind.Forbidden, Message: "Your email address is not verified with your sign-in provider. Verify it there, then try again.", Code: "PROVIDER_EMAIL_NOT_VERIFIED"}
	// ErrInvalidIDToken covers every id_token the provider's keys, issuer,
	// audience, expiry or the session's nonce refuse, and one without an
	// email: the cure is the same, sign in again.
	ErrInvalidIDToken = &Error{Kind: errkind.Unauthenticated, Message: "Invalid id_token"}
)

// Refusals of Authorize, the dashboard routes' program check.
var (
	// ErrNoAccess answers a caller who is not an active member of the
	// program, and a program that does not exist: the two look the same
	// from outside, so program ids cannot be probed.
	ErrNoAccess = &Error{Kind: errkind.Forbidden, Message: "You do not have access to this program"}
	// ErrBlocked answers a suspended account whose session is still valid.
	ErrBlocked = &Error{Kind: errkind.Forbidden, Message: "Your account has been suspended."}
	// ErrReadOnly answers a change by a member who may read the program
	// but not change it (no tracking:write).
	ErrReadOnly = &Error{Kind: errkind.Forbidden, Message: "You do not have permission to change this program's settings"}
)

// Permission is a membership permission of the spec.
type Permission string

// The spec's permissions: reading a program needs an active membership
// (every member holds tracking:read or more); changing it needs
// tracking:write.
const (
	PermissionRead  Permission = "tracking:read"
	PermissionWrite Permission = "tracking:write"
)

// CreatorPermissions are given to the person who creates a program (CLI
// init, the console), so every route works for them at once.
func CreatorPermissions() []string {
	return []string{string(PermissionRead), string(PermissionWrite)}
}

// Access is what the membership check found. A program or membership that
// does not exist is the zero Access.
type Access struct {
	ActiveMember bool
	Blocked      bool
	// Permissions are the membership's (tracking:read, tracking:write).
	Permissions []string
}

// Memberships reads a person's membership of a program.
type Memberships interface {
	MemberAccess(ctx context.Context, userID, programID int64) (Access, error)
}

// Authorizer is the program permission check of every dashboard route.
type Authorizer interface {
	// Authorize answers nil when userID may do what need allows in
	// programID; else ErrBlocked (suspended), ErrNoAccess (not an active
	// member, or no such program), ErrReadOnly (a member without need).
	// Other errors are infrastructure failures.
	Authorize(ctx context.Context, userID, programID int64, need Permission) error
}

type authorizer struct{ m Memberships }

// NewAuthorizer checks the wiring.
func NewAuthorizer(m Memberships) (Authorizer, error) {
	if m == nil {
		return nil, errors.New("identity: a membership store is required")
	}
	return authorizer{m: m}, nil
}

func (a authorizer) Authorize(ctx context.Context, userID, programID int64, need Permission) error {
	if programID <= 0 || userID <= 0 {
		return ErrNoAccess
	}
	acc, err := a.m.MemberAccess(ctx, userID, programID)
	if err != nil {
		return fmt.Errorf("check access: %w", err)
	}
	if acc.Blocked {
		return ErrBlocked
	}
	if !acc.ActiveMember {
		return ErrNoAccess
	}
	// Membership is read access; anything more must be held.
	if need != PermissionRead && !slices.Contains(acc.Permissions, string(need)) {
		return ErrReadOnly
	}
	return nil
}

// HashSecret is how sign-in states, confirmation values and login tokens
// are stored: SHA-256. Each carries 256 random bits, so a slow hash would
// add cost and no protection.
func HashSecret(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// RandomString is n random bytes, base64url without padding.
func RandomString(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
