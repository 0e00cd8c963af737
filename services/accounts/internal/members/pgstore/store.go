// Package pgstore is the Postgres side of the console's team
// (members.Store): reads of a program's memberships with their people.
// Writes go through the catalog.
package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/members"
)

// Store implements members.Store.
type Store struct{ pool *pgxpool.Pool }

// New makes the store.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

var _ members.Store = (*Store)(nil)

const columns = `m.user_id, u.email, u.name, m.permissions, m.active FROM memberships m JOIN users u ON u.id = m.user_id`

func scan(r pgx.Row) (members.Member, error) {
	var m members.Member
	err := r.Scan(&m.UserID, &m.Email, &m.Name, &m.Permissions, &m.Active)
	if m.Permissions == nil {
		m.Permissions = []string{}
	}
	return m, err
}

// List reads a page by the memberships' primary key (program_id, user_id).
func (s *Store) List(ctx context.Context, programID, after int64, limit int) ([]members.Member, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+columns+`
		WHERE m.program_id = $1 AND m.user_id > $2 ORDER BY m.user_id LIMIT $3`, programID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("select members: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (members.Member, error) { return scan(r) })
	if err != nil {
		return nil, fmt.Errorf("scan members: %w", err)
	}
	return out, nil
}

func (s *Store) Get(ctx context.Context, programID, userID int64) (members.Member, error) {
	m, err := scan(s.pool.QueryRow(ctx, `SELECT `+columns+` WHERE m.program_id = $1 AND m.user_id = $2`, programID, userID))
	if errors.Is(err, pgx.ErrNoRows) {
		return members.Member{}, &catalog.NotFoundError{What: fmt.Sprintf("member %d of program %d", userID, programID)}
	}
	if err != nil {
		return members.Member{}, fmt.Errorf("select member: %w", err)
	}
	return m, nil
}
