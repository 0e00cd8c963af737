// Package pgstore is the Postgres side of the console's partners list
// (partners.Lister): reads only; changes go through the catalog.
package pgstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/partners"
)

// Store implements partners.Lister.
type Store struct{ pool *pgxpool.Pool }

// New makes the store.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

var _ partners.Lister = (*Store)(nil)

// fixtureEmail is the address of a program's `svc test` fixture partner
// (accounts' integration fixtures): no partner a brand has.
func fixtureEmail(programID int64) string {
	return "test-partner+" + strconv.FormatInt(programID, 10) + "@svc.invalid"
}

// ListEnrolled reads a page by partner_programs' unique (program_id,
// partner_id), then the page's links by links_program_partner (migration
// 00014): two statements whose cost is the page's, not the program's.
func (s *Store) ListEnrolled(ctx context.Context, programID, after int64, limit int) ([]partners.Enrolled, error) {
	rows, err := s.pool.Query(ctx, `SELECT p.id, p.name, p.email, p.created_at, pp.approved, pp.created_at
		FROM partner_programs pp JOIN partners p ON p.id = pp.partner_id
		WHERE pp.program_id = $1 AND pp.partner_id > $2 AND p.email <> $3
		ORDER BY pp.partner_id LIMIT $4`, programID, after, fixtureEmail(programID), limit)
	if err != nil {
		return nil, fmt.Errorf("select partners: %w", err)
	}
	var out []partners.Enrolled
	var e partners.Enrolled
	if _, err := pgx.ForEachRow(rows, []any{&e.Partner.ID, &e.Partner.Name, &e.Partner.Email, &e.Partner.CreatedAt, &e.Approved, &e.EnrolledAt}, func() error {
		out = append(out, e)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("select partners: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	ids := make([]int64, len(out))
	at := make(map[int64]int, len(out))
	for i, e := range out {
		ids[i], at[e.Partner.ID] = e.Partner.ID, i
	}
	rows, err = s.pool.Query(ctx, `SELECT id, program_id, partner_id, code, active, created_at FROM links
		WHERE program_id = $1 AND partner_id = ANY($2) ORDER BY partner_id, id`, programID, ids)
	if err != nil {
		return nil, fmt.Errorf("select links: %w", err)
	}
	var l catalog.Link
	if _, err := pgx.ForEachRow(rows, []any{&l.ID, &l.ProgramID, &l.PartnerID, &l.Code, &l.Active, &l.CreatedAt}, func() error {
		i := at[l.PartnerID]
		out[i].Links = append(out[i].Links, l)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("select links: %w", err)
	}
	return out, nil
}
