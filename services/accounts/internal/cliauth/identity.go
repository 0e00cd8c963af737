package cliauth

import (
	"context"
	"errors"
	"fmt"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// ErrIdentityMismatch refuses a sign-in whose verified email belongs to an
// account bound to another identity at the provider (another subject, or
// another issuer): the address may have passed to someone else there (a
// recycled mailbox, a renamed employee, another tenant of a shared
// provider), and an email is not who someone is. The account's owner signs
// in as before; an operator can move the account if the person really
// changed identity.
var ErrIdentityMismatch = &Error{Kind: errkind.Forbidden,
	Message: "This email address belongs to an account that signs in with a different identity. Sign in with that identity, or ask your administrator.",
	Code:    "ACCOUNT_IDENTITY_MISMATCH"}

// IdentityStore binds users to the identity they sign in with: the
// provider's issuer and subject (OpenID Connect's stable, never-reassigned
// key for a person), stored at the first sign-in.
type IdentityStore interface {
	// UserByIdentity is the user bound to (issuer, subject); a
	// *catalog.NotFoundError when none is.
	UserByIdentity(ctx context.Context, issuer, subject string) (catalog.User, error)
	// BindIdentity binds the user to (issuer, subject) unless it is bound
	// already; true when the user is bound to exactly that identity
	// afterwards, false when it is bound to another one (or the identity
	// to another user).
	BindIdentity(ctx context.Context, userID int64, issuer, subject string) (bool, error)
}

// userForIdentity resolves a verified identity to its user:
//  1. the user bound to its issuer and subject, whatever the email says now
//     (an email change at the provider keeps the account);
//  2. else the user with its verified email, bound to it now if that user
//     has no identity yet (users made by the admin API, or before identities
//     were stored); a user bound to another identity is refused
//     (ErrIdentityMismatch), never taken over;
//  3. else a new user with that email and identity, as n makes it (or
//     refuses: the dashboard's invite-only sign-up).
//
// n then finishes the user (n.Known).
//
// A suspended user is refused before anything is bound.
func (s *service) userForIdentity(ctx context.Context, id Identity, email string, n identity.Newcomers) (catalog.User, error) {
	if id.Issuer == "" || id.Subject == "" {
		return catalog.User{}, &refusal{public: ErrInvalidIDToken, reason: errors.New("no issuer or subject")}
	}
	u, err := s.cfg.Store.UserByIdentity(ctx, id.Issuer, id.Subject)
	if err == nil {
		if u.Blocked {
			return catalog.User{}, ErrAccountBlocked
		}
		return known(ctx, n, u)
	}
	if !errors.Is(err, errkind.NotFound) {
		return catalog.User{}, fmt.Errorf("find user by identity: %w", err)
	}
	u, err = s.userFor(ctx, email, id.Name, n)
	if err != nil {
		return catalog.User{}, err
	}
	if u.Blocked {
		return catalog.User{}, ErrAccountBlocked
	}
	bound, err := s.cfg.Store.BindIdentity(ctx, u.ID, id.Issuer, id.Subject)
	if err != nil {
		return catalog.User{}, fmt.Errorf("bind user %d to its identity: %w", u.ID, err)
	}
	if !bound {
		return catalog.User{}, &refusal{public: ErrIdentityMismatch, reason: fmt.Errorf("user %d is bound to another identity than %s of %s", u.ID, id.Subject, id.Issuer)}
	}
	return known(ctx, n, u)
}

// known lets the sign-in's newcomer rule finish a resolved user (the
// dashboard's open sign-up gives one without a workspace its own).
func known(ctx context.Context, n identity.Newcomers, u catalog.User) (catalog.User, error) {
	out, err := n.Known(ctx, u)
	if err != nil {
		return catalog.User{}, fmt.Errorf("finish sign-in of user %d: %w", u.ID, err)
	}
	return out, nil
}
