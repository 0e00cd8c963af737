// Package pgstore is dashboard.Store over pgx: the catalog replica and the
// pre-aggregated buckets the consumers keep. Money is summed per currency
// and UTC day in minor units and turned into dollars here at the rate of
// that day (fx_rate_on over fx_rates: the nearest earlier rate; a day
// before the first rate uses the first).
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/services/analytics/internal/dashboard"
	"github.com/svc-dev/svc/services/analytics/internal/sources"
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
	return scanProgram(s.pool.QueryRow(ctx, `SELECT `+programColumns+` FROM programs p WHERE p.id = $1`, id), id)
}

// ActiveMemberProgram reads the program when the user is an active member
// of it, in one query.
func (s *Store) ActiveMemberProgram(ctx context.Context, programID, userID int64) (dashboard.Program, bool, error) {
	return scanProgram(s.pool.QueryRow(ctx, `SELECT `+programColumns+`
		FROM programs p JOIN memberships m ON m.program_id = p.id AND m.user_id = $2 AND m.active
		WHERE p.id = $1`, programID, userID), programID)
}

const programColumns = `p.id, p.created_at, p.payment_tracking_mode, p.processor_status, p.processor_account_id,
	p.charges_enabled, p.payouts_enabled, p.details_submitted, p.connected_at`

func scanProgram(row pgx.Row, id int64) (dashboard.Program, bool, error) {
	var p dashboard.Program
	var created *time.Time
	err := row.Scan(&p.ID, &created, &p.PaymentTrackingMode, &p.ProcessorStatus, &p.ProcessorAccountID,
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

// Days sums the span by calendar day of its zone: counters, money in
// dollars at the rate of each amount's UTC day, and partner-program
// records created. UTC days read the daily rollups (one row per day, the
// records created counted in the same round trip); another zone's days
// group the 15-minute buckets.
func (s *Store) Days(ctx context.Context, programID int64, span dashboard.Span) ([]dashboard.Day, error) {
	if span.Loc == time.UTC {
		return s.utcDays(ctx, programID, span)
	}
	rows, err := s.pool.Query(ctx, daysByBucket, programID, span.From(), span.To(), span.Loc.String())
	if err != nil {
		return nil, fmt.Errorf("read days of program %d: %w", programID, err)
	}
	days, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (dashboard.Day, error) {
		var d dashboard.Day
		var date time.Time
		err := row.Scan(&date, &d.Clicks, &d.Leads, &d.Conversions, &d.Sales, &d.Refunds, &d.Partners, &d.Revenue, &d.Commission, &d.Refunded, &d.FXEstimated)
		d.Date = utcDate(date)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("read days of program %d: %w", programID, err)
	}
	return days, nil
}

// utcDays reads the daily rollups, which hold each UTC day's counters and
// its dollars (migration 00008), and the partner-program records created
// per day, as two statements simple enough to plan in a tenth of a
// millisecond (joined in one, planning them was most of the query), sent
// together; then merges them by day.
func (s *Store) utcDays(ctx context.Context, programID int64, span dashboard.Span) ([]dashboard.Day, error) {
	from, to := span.From(), span.To()
	batch := &pgx.Batch{}
	var days []dashboard.Day
	batch.Queue(`SELECT day, clicks, leads, conversions, sales, refunds, revenue_usd::float8, commission_usd::float8, refunded_usd::float8, fx_estimated FROM activity_days
		WHERE program_id = $1 AND day >= $2::date AND day < $3::date ORDER BY day`, programID, from, to).
		Query(func(rows pgx.Rows) error {
			var err error
			days, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (dashboard.Day, error) {
				var d dashboard.Day
				var date time.Time
				err := row.Scan(&date, &d.Clicks, &d.Leads, &d.Conversions, &d.Sales, &d.Refunds, &d.Revenue, &d.Commission, &d.Refunded, &d.FXEstimated)
				d.Date = utcDate(date)
				return d, err
			})
			return err
		})
	type created struct {
		date time.Time
		n    int64
	}
	var partners []created
	batch.Queue(`SELECT (created_at AT TIME ZONE 'UTC')::date, count(*) FROM partner_programs pp
		WHERE program_id = $1 AND created_at >= $2 AND created_at < $3 AND `+notFixture+` GROUP BY 1 ORDER BY 1`, programID, from, to).
		Query(func(rows pgx.Rows) error {
			var err error
			partners, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (created, error) {
				var c created
				err := row.Scan(&c.date, &c.n)
				c.date = utcDate(c.date)
				return c, err
			})
			return err
		})
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("read days of program %d: %w", programID, err)
	}
	if len(partners) == 0 {
		return days, nil
	}
	out := make([]dashboard.Day, 0, len(days)+len(partners))
	for len(days) > 0 || len(partners) > 0 {
		switch {
		case len(partners) == 0 || (len(days) > 0 && days[0].Date.Before(partners[0].date)):
			out, days = append(out, days[0]), days[1:]
		case len(days) == 0 || partners[0].date.Before(days[0].Date):
			out, partners = append(out, dashboard.Day{Date: partners[0].date, Partners: partners[0].n}), partners[1:]
		default: // the same day
			d := days[0]
			d.Partners = partners[0].n
			out, days, partners = append(out, d), days[1:], partners[1:]
		}
	}
	return out, nil
}

// utcDate is a date column's day at UTC midnight (pgx reads a date as
// UTC midnight already; this drops any monotonic or zone detail).
func utcDate(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// daysByBucket: $1 program, $2 and $3 the span's instants, $4 its zone.
const daysByBucket = `
		WITH activity AS (
			SELECT (bucket AT TIME ZONE $4)::date AS day, sum(clicks) AS clicks, sum(leads) AS leads,
				sum(conversions) AS conversions, sum(sales) AS sales, sum(refunds) AS refunds
			FROM activity_buckets WHERE program_id = $1 AND bucket >= $2 AND bucket < $3 GROUP BY 1
		), money AS (
			SELECT m.day, sum(m.revenue * r.usd_per_minor) AS revenue, sum(m.commission * r.usd_per_minor) AS commission,
				sum(m.refunded * r.usd_per_minor) AS refunded, bool_or(r.estimated) AS estimated
			FROM (SELECT (bucket AT TIME ZONE $4)::date AS day, (bucket AT TIME ZONE 'UTC')::date AS utc_day, currency,
					sum(revenue_minor) AS revenue, sum(commission_minor) AS commission, sum(refunded_minor) AS refunded
				FROM money_buckets WHERE program_id = $1 AND bucket >= $2 AND bucket < $3 GROUP BY 1, 2, 3) m
			CROSS JOIN LATERAL fx_rate_on(m.currency, m.utc_day) r
			GROUP BY m.day
		), partners AS (
			SELECT (created_at AT TIME ZONE $4)::date AS day, count(*) AS partners
			FROM partner_programs pp WHERE program_id = $1 AND created_at >= $2 AND created_at < $3 AND ` + notFixture + ` GROUP BY 1
		)
		SELECT d.day, COALESCE(a.clicks, 0), COALESCE(a.leads, 0), COALESCE(a.conversions, 0), COALESCE(a.sales, 0), COALESCE(a.refunds, 0),
			COALESCE(p.partners, 0), COALESCE(m.revenue, 0)::float8, COALESCE(m.commission, 0)::float8, COALESCE(m.refunded, 0)::float8,
			COALESCE(m.estimated, false)
		FROM (SELECT day FROM activity UNION SELECT day FROM money UNION SELECT day FROM partners) d
		LEFT JOIN activity a ON a.day = d.day LEFT JOIN money m ON m.day = d.day LEFT JOIN partners p ON p.day = d.day
		ORDER BY d.day`

// Sources sums the span's source buckets by each dimension: clicks, leads
// and conversions, and revenue in dollars at the rate of each amount's
// UTC day. Every value of every dimension, unranked, and the number of
// UTC days whose money used an earlier day's rate.
func (s *Store) Sources(ctx context.Context, programID int64, span dashboard.Span) (map[string][]sources.Row, int, error) {
	rows, err := s.pool.Query(ctx, `
		WITH counts AS (
			SELECT source_id, sum(clicks) AS clicks, sum(leads) AS leads, sum(conversions) AS conversions
			FROM source_buckets WHERE program_id = $1 AND bucket >= $2 AND bucket < $3 GROUP BY 1
		), converted AS (
			SELECT m.source_id, m.utc_day, m.revenue * r.usd_per_minor AS revenue, r.estimated
			FROM (SELECT source_id, (bucket AT TIME ZONE 'UTC')::date AS utc_day, currency, sum(revenue_minor) AS revenue
				FROM source_money WHERE program_id = $1 AND bucket >= $2 AND bucket < $3 GROUP BY 1, 2, 3) m
			CROSS JOIN LATERAL fx_rate_on(m.currency, m.utc_day) r
		), money AS (
			SELECT source_id, sum(revenue) AS revenue FROM converted GROUP BY 1
		), per_source AS (
			SELECT s.*, COALESCE(c.clicks, 0) AS clicks, COALESCE(c.leads, 0) AS leads, COALESCE(c.conversions, 0) AS conversions,
				COALESCE(m.revenue, 0) AS revenue
			FROM (SELECT source_id FROM counts UNION SELECT source_id FROM money) ids
			JOIN sources s ON s.id = ids.source_id
			LEFT JOIN counts c ON c.source_id = ids.source_id LEFT JOIN money m ON m.source_id = ids.source_id
		)
		SELECT CASE WHEN GROUPING(referrer) = 0 THEN 'referrers' WHEN GROUPING(utm_source) = 0 THEN 'utm_sources'
				WHEN GROUPING(utm_medium) = 0 THEN 'utm_mediums' WHEN GROUPING(utm_campaign) = 0 THEN 'utm_campaigns'
				WHEN GROUPING(landing_page) = 0 THEN 'landing_pages' WHEN GROUPING(country) = 0 THEN 'countries' ELSE 'devices' END,
			COALESCE(referrer, utm_source, utm_medium, utm_campaign, landing_page, country, device),
			sum(clicks)::bigint, sum(leads)::bigint, sum(conversions)::bigint, sum(revenue)::float8,
			(SELECT count(DISTINCT utc_day) FROM converted WHERE estimated)::int
		FROM per_source
		GROUP BY GROUPING SETS ((referrer), (utm_source), (utm_medium), (utm_campaign), (landing_page), (country), (device))`,
		programID, span.From(), span.To())
	if err != nil {
		return nil, 0, fmt.Errorf("read sources of program %d: %w", programID, err)
	}
	out := map[string][]sources.Row{}
	var dim string
	var r sources.Row
	var estimated int
	_, err = pgx.ForEachRow(rows, []any{&dim, &r.Name, &r.Clicks, &r.Leads, &r.Conversions, &r.Revenue, &estimated}, func() error {
		out[dim] = append(out[dim], r)
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read sources of program %d: %w", programID, err)
	}
	return out, estimated, nil
}

// Partners sums the span's partner buckets per partner, with the
// partner's name from the catalog ("" when not replicated yet).
func (s *Store) Partners(ctx context.Context, programID int64, span dashboard.Span) ([]dashboard.PartnerRow, int, error) {
	rows, err := s.pool.Query(ctx, `
		WITH counts AS (
			SELECT partner_id, sum(clicks) AS clicks, sum(leads) AS leads, sum(conversions) AS conversions
			FROM partner_buckets WHERE program_id = $1 AND bucket >= $2 AND bucket < $3 GROUP BY 1
		), converted AS (
			SELECT m.partner_id, m.utc_day, m.revenue * r.usd_per_minor AS revenue, m.commission * r.usd_per_minor AS commission, r.estimated
			FROM (SELECT partner_id, (bucket AT TIME ZONE 'UTC')::date AS utc_day, currency,
					sum(revenue_minor) AS revenue, sum(commission_minor) AS commission
				FROM partner_money WHERE program_id = $1 AND bucket >= $2 AND bucket < $3 GROUP BY 1, 2, 3) m
			CROSS JOIN LATERAL fx_rate_on(m.currency, m.utc_day) r
		), money AS (
			SELECT partner_id, sum(revenue) AS revenue, sum(commission) AS commission FROM converted GROUP BY 1
		)
		SELECT ids.partner_id, COALESCE(p.name, ''), COALESCE(c.clicks, 0)::bigint, COALESCE(c.leads, 0)::bigint,
			COALESCE(c.conversions, 0)::bigint, COALESCE(m.revenue, 0)::float8, COALESCE(m.commission, 0)::float8,
			(SELECT count(DISTINCT utc_day) FROM converted WHERE estimated)::int
		FROM (SELECT partner_id FROM counts UNION SELECT partner_id FROM money) ids
		LEFT JOIN partners p ON p.id = ids.partner_id
		LEFT JOIN counts c ON c.partner_id = ids.partner_id LEFT JOIN money m ON m.partner_id = ids.partner_id`,
		programID, span.From(), span.To())
	if err != nil {
		return nil, 0, fmt.Errorf("read partners of program %d: %w", programID, err)
	}
	var estimated int
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (dashboard.PartnerRow, error) {
		var p dashboard.PartnerRow
		err := row.Scan(&p.ID, &p.Name, &p.Clicks, &p.Leads, &p.Conversions, &p.Revenue, &p.Commission, &estimated)
		return p, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read partners of program %d: %w", programID, err)
	}
	return out, estimated, nil
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

// LatestEvents reads the program's latest real click and lead
// (latest_events' key).
func (s *Store) LatestEvents(ctx context.Context, programID int64) (dashboard.LatestEvents, error) {
	rows, err := s.pool.Query(ctx, `SELECT kind, event_id, occurred_at FROM latest_events WHERE program_id = $1`, programID)
	if err != nil {
		return dashboard.LatestEvents{}, fmt.Errorf("latest events of program %d: %w", programID, err)
	}
	var out dashboard.LatestEvents
	var kind string
	var e dashboard.LatestEvent
	if _, err := pgx.ForEachRow(rows, []any{&kind, &e.ID, &e.OccurredAt}, func() error {
		got := e
		got.OccurredAt = got.OccurredAt.UTC()
		switch kind {
		case dashboard.KindClick:
			out.Click = &got
		case dashboard.KindLead:
			out.Lead = &got
		}
		return nil
	}); err != nil {
		return dashboard.LatestEvents{}, fmt.Errorf("latest events of program %d: %w", programID, err)
	}
	return out, nil
}

// notFixture keeps a partner-program record pp unless its partner is the
// program's `svc test` fixture (partners.fixture_program_id, from the
// fixture's address): the CLI's test events make it, and it is no partner
// of the program's (hasPartners, partners, totalPartners), as in the CLI's
// status. A primary-key probe per record.
const notFixture = `NOT EXISTS (SELECT 1 FROM partners f WHERE f.id = pp.partner_id AND f.fixture_program_id = pp.program_id)`

// HasApprovedPartner reports whether the program has an approved
// partner-program record, its fixture partner's left out.
func (s *Store) HasApprovedPartner(ctx context.Context, programID int64) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM partner_programs pp WHERE program_id = $1 AND approved AND `+notFixture+`)`, programID).Scan(&ok); err != nil {
		return false, fmt.Errorf("approved partners of program %d: %w", programID, err)
	}
	return ok, nil
}

// Revoked is session.Revocations over the replica: a session no longer
// stands when it was signed out or its user is suspended (analytics has
// no other word on its users). One round trip, two primary-key lookups.
func (s *Store) Revoked(ctx context.Context, c session.Claims) (bool, error) {
	var revoked bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM session_revocations WHERE session_id = $1)
		OR EXISTS (SELECT 1 FROM users WHERE id = $2 AND blocked)`, c.ID, c.UserID).Scan(&revoked)
	if err != nil {
		return false, fmt.Errorf("look up session %s of user %d: %w", c.ID, c.UserID, err)
	}
	return revoked, nil
}
