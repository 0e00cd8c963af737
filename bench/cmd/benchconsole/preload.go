package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The preload writes, in bulk (one INSERT ... SELECT a table), what a
// program with a long history holds beside its partners (which the admin
// API created, so every replica knows them):
//
//   - commissions: n sales of 25.00 USD spread over the program's partners
//     in turn and over the 395 days that end 5 days ago, each with its 10 %
//     commission (approved and credited once 30 days old, pending before;
//     every 20th refunded in part, every 100th reversed) and the
//     customer's click id; each partner's balance (its credits less what
//     refunds took back); an open payout of 10.00 from the program for
//     every 4th partner and a paid one for every 7th; the program's running
//     totals (program_money) summed from them
//     (program_money_from_rows, migration 00012) (the load runs with triggers off: a
//     trigger a row made the 1,000,000 commissions take minutes).
//   - analytics: each partner's daily rollups (clicks, leads, conversions,
//     revenue and commission) for the last 30 days, which the partners
//     list's figures read.
//
// Every INSERT names its columns; the columns it leaves out keep their
// defaults.
var preloadSteps = []struct {
	what, sql string
	count     bool // takes $2, the number of commissions
}{
	{"commissions sales", `
INSERT INTO commissions.sales (transaction_id, program_id, customer_id, partner_id, amount_cents, currency, refunded_cents,
	is_test, source, commission_state, reserved, occurred_at, created_at)
SELECT 'bc_' || i, $1, i, p.ids[1 + i % p.n], 2500, 'USD',
	CASE WHEN i % 100 = 0 THEN 2500 WHEN i % 20 = 0 THEN 1000 ELSE 0 END,
	false, 'api', 'created', false, t.at, t.at
FROM (SELECT array_agg(partner_id ORDER BY partner_id) AS ids, count(*)::int AS n FROM accounts.partner_programs WHERE program_id = $1) p,
	generate_series(1, $2::int) i,
	LATERAL (SELECT now() - interval '400 days' + i * (interval '395 days' / $2::int)) t (at)
WHERE p.n > 0`, true},
	{"commissions commissions", `
INSERT INTO commissions.commissions (sale_id, program_id, partner_id, customer_id, kind, status, amount, currency,
	refunded_amount, credited, hold_until, approved_at, created_at, updated_at, customer_click_id)
SELECT s.id, s.program_id, s.partner_id, s.customer_id, 'sale',
	CASE WHEN s.refunded_cents = s.amount_cents THEN 'reversed' WHEN s.refunded_cents > 0 THEN 'refunded'
		WHEN s.created_at + interval '30 days' <= now() THEN 'approved' ELSE 'pending' END,
	s.amount_cents / 10, s.currency, s.refunded_cents / 10, s.created_at + interval '30 days' <= now(),
	s.created_at + interval '30 days',
	CASE WHEN s.created_at + interval '30 days' <= now() THEN s.created_at + interval '30 days' END,
	s.created_at, s.created_at, 'cust_bc_' || s.customer_id
FROM commissions.sales s
WHERE s.program_id = $1 AND s.transaction_id LIKE 'bc\_%'
ORDER BY s.id`, false},
	{"commissions balances", `
INSERT INTO commissions.balances AS b (partner_id, currency, balance, updated_at)
SELECT partner_id, currency, sum(amount - CASE WHEN credited THEN refunded_amount ELSE 0 END), now()
FROM commissions.commissions WHERE program_id = $1 AND credited GROUP BY 1, 2
ON CONFLICT (partner_id, currency) DO UPDATE SET balance = b.balance + EXCLUDED.balance, updated_at = EXCLUDED.updated_at`, false},
	{"commissions payouts", `
INSERT INTO commissions.withdrawals (partner_id, program_id, currency, amount, requested_amount, status, created_at, updated_at)
SELECT pp.partner_id, $1, 'USD', 1000, 1000, CASE WHEN pp.partner_id % 4 = 0 THEN 'open' ELSE 'paid' END,
	now() - interval '3 days', now() - interval '2 days'
FROM accounts.partner_programs pp
WHERE pp.program_id = $1 AND (pp.partner_id % 4 = 0 OR pp.partner_id % 7 = 0)
ORDER BY pp.partner_id`, false},
	{"commissions running totals", `
INSERT INTO commissions.program_money SELECT * FROM commissions.program_money_from_rows WHERE program_id = $1`, false},
	{"analytics partner rollups", `
INSERT INTO analytics.partner_buckets (program_id, bucket, partner_id, clicks, leads, conversions)
SELECT $1, date_trunc('day', now()) - d * interval '1 day', pp.partner_id, 40 + pp.partner_id % 17, 4, 1
FROM accounts.partner_programs pp, generate_series(0, 29) d
WHERE pp.program_id = $1`, false},
	{"analytics partner money", `
INSERT INTO analytics.partner_money (program_id, bucket, partner_id, currency, revenue_minor, commission_minor)
SELECT $1, date_trunc('day', now()) - d * interval '1 day', pp.partner_id, 'USD', 2500, 250
FROM accounts.partner_programs pp, generate_series(0, 29) d
WHERE pp.program_id = $1`, false},
}

// preload writes the steps for programID and n commissions, then analyzes
// the database; it answers the rows written.
func preload(ctx context.Context, db *pgxpool.Pool, programID int64, n int, logger *slog.Logger) (int64, time.Duration, error) {
	start := time.Now()
	conn, err := db.Acquire(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("preload: %w", err)
	}
	defer conn.Release()
	// The bulk statements' own session: no wait for each commit's flush,
	// room for the index builds.
	// Triggers off (session_replication_role), as a bulk import runs: the
	// running totals are one step of their own.
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off; SET maintenance_work_mem = '256MB'; SET work_mem = '64MB'; "+
		"SET session_replication_role = replica"); err != nil {
		return 0, 0, fmt.Errorf("preload: %w", err)
	}
	// The connection goes back to the pool the reference reads with.
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "RESET ALL") }()
	var rows int64
	for _, s := range preloadSteps {
		if n == 0 && s.count {
			continue
		}
		args := []any{programID}
		if s.count {
			args = append(args, n)
		}
		t := time.Now()
		tag, err := conn.Exec(ctx, s.sql, args...)
		if err != nil {
			return rows, 0, fmt.Errorf("preload %s: %w", s.what, err)
		}
		rows += tag.RowsAffected()
		logger.Info("preloaded", "step", s.what, "rows", tag.RowsAffected(), "took", time.Since(t).Round(time.Millisecond))
	}
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE)"); err != nil {
		return rows, 0, fmt.Errorf("preload: analyze: %w", err)
	}
	return rows, time.Since(start), nil
}
