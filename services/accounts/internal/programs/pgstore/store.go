// Package pgstore is the Postgres side of the console's programs
// (programs.Store): reads of users (identity's) and memberships. Catalog
// writes go through the catalog service.
package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	idstore "github.com/svc-dev/svc/services/accounts/internal/identity/pgstore"
	"github.com/svc-dev/svc/services/accounts/internal/programs"
)

// Store implements programs.Store.
type Store struct {
	pool *pgxpool.Pool
	*idstore.Store
}

// New makes the store.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool, Store: idstore.New(pool)} }

var _ programs.Store = (*Store)(nil)

// ActiveMemberships reads a page of one user's active memberships by
// program id (keyset: program_id > after), through memberships_user.
func (s *Store) ActiveMemberships(ctx context.Context, userID, after int64, limit int) ([]programs.Membership, error) {
	rows, err := s.pool.Query(ctx, `SELECT program_id, permissions FROM memberships
		WHERE user_id = $1 AND active AND program_id > $2 ORDER BY program_id LIMIT $3`, userID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("select memberships: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (programs.Membership, error) {
		var m programs.Membership
		err := r.Scan(&m.ProgramID, &m.Permissions)
		if m.Permissions == nil {
			m.Permissions = []string{}
		}
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("scan memberships: %w", err)
	}
	return out, nil
}
