package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The preload: n past sales of the benchmark's program, written in bulk
// (INSERT ... SELECT over generate_series, one statement a table) with what
// a ledger holds beside them, in tracking's and commissions' schemas as
// their services write them:
//
//   - tracking: one customer per sale (click_id cust_preload_<i>, status
//     conversion), its click event, and the attribution decision of its
//     sale (transaction_id preload_<i>);
//   - commissions: the sale (25.00 USD, source api, decided), its 10 %
//     commission (held for the program's hold days from the sale: approved
//     and credited once that is past, else pending), a refund of every 20th
//     sale (10.00, partial: commission refunded) and every 100th in full
//     (commission reversed), a balance entry per credit and per deduction
//     taken from the balance, and the partners' balance rows.
//
// Sales are spread over the 395 days that end 5 days ago, over the
// program's links (and so partners) in turn.
//
// Every INSERT names its columns, all of them columns that exist since the
// services' first ledger migrations; a column a later migration adds is
// left to its default, so the preload keeps working as the schemas grow.
// It reads no other table than it writes, apart from tracking's link
// replica.
var preloadSteps = []struct {
	what, sql string
	args      func(programID int64, n, holdDays int) []any
}{
	{"tracking customers", `
INSERT INTO tracking.customers (click_id, program_id, status, first_partner_id, first_link_id,
	first_purchase_date, sale_recorded_at, created_at, updated_at)
SELECT 'cust_preload_' || i, $1, 'conversion', l.partner_ids[1 + i % l.n], l.link_ids[1 + i % l.n],
	t.at, t.at, t.at - interval '1 hour', t.at
FROM (SELECT array_agg(id ORDER BY id) AS link_ids, array_agg(partner_id ORDER BY id) AS partner_ids, count(*)::int AS n
	FROM tracking.links WHERE program_id = $1) l,
	generate_series(1, $2::int) i,
	LATERAL (SELECT now() - interval '400 days' + i * (interval '395 days' / $2::int)) t (at)
WHERE l.n > 0`, withCount},
	{"tracking click events", `
INSERT INTO tracking.affiliate_click_events (customer_id, click_id, program_id, link_id, partner_id, code,
	page_url, user_agent, language, ip, created_at)
SELECT c.id, c.click_id, c.program_id, c.first_link_id, c.first_partner_id, k.code,
	'https://brand.example/?via=' || k.code, 'Mozilla/5.0 (X11; Linux x86_64) benchsale-preload', 'en-US', '23.0.0.1'::inet, c.created_at
FROM tracking.customers c JOIN tracking.links k ON k.id = c.first_link_id
WHERE c.program_id = $1 AND c.click_id LIKE 'cust\_preload\_%'`, programOnly},
	{"tracking attributions", `
INSERT INTO tracking.attributions (transaction_id, program_id, outcome, customer_id, click_id, partner_id, link_id,
	customer_status, first_purchase_date, source, decided_at)
SELECT 'preload_' || split_part(c.click_id, '_', 3), c.program_id, 'attributed', c.id, c.click_id, c.first_partner_id, c.first_link_id,
	'conversion', c.first_purchase_date, 'api', c.first_purchase_date
FROM tracking.customers c
WHERE c.program_id = $1 AND c.click_id LIKE 'cust\_preload\_%'`, programOnly},
	{"commissions sales", `
INSERT INTO commissions.sales (transaction_id, program_id, customer_id, partner_id, amount_cents, currency, refunded_cents,
	is_test, source, commission_state, reserved, occurred_at, created_at)
SELECT 'preload_' || x.i, c.program_id, c.id, c.first_partner_id, 2500, 'USD',
	CASE WHEN x.i % 100 = 0 THEN 2500 WHEN x.i % 20 = 0 THEN 1000 ELSE 0 END,
	false, 'api', 'created', false, c.first_purchase_date, c.first_purchase_date
FROM tracking.customers c CROSS JOIN LATERAL (SELECT split_part(c.click_id, '_', 3)::bigint AS i) x
WHERE c.program_id = $1 AND c.click_id LIKE 'cust\_preload\_%'
ORDER BY x.i`, programOnly},
	{"commissions commissions", `
INSERT INTO commissions.commissions (sale_id, program_id, partner_id, customer_id, kind, status, amount, currency,
	refunded_amount, credited, hold_until, approved_at, created_at, updated_at)
SELECT s.id, s.program_id, s.partner_id, s.customer_id, 'sale',
	CASE WHEN s.refunded_cents = s.amount_cents THEN 'reversed' WHEN s.refunded_cents > 0 THEN 'refunded'
		WHEN h.due <= now() THEN 'approved' ELSE 'pending' END,
	s.amount_cents / 10, s.currency, s.refunded_cents / 10, h.due <= now(), h.due,
	CASE WHEN h.due <= now() THEN h.due END, s.created_at, s.created_at
FROM commissions.sales s CROSS JOIN LATERAL (SELECT s.created_at + make_interval(days => $2::int) AS due) h
WHERE s.program_id = $1 AND s.transaction_id LIKE 'preload\_%'
ORDER BY s.id`, withHold},
	// A refund of a credited commission comes two days after its approval
	// and is taken from the balance; one of a commission still held comes
	// a day after the sale and takes nothing from it.
	{"commissions refunds", `
INSERT INTO commissions.refunds (sale_id, commission_id, refund_id, requested_cents, amount_cents, deduction, debited,
	currency, created_at)
SELECT s.id, k.id,
	CASE WHEN s.refunded_cents < s.amount_cents THEN 'r_preload_' || substr(s.transaction_id, 9) END,
	CASE WHEN s.refunded_cents < s.amount_cents THEN s.refunded_cents ELSE 0 END,
	s.refunded_cents, k.refunded_amount, CASE WHEN k.credited THEN k.refunded_amount ELSE 0 END, s.currency,
	CASE WHEN k.credited THEN LEAST(now(), k.approved_at + interval '2 days') ELSE s.created_at + interval '1 day' END
FROM commissions.sales s JOIN commissions.commissions k ON k.sale_id = s.id AND k.kind = 'sale'
WHERE s.program_id = $1 AND s.transaction_id LIKE 'preload\_%' AND s.refunded_cents > 0
ORDER BY s.id`, programOnly},
	// Credits of the credited commissions (not those commissions' own
	// approval job credited first: a commission the preload wrote
	// pending can come due while it runs) and deductions of the refunds
	// taken from a balance, with their running balance_after; then the
	// partners' balances grow by what this statement added.
	{"commissions balance entries and balances", `
WITH added AS (
	INSERT INTO commissions.balance_entries (partner_id, currency, delta, kind, commission_id, refund_id, balance_after, created_at)
	SELECT e.partner_id, e.currency, e.delta, e.kind, e.commission_id, e.refund_id,
		COALESCE(b.balance, 0) + sum(e.delta) OVER (PARTITION BY e.partner_id, e.currency ORDER BY e.at, e.ord ROWS UNBOUNDED PRECEDING),
		e.at
	FROM (
		SELECT k.partner_id, k.currency, k.amount AS delta, 'credit' AS kind,
			k.id AS commission_id, NULL::bigint AS refund_id, k.approved_at AS at, k.id * 2 AS ord
		FROM commissions.commissions k JOIN commissions.sales s ON s.id = k.sale_id
		WHERE s.program_id = $1 AND s.transaction_id LIKE 'preload\_%' AND k.credited
			AND NOT EXISTS (SELECT FROM commissions.balance_entries x WHERE x.commission_id = k.id AND x.kind = 'credit')
		UNION ALL
		SELECT k.partner_id, k.currency, -r.debited, 'deduction', k.id, r.id, r.created_at, k.id * 2 + 1
		FROM commissions.refunds r JOIN commissions.commissions k ON k.id = r.commission_id JOIN commissions.sales s ON s.id = r.sale_id
		WHERE s.program_id = $1 AND s.transaction_id LIKE 'preload\_%' AND r.debited > 0
	) e LEFT JOIN commissions.balances b ON b.partner_id = e.partner_id AND b.currency = e.currency
	ORDER BY e.at, e.ord
	RETURNING partner_id, currency, delta
)
INSERT INTO commissions.balances AS b (partner_id, currency, balance, updated_at)
SELECT partner_id, currency, sum(delta), now() FROM added GROUP BY 1, 2
ON CONFLICT (partner_id, currency) DO UPDATE SET balance = b.balance + EXCLUDED.balance, updated_at = EXCLUDED.updated_at`, programOnly},
	// The program's running totals (program_money), which the commissions'
	// triggers keep row by row: the preload's session runs without them
	// (one row moved a million times in one statement is a chain of a
	// million row versions, and each move walks it), so its commissions'
	// totals are added here in one statement.
	{"commissions program totals", `
INSERT INTO commissions.program_money AS m (program_id, partner_id, currency, earned)
SELECT k.program_id, k.partner_id, k.currency, sum(k.amount - k.refunded_amount)
FROM commissions.commissions k JOIN commissions.sales s ON s.id = k.sale_id
WHERE s.program_id = $1 AND s.transaction_id LIKE 'preload\_%' AND k.credited
GROUP BY 1, 2, 3
ON CONFLICT (program_id, partner_id, currency) DO UPDATE SET earned = m.earned + EXCLUDED.earned`, programOnly},
}

// The parameters of a preload statement: $1 the program, then $2 the
// number of sales or the hold days.
func withCount(programID int64, n, _ int) []any       { return []any{programID, n} }
func withHold(programID int64, _, holdDays int) []any { return []any{programID, holdDays} }
func programOnly(programID int64, _, _ int) []any     { return []any{programID} }

// preloaded is what the preload wrote.
type preloaded struct {
	Sales, Refunds, Entries int64
	Rows                    int64 // in every table
	Took                    time.Duration
}

func (p preloaded) String() string {
	return fmt.Sprintf("%d past sales with their commissions, %d refunds and %d balance entries (%d rows in tracking and commissions), written in %s",
		p.Sales, p.Refunds, p.Entries, p.Rows, p.Took.Round(100*time.Millisecond))
}

// preload writes n sales of programID and their ledger (preloadSteps), the
// commissions held holdDays, and analyzes what it wrote.
func preload(ctx context.Context, db *pgxpool.Pool, programID int64, n, holdDays int, logger *slog.Logger) (preloaded, error) {
	var p preloaded
	start := time.Now()
	logger.Info("preloading", "sales", n)
	conn, err := db.Acquire(ctx)
	if err != nil {
		return p, fmt.Errorf("preload: %w", err)
	}
	defer conn.Release()
	// The bulk statements' own session: no wait for each commit's flush,
	// room for the index builds, and no triggers (the program totals are
	// written by the last step instead; a superuser's setting, as the
	// benchmark's connection is).
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off; SET maintenance_work_mem = '256MB'; SET work_mem = '64MB'; SET session_replication_role = replica"); err != nil {
		return p, fmt.Errorf("preload: %w", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "RESET synchronous_commit; RESET maintenance_work_mem; RESET work_mem; RESET session_replication_role")
	}()
	for _, s := range preloadSteps {
		t := time.Now()
		tag, err := conn.Exec(ctx, s.sql, s.args(programID, n, holdDays)...)
		if err != nil {
			return p, fmt.Errorf("preload %s: %w", s.what, err)
		}
		rows := tag.RowsAffected()
		p.Rows += rows
		switch s.what {
		case "commissions sales":
			p.Sales = rows
		case "commissions refunds":
			p.Refunds = rows
		}
		logger.Info("preloaded", "step", s.what, "rows", rows, "took", time.Since(t).Round(time.Millisecond))
	}
	err = conn.QueryRow(ctx, `SELECT count(*) FROM commissions.balance_entries e
		JOIN commissions.commissions k ON k.id = e.commission_id JOIN commissions.sales s ON s.id = k.sale_id
		WHERE s.program_id = $1 AND s.transaction_id LIKE 'preload\_%'`, programID).Scan(&p.Entries)
	if err != nil {
		return p, fmt.Errorf("preload: count the balance entries: %w", err)
	}
	if p.Sales != int64(n) {
		return p, fmt.Errorf("preload: %d sales written, want %d (does the program have links in tracking?)", p.Sales, n)
	}
	p.Took = time.Since(start)
	return p, nil
}
