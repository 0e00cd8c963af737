// Package signup is what the dashboard's sign-in makes of a person
// (identity.Newcomers), by SIGNUP: open, the first sign-in of an unknown,
// verified email makes the user and a workspace (an advertiser) they own,
// in one catalog transaction whose events reach every replica, and a known
// user without a workspace gets one; invite, an unknown person is refused
// (identity.ErrNotInvited) and nothing is written. The command-line
// sign-in keeps making plain users (cliauth). No HTTP or SQL here.
package signup

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

type service struct {
	mode  identity.Signup
	store catalog.WorkspaceStore
}

// New checks the wiring.
func New(mode identity.Signup, store catalog.WorkspaceStore) (identity.Newcomers, error) {
	if _, err := identity.ParseSignup(string(mode)); err != nil {
		return nil, fmt.Errorf("signup: mode %w", err)
	}
	if store == nil {
		return nil, errors.New("signup: a workspace store is required")
	}
	return &service{mode: mode, store: store}, nil
}

// maxName is the catalog's limit on a user's name; a longer name from the
// provider is cut rather than refused (the person cannot change it here).
const maxName = 200

func (s *service) NewUser(ctx context.Context, email, name string) (catalog.User, error) {
	if s.mode != identity.SignupOpen {
		return catalog.User{}, identity.ErrNotInvited
	}
	in := catalog.UserInput{Email: &email}
	if name = strings.TrimSpace(name); name != "" {
		name = cut(name, maxName)
		in.Name = &name
	}
	u, a, err := catalog.NewWorkspaceUser(in)
	if err != nil {
		return catalog.User{}, err
	}
	u, _, err = s.store.CreateUserWithWorkspace(ctx, u, a)
	if err != nil {
		return catalog.User{}, fmt.Errorf("create user with workspace: %w", err)
	}
	return u, nil
}

func (s *service) Known(ctx context.Context, u catalog.User) (catalog.User, error) {
	if s.mode != identity.SignupOpen || u.AdvertiserID != 0 {
		return u, nil
	}
	// A user made by the command-line sign-in, an operator or an
	// invitation has no workspace: open sign-up gives them one too, so
	// nobody signs in to a console where they can create nothing.
	out, _, err := s.store.AddWorkspace(ctx, u.ID, catalog.WorkspaceOf(u))
	if err != nil {
		return catalog.User{}, fmt.Errorf("add workspace of user %d: %w", u.ID, err)
	}
	return out, nil
}

// cut shortens s to at most n bytes without splitting a character.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
