// Package pgstore is the Postgres side of identity: the membership check
// (identity.Memberships) and the user reads every sign-in and dashboard
// route shares. It only reads catalog tables; catalog writes go through
// the catalog service, so their events are published.
package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// Store implements identity.Memberships and reads users.
type Store struct {
	pool *pgxpool.Pool
}

// New makes the store.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

var _ identity.Memberships = (*Store)(nil)

// UserColumns are the users columns ScanUser reads, in its order.
const UserColumns = `id, email, name, advertiser_id, blocked, created_at`

// ScanUser reads a row of UserColumns.
func ScanUser(row pgx.Row) (catalog.User, error) {
	var u catalog.User
	var adv *int64
	err := row.Scan(&u.ID, &u.Email, &u.Name, &adv, &u.Blocked, &u.CreatedAt)
	if adv != nil {
		u.AdvertiserID = *adv
	}
	return u, err
}

// UserByID answers a *catalog.NotFoundError (errkind.NotFound) when the
// user is gone.
func (s *Store) UserByID(ctx context.Context, id int64) (catalog.User, error) {
	u, err := ScanUser(s.pool.QueryRow(ctx, `SELECT `+UserColumns+` FROM users WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.User{}, &catalog.NotFoundError{What: fmt.Sprintf("user %d", id)}
	}
	if err != nil {
		return catalog.User{}, fmt.Errorf("load user %d: %w", id, err)
	}
	return u, nil
}

// MemberAccess reports whether userID may use programID: the program
// exists, the user is an active member of it, and the user is not blocked.
func (s *Store) MemberAccess(ctx context.Context, userID, programID int64) (identity.Access, error) {
	var r identity.Access
	err := s.pool.QueryRow(ctx, `SELECT m.active, u.blocked, m.permissions
		FROM memberships m JOIN users u ON u.id = m.user_id
		WHERE m.program_id = $1 AND m.user_id = $2`, programID, userID).Scan(&r.ActiveMember, &r.Blocked, &r.Permissions)
	if errors.Is(err, pgx.ErrNoRows) {
		return identity.Access{}, nil
	}
	if err != nil {
		return identity.Access{}, fmt.Errorf("load membership of user %d in program %d: %w", userID, programID, err)
	}
	return r, nil
}
