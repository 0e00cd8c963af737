// Package pgstore reads the partner rollups for partnerfigures.
package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/services/analytics/internal/partnerfigures"
)

// Store is partnerfigures' Postgres store.
type Store struct{ pool *pgxpool.Pool }

// New is a store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// PartnerFigures sums each partner's buckets of the window: two statements
// in one round trip, each served by its table's (program_id, partner_id,
// bucket) index (migration 00012).
func (s *Store) PartnerFigures(ctx context.Context, programID int64, partners []int64, w partnerfigures.Window) (map[int64]*partnerfigures.Figures, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT partner_id, sum(clicks)::bigint, sum(leads)::bigint, sum(conversions)::bigint FROM partner_buckets
		WHERE program_id = $1 AND partner_id = ANY($2) AND bucket >= $3 AND bucket < $4 GROUP BY 1`, programID, partners, w.From, w.To)
	b.Queue(`SELECT partner_id, currency, sum(revenue_minor)::bigint, sum(commission_minor)::bigint FROM partner_money
		WHERE program_id = $1 AND partner_id = ANY($2) AND bucket >= $3 AND bucket < $4 GROUP BY 1, 2 ORDER BY 1, 2`, programID, partners, w.From, w.To)
	res := s.pool.SendBatch(ctx, b)
	defer res.Close()
	out := map[int64]*partnerfigures.Figures{}
	get := func(id int64) *partnerfigures.Figures {
		f, ok := out[id]
		if !ok {
			f = &partnerfigures.Figures{PartnerID: id}
			out[id] = f
		}
		return f
	}
	rows, err := res.Query()
	if err != nil {
		return nil, fmt.Errorf("read partner counts of program %d: %w", programID, err)
	}
	var id, clicks, leads, conversions int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &clicks, &leads, &conversions}, func() error {
		f := get(id)
		f.Clicks, f.Leads, f.Conversions = clicks, leads, conversions
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read partner counts of program %d: %w", programID, err)
	}
	rows, err = res.Query()
	if err != nil {
		return nil, fmt.Errorf("read partner money of program %d: %w", programID, err)
	}
	var m partnerfigures.Money
	if _, err := pgx.ForEachRow(rows, []any{&id, &m.Currency, &m.Revenue, &m.Commission}, func() error {
		f := get(id)
		f.Money = append(f.Money, m)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read partner money of program %d: %w", programID, err)
	}
	return out, nil
}
