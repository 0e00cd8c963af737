package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/bench/internal/rig"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/services/analytics/server"
)

// The seeded world: one program, one active member who signs in, and
// partner-program records spread over the two years.
const (
	programID = 4242
	userID    = 4243
	partners  = 200
	// refSchema holds the reference's raw click table, beside analytics'
	// schema in the same throwaway database.
	refSchema = "bench_reference"
)

// bucketsPerDay is analytics' 15-minute buckets in a UTC day.
const bucketsPerDay = 96

// seedPlan is what seed writes: days whole UTC days ending with the day
// of now, at least minClicks clicks in all.
type seedPlan struct {
	First     time.Time // first instant of the first day
	Days      int
	MinClicks int64
}

// Buckets is the number of 15-minute buckets of the plan.
func (p seedPlan) Buckets() int64 { return int64(p.Days) * bucketsPerDay }

// End is the first instant after the last day.
func (p seedPlan) End() time.Time { return p.First.AddDate(0, 0, p.Days) }

// avgClicks is the mean clicks per bucket the shape is scaled to: one more
// than needed, so rounding never leaves the total under MinClicks.
func (p seedPlan) avgClicks() int64 { return (p.MinClicks+p.Buckets()-1)/p.Buckets() + 1 }

// seeded is what the seed wrote, read back from the tables.
type seeded struct {
	Clicks, Leads, Conversions, Sales int64
	ActivityRows, MoneyRows, RawRows  int64
	RawTableBytes, RawIndexBytes      int64
	Took                              time.Duration
}

// seedActivitySQL writes every 15-minute bucket of the plan. Clicks follow
// a daily wave (half to one and a half times the mean, peak at 15:00 UTC)
// on a ramp (0.7 to 1.3 times over the two years): bucket i of n has
// round(avg × (1 + 0.5 sin(2π(q − 36)/96)) × (0.7 + 0.6 i/n)) clicks, q its
// quarter of the day. Leads are a 25th of the clicks, conversions and
// paid sales a 120th, dithered by the bucket's index so that small seeds
// have some too.
const seedActivitySQL = `
INSERT INTO activity_buckets (program_id, bucket, clicks, leads, conversions, sales)
SELECT $1, b.bucket, b.clicks, (b.clicks + b.i * 13 % 25) / 25, (b.clicks + b.i * 37 % 120) / 120, (b.clicks + b.i * 37 % 120) / 120
FROM (
	SELECT i, $2::timestamptz + i * interval '15 minutes' AS bucket,
		round($4::float8 * (1 + 0.5 * sin(2 * pi() * ((i % 96) - 36) / 96.0)) * (0.7 + 0.6 * i / $3::float8))::bigint AS clicks
	FROM generate_series(0, $3::bigint - 1) i
) b`

// seedMoneySQL writes the money of every bucket with sales, one currency
// per bucket in turn (USD, EUR, VND: every day has all three): 49.99 USD,
// 39.99 EUR or 1,250,000 VND a sale, commission a tenth (integer
// division), in minor units.
const seedMoneySQL = `
INSERT INTO money_buckets (program_id, bucket, currency, revenue_minor, commission_minor)
SELECT program_id, bucket, currency, revenue, revenue / 10
FROM (
	SELECT a.program_id, a.bucket, c.currency, a.sales * c.unit AS revenue
	FROM activity_buckets a
	CROSS JOIN LATERAL (SELECT (ARRAY['USD', 'EUR', 'VND'])[(extract(epoch FROM a.bucket)::bigint / 900) % 3 + 1] AS currency) k
	JOIN (VALUES ('USD', 4999), ('EUR', 3999), ('VND', 1250000)) c (currency, unit) ON c.currency = k.currency
	WHERE a.program_id = $1 AND a.sales > 0
) m`

// seedActivityDaysSQL and seedMoneyDaysSQL roll the buckets up by UTC day,
// as the consumers do event by event (and migration 00005 did for rows
// already there).
const (
	seedActivityDaysSQL = `
INSERT INTO activity_days (program_id, day, clicks, leads, conversions, sales)
SELECT program_id, (bucket AT TIME ZONE 'UTC')::date, sum(clicks), sum(leads), sum(conversions), sum(sales)
FROM activity_buckets WHERE program_id = $1 GROUP BY 1, 2`
	seedMoneyDaysSQL = `
INSERT INTO money_days (program_id, day, currency, revenue_minor, commission_minor)
SELECT program_id, (bucket AT TIME ZONE 'UTC')::date, currency, sum(revenue_minor), sum(commission_minor)
FROM money_buckets WHERE program_id = $1 GROUP BY 1, 2, 3`
)

// seedRawSQL writes one raw row per click counted in the buckets, spread
// evenly over its bucket: the same clicks, as a service that kept raw
// events would hold them.
const seedRawSQL = `
INSERT INTO ` + refSchema + `.clicks (program_id, clicked_at)
SELECT a.program_id, a.bucket + (k * 900.0 / a.clicks) * interval '1 second'
FROM activity_buckets a CROSS JOIN LATERAL generate_series(0, a.clicks - 1) k
WHERE a.program_id = $1`

// seed writes the catalog replica (program, membership, partner-program
// records), the aggregates straight into analytics' tables, and the raw
// reference table with the same clicks; then indexes, vacuums and
// analyzes. db's search_path is analytics' schema; env is analytics'
// environment, for the fx import that sets the daily dollars.
func seed(ctx context.Context, db *pgxpool.Pool, plan seedPlan, env func(string) string, log func(msg string, args ...any)) (seeded, error) {
	start := time.Now()
	var out seeded
	conn, err := db.Acquire(ctx)
	if err != nil {
		return out, fmt.Errorf("seed: %w", err)
	}
	defer conn.Release()
	step := func(what, sql string, args ...any) error {
		t := time.Now()
		tag, err := conn.Exec(ctx, sql, args...)
		if err != nil {
			return fmt.Errorf("seed %s: %w", what, err)
		}
		log("seeded", "step", what, "rows", tag.RowsAffected(), "took", time.Since(t).Round(time.Millisecond))
		return nil
	}
	if _, err := conn.Exec(ctx, "SET maintenance_work_mem = '256MB'"); err != nil {
		return out, fmt.Errorf("seed: %w", err)
	}
	steps := []struct {
		what, sql string
		args      []any
	}{
		{"program", `INSERT INTO programs (id, created_at, payment_tracking_mode, processor_status, processor_account_id,
				charges_enabled, payouts_enabled, details_submitted, connected_at, catalog_seq)
			VALUES ($1, $2, 's2s', 'not_connected', '', false, false, false, NULL, 1)`, []any{programID, plan.First}},
		{"membership", `INSERT INTO memberships (program_id, user_id, active, permissions, catalog_seq)
			VALUES ($1, $2, true, '{tracking:read,tracking:write}', 1)`, []any{programID, userID}},
		{"partner programs", `INSERT INTO partner_programs (id, program_id, partner_id, approved, created_at, catalog_seq)
			SELECT i, $1, i, true, $2::timestamptz + (i - 1) * ($3::float8 / $4) * interval '1 day' + interval '9 hours', 1
			FROM generate_series(1, $4::int) i`, []any{programID, plan.First, float64(plan.Days), partners}},
		{"activity buckets", seedActivitySQL, []any{programID, plan.First, plan.Buckets(), float64(plan.avgClicks())}},
		{"money buckets", seedMoneySQL, []any{programID}},
		{"activity days", seedActivityDaysSQL, []any{programID}},
		{"money days", seedMoneyDaysSQL, []any{programID}},
		{"reference schema", `CREATE SCHEMA ` + refSchema, nil},
		// Unlogged: the seed writes no WAL for it; reading it costs the same.
		{"reference table", `CREATE UNLOGGED TABLE ` + refSchema + `.clicks (program_id bigint NOT NULL, clicked_at timestamptz NOT NULL)`, nil},
		{"reference rows", seedRawSQL, []any{programID}},
		{"reference index", `CREATE INDEX clicks_program_clicked_idx ON ` + refSchema + `.clicks (program_id, clicked_at)`, nil},
	}
	for _, s := range steps {
		if err := step(s.what, s.sql, s.args...); err != nil {
			return out, err
		}
	}
	// The daily dollars, as the consumers keep them (fx import's refresh).
	t := time.Now()
	imported, err := refreshDollars(ctx, conn, env)
	if err != nil {
		return out, fmt.Errorf("seed: daily dollars: %w", err)
	}
	log("seeded", "step", "daily dollars", "fx_import", imported, "took", time.Since(t).Round(time.Millisecond))
	// The visibility map lets the reference use an index-only scan, and
	// fresh statistics give both sides their best plans.
	for _, t := range []string{refSchema + ".clicks", "activity_buckets", "money_buckets", "activity_days", "money_days", "partner_programs", "programs", "memberships"} {
		if err := step("vacuum "+t, "VACUUM (ANALYZE) "+t); err != nil {
			return out, err
		}
	}
	err = conn.QueryRow(ctx, `SELECT sum(clicks), sum(leads), sum(conversions), sum(sales), count(*),
			(SELECT count(*) FROM money_buckets WHERE program_id = $1),
			(SELECT count(*) FROM `+refSchema+`.clicks WHERE program_id = $1),
			pg_table_size('`+refSchema+`.clicks'), pg_indexes_size('`+refSchema+`.clicks')
		FROM activity_buckets WHERE program_id = $1`, programID).Scan(
		&out.Clicks, &out.Leads, &out.Conversions, &out.Sales, &out.ActivityRows, &out.MoneyRows, &out.RawRows,
		&out.RawTableBytes, &out.RawIndexBytes)
	if err != nil {
		return out, fmt.Errorf("seed: read back: %w", err)
	}
	switch {
	case out.Clicks < plan.MinClicks:
		return out, fmt.Errorf("seed: %d clicks, want at least %d", out.Clicks, plan.MinClicks)
	case out.RawRows != out.Clicks:
		return out, fmt.Errorf("seed: %d raw reference rows for %d clicks in the buckets", out.RawRows, out.Clicks)
	case out.ActivityRows != plan.Buckets():
		return out, fmt.Errorf("seed: %d activity buckets, want %d", out.ActivityRows, plan.Buckets())
	}
	// Best effort (needs a superuser or pg_checkpoint): the measured runs
	// do not pay for the seed's dirty buffers.
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		log("checkpoint after the seed", "err", err)
	}
	out.Took = time.Since(start)
	return out, nil
}

// rangeTotals are the seeded figures of [from, to), read straight from the
// buckets: what a correct answer of the route must say.
type rangeTotals struct {
	Clicks, Leads, Conversions, Sales int64
}

func totalsOf(ctx context.Context, db *pgxpool.Pool, from, to time.Time) (rangeTotals, error) {
	var t rangeTotals
	err := db.QueryRow(ctx, `SELECT COALESCE(sum(clicks), 0), COALESCE(sum(leads), 0), COALESCE(sum(conversions), 0), COALESCE(sum(sales), 0)
		FROM activity_buckets WHERE program_id = $1 AND bucket >= $2 AND bucket < $3`, programID, from, to).Scan(
		&t.Clicks, &t.Leads, &t.Conversions, &t.Sales)
	if err != nil {
		return t, fmt.Errorf("totals of %s..%s: %w", from.Format(time.DateOnly), to.Format(time.DateOnly), err)
	}
	return t, nil
}

// openPool opens a pool of size conns on dsn with search_path schema (""
// leaves it), the services' custom plans and jit ("" leaves it).
func openPool(ctx context.Context, dsn, schema string, conns int32, app, jit string) (*pgxpool.Pool, error) {
	// The platform opens the services' pools with custom plans
	// (DB_PLAN_CACHE_MODE); the reference gets the same.
	params := map[string]string{"plan_cache_mode": "force_custom_plan"}
	if schema != "" {
		params["search_path"] = schema
	}
	if jit != "" {
		params["jit"] = jit
	}
	return rig.OpenPool(ctx, dsn, conns, app, params)
}

// refreshDollars has analytics set each day's dollars as an fx import
// does: the rates its migrations hold imported again, through `analytics
// fx import -` run in this process on env.
func refreshDollars(ctx context.Context, db *pgxpool.Conn, env func(string) string) (string, error) {
	rows, err := db.Query(ctx, `SELECT currency, valid_from::text, usd_per_unit::text FROM fx_rates ORDER BY 1, 2`)
	if err != nil {
		return "", fmt.Errorf("read the rates: %w", err)
	}
	var file bytes.Buffer
	file.WriteString("currency,date,usd_per_unit\n")
	var cur, day, rate string
	if _, err := pgx.ForEachRow(rows, []any{&cur, &day, &rate}, func() error {
		fmt.Fprintf(&file, "%s,%s,%s\n", cur, day, rate)
		return nil
	}); err != nil {
		return "", fmt.Errorf("read the rates: %w", err)
	}
	var out, errOut bytes.Buffer
	if code := platform.Run(ctx, server.Spec(), []string{"fx", "import", "-"}, env, &out,
		platform.WithStdin(&file), platform.WithStderr(&errOut)); code != 0 {
		return "", fmt.Errorf("analytics fx import: exit %d: %s %s", code, bytes.TrimSpace(errOut.Bytes()), bytes.TrimSpace(out.Bytes()))
	}
	return strings.TrimSpace(out.String()), nil
}
