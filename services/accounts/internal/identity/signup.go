package identity

import (
	"context"
	"fmt"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

// Signup is who may become a user by signing in to the dashboard
// (SIGNUP).
type Signup string

const (
	// SignupOpen: the first dashboard sign-in of an unknown, verified
	// email makes the user and a workspace (an advertiser) they own.
	SignupOpen Signup = "open"
	// SignupInvite: only people who already have a user (made by an
	// operator, or invited to a program) sign in; others are told whom to
	// ask (ErrNotInvited).
	SignupInvite Signup = "invite"
)

// ParseSignup reads SIGNUP's value.
func ParseSignup(v string) (Signup, error) {
	switch s := Signup(v); s {
	case SignupOpen, SignupInvite:
		return s, nil
	}
	return "", fmt.Errorf("must be %q or %q, got %q", SignupOpen, SignupInvite, v)
}

// ErrNotInvited answers the dashboard sign-in of a person no user has, on
// a server that signs up only invited people.
var ErrNotInvited = &Error{Kind: errkind.Forbidden,
	Message: "There is no account for this email address yet, and this server signs up invited people only. Ask the owner of your workspace to invite you (they add you as a member of their program), then sign in again.",
	Code:    "SIGNUP_INVITE_ONLY"}

// Newcomers decides what a sign-in makes of a person: the user of an email
// no user has, and what a known user gets once identified. The command-line
// sign-in makes a plain user; the dashboard's follows Signup
// (internal/signup).
type Newcomers interface {
	// NewUser makes the user of a verified email no user has, or refuses
	// (ErrNotInvited). A *catalog.ConflictError when a concurrent sign-in
	// made it first; errkind.Invalid when the catalog refuses the email.
	NewUser(ctx context.Context, email, name string) (catalog.User, error)
	// Known is called with the user a sign-in resolved to (identity
	// bound, not blocked) and answers the user as it is afterwards.
	Known(ctx context.Context, u catalog.User) (catalog.User, error)
}
