// Package pgstore is dashboard.Store over pgx: the catalog replica and the
// pre-aggregated buckets the consumers keep. Money is summed per currency
// in minor units and turned into dollars here, day by day, at the rate of
// that day (fx_rates: the nearest earlier rate; a day before the first
// rate uses the first).
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/services/analytics/internal/dashboard"
)

// Store is dashboard.Store.
type Store struct {
	pool *pgxpool.Pool
}

var _ dashboard.Store = (*Store)(nil)

// New builds the store on pool (search_path: the analytics schema).
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Program reads a program of the replica.
func (s *Store) Program(ctx context.Context, id int64) (dashboard.Program, bool, error) {
	var p dashboard.Program
	var created *time.Time
	err := s.pool.QueryRow(ctx, `SELECT id, created_at, payment_tracking_mode, processor_status, processor_account_id,
			charges_enabled, payouts_enabled, details_submitted, connected_at
		FROM programs WHERE id = $1`, id).Scan(&p.ID, &created, &p.PaymentTrackingMode, &p.ProcessorStatus, &p.ProcessorAccountID,
		&p.ChargesEnabled, &p.PayoutsEnabled, &p.DetailsSubmitted, &p.ConnectedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return dashboard.Program{}, false, nil
	}
	if err != nil {
		return dashboard.Program{}, false, fmt.Errorf("read program %d: %w", id, err)
	}
	if created != nil {
		p.CreatedAt = *created
	}
	return p, true, nil
}

// Member reads a user's membership of a program.
func (s *Store) Member(ctx context.Context, programID, userID int64) (dashboard.Member, bool, error) {
	var m dashboard.Member
	err := s.pool.QueryRow(ctx, `SELECT active, permissions FROM memberships WHERE program_id = $1 AND user_id = $2`,
		programID, userID).Scan(&m.Active, &m.Permissions)
	if errors.Is(err, pgx.ErrNoRows) {
		return dashboard.Member{}, false, nil
	}
	if err != nil {
		return dashboard.Member{}, false, fmt.Errorf("read membership: %w", err)
	}
	return m, true, nil
}

// Days sums the buckets of [from, to) by UTC day: counters, money in
// dollars at each day's rate, and partner-program records created.
func (s *Store) Days(ctx context.Context, programID int64, from, to time.Time) ([]dashboard.Day, error) {
	rows, err := s.pool.Query(ctx, `
		WITH activity AS (
			SELECT (bucket AT TIME ZONE 'UTC')::date AS day, sum(clicks) AS clicks, sum(leads) AS leads,
				sum(conversions) AS conversions, sum(sales) AS sales
			FROM activity_buckets WHERE program_id = $1 AND bucket >= $2 AND bucket < $3 GROUP BY 1
		), money AS (
			SELECT m.day, sum(m.revenue::numeric / 10 ^ c.exponent * r.usd_per_unit) AS revenue,
				sum(m.commission::numeric / 10 ^ c.exponent * r.usd_per_unit) AS commission
			FROM (SELECT (bucket AT TIME ZONE 'UTC')::date AS day, currency, sum(revenue_minor) AS revenue, sum(commission_minor) AS commission
				FROM money_buckets WHERE program_id = $1 AND bucket >= $2 AND bucket < $3 GROUP BY 1, 2) m
			JOIN currencies c ON c.code = m.currency
			CROSS JOIN LATERAL (
				SELECT usd_per_unit FROM fx_rates f WHERE f.currency = m.currency
				ORDER BY (f.valid_from <= m.day) DESC, CASE WHEN f.valid_from <= m.day THEN f.valid_from END DESC NULLS LAST, f.valid_from
				LIMIT 1) r
			GROUP BY m.day
		), partners AS (
			SELECT (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS partners
			FROM partner_programs WHERE program_id = $1 AND created_at >= $2 AND created_at < $3 GROUP BY 1
		)
		SELECT d.day, COALESCE(a.clicks, 0), COALESCE(a.leads, 0), COALESCE(a.conversions, 0), COALESCE(a.sales, 0),
			COALESCE(p.partners, 0), COALESCE(m.revenue, 0)::float8, COALESCE(m.commission, 0)::float8
		FROM (SELECT day FROM activity UNION SELECT day FROM money UNION SELECT day FROM partners) d
		LEFT JOIN activity a ON a.day = d.day LEFT JOIN money m ON m.day = d.day LEFT JOIN partners p ON p.day = d.day
		ORDER BY d.day`, programID, from, to)
	if err != nil {
		return nil, fmt.Errorf("read days of program %d: %w", programID, err)
	}
	days, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (dashboard.Day, error) {
		var d dashboard.Day
		var date time.Time
		err := row.Scan(&date, &d.Clicks, &d.Leads, &d.Conversions, &d.Sales, &d.Partners, &d.Revenue, &d.Commission)
		d.Date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, time.UTC)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("read days of program %d: %w", programID, err)
	}
	return days, nil
}

// FirstActivity is the earliest bucket with a figure, or the earliest
// partner-program record.
func (s *Store) FirstActivity(ctx context.Context, programID int64) (time.Time, bool, error) {
	var first *time.Time
	err := s.pool.QueryRow(ctx, `SELECT min(t) FROM (
			SELECT min(bucket) AS t FROM activity_buckets WHERE program_id = $1
			UNION ALL SELECT min(bucket) FROM money_buckets WHERE program_id = $1
			UNION ALL SELECT min(created_at) FROM partner_programs WHERE program_id = $1) f`, programID).Scan(&first)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("first activity of program %d: %w", programID, err)
	}
	if first == nil {
		return time.Time{}, false, nil
	}
	return *first, true, nil
}

// TestEvents reads the kept test events of a kind (at most 10), newest
// first.
func (s *Store) TestEvents(ctx context.Context, programID int64, kind string) (dashboard.TestEvents, error) {
	rows, err := s.pool.Query(ctx, `SELECT event_id, occurred_at, created_at FROM test_events
		WHERE program_id = $1 AND kind = $2 ORDER BY occurred_at DESC, event_id DESC LIMIT 10`, programID, kind)
	if err != nil {
		return dashboard.TestEvents{}, fmt.Errorf("read test %ss: %w", kind, err)
	}
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (dashboard.TestEvent, error) {
		var e dashboard.TestEvent
		err := row.Scan(&e.ID, &e.Timestamp, &e.CreatedAt)
		return e, err
	})
	if err != nil {
		return dashboard.TestEvents{}, fmt.Errorf("read test %ss: %w", kind, err)
	}
	out := dashboard.TestEvents{Count: len(evs)}
	if len(evs) > 0 {
		out.Latest = &evs[0]
	}
	return out, nil
}

// HasApprovedPartner reports whether the program has an approved
// partner-program record.
func (s *Store) HasApprovedPartner(ctx context.Context, programID int64) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM partner_programs WHERE program_id = $1 AND approved)`, programID).Scan(&ok); err != nil {
		return false, fmt.Errorf("approved partners of program %d: %w", programID, err)
	}
	return ok, nil
}
