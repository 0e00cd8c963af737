// Package pgstore is the Postgres side of the console's partners list
// (partners.Lister): reads only; changes go through the catalog.
package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

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
// partner_id) and each of its partners' links by links_program_partner
// (migration 00014), in one statement: its cost is the page's, not the
// program's, and the page is one round trip. `p.id > $2` repeats the
// keyset on partners, so a merge join starts at the page, not at the
// first partner (it walked 5,000 partners for a page at 5,000); the links
// are read per partner by key (OFFSET 0 keeps the planner from hashing
// all of the program's links). A partner comes once per link
// (once with none), its rows together, in the page's order.
func (s *Store) ListEnrolled(ctx context.Context, programID, after int64, limit int) ([]partners.Enrolled, error) {
	rows, err := s.pool.Query(ctx, `SELECT page.id, page.name, page.email, page.created_at, page.approved, page.enrolled_at,
			l.id, l.code, l.active, l.created_at
		FROM (SELECT p.id, p.name, p.email, p.created_at, pp.approved, pp.created_at AS enrolled_at
			FROM partner_programs pp JOIN partners p ON p.id = pp.partner_id
			WHERE pp.program_id = $1 AND pp.partner_id > $2 AND p.id > $2 AND p.email <> $3
			ORDER BY pp.partner_id LIMIT $4) page
		LEFT JOIN LATERAL (SELECT l.id, l.code, l.active, l.created_at FROM links l
			WHERE l.program_id = $1 AND l.partner_id = page.id OFFSET 0) l ON true
		ORDER BY page.id, l.id`, programID, after, fixtureEmail(programID), limit)
	if err != nil {
		return nil, fmt.Errorf("select partners: %w", err)
	}
	var out []partners.Enrolled
	var e partners.Enrolled
	var linkID *int64
	var code *string
	var active *bool
	var linkAt *time.Time
	if _, err := pgx.ForEachRow(rows, []any{&e.Partner.ID, &e.Partner.Name, &e.Partner.Email, &e.Partner.CreatedAt, &e.Approved, &e.EnrolledAt,
		&linkID, &code, &active, &linkAt}, func() error {
		if n := len(out); n == 0 || out[n-1].Partner.ID != e.Partner.ID {
			e.Links = nil
			out = append(out, e)
		}
		if linkID != nil {
			last := &out[len(out)-1]
			last.Links = append(last.Links, catalog.Link{ID: *linkID, ProgramID: programID, PartnerID: e.Partner.ID,
				Code: *code, Active: *active, CreatedAt: *linkAt})
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("select partners: %w", err)
	}
	if out == nil {
		out = []partners.Enrolled{}
	}
	return out, nil
}
