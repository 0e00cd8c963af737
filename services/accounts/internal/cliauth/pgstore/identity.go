package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	idstore "github.com/svc-dev/svc/services/accounts/internal/identity/pgstore"
)

// UserByIdentity reads the user bound to (issuer, subject), through the
// partial unique index users_oidc_identity_key.
func (s *Store) UserByIdentity(ctx context.Context, issuer, subject string) (catalog.User, error) {
	u, err := idstore.ScanUser(s.pool.QueryRow(ctx, `SELECT `+idstore.UserColumns+` FROM users WHERE oidc_issuer = $1 AND oidc_subject = $2`, issuer, subject))
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.User{}, &catalog.NotFoundError{What: "user"}
	}
	if err != nil {
		return catalog.User{}, fmt.Errorf("load user by identity: %w", err)
	}
	return u, nil
}

// BindIdentity sets the identity of a user that has none, in one
// conditional update: a user already bound to this identity matches too
// (a concurrent first sign-in of the same person), one bound to another
// does not. The identity bound to another user meanwhile breaks the
// unique index: not bound either.
func (s *Store) BindIdentity(ctx context.Context, userID int64, issuer, subject string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE users SET oidc_issuer = $2, oidc_subject = $3
		WHERE id = $1 AND (oidc_subject IS NULL OR (oidc_issuer = $2 AND oidc_subject = $3))`, userID, issuer, subject)
	if pg.IsUniqueViolation(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("bind user %d: %w", userID, err)
	}
	return tag.RowsAffected() == 1, nil
}
