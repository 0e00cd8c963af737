package plans_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/deploy/devstack/stack"
	"github.com/svc-dev/svc/libs/platform"
)

// bulkRows is how many rows each large table is given before the services
// start: the tables whose size grows with traffic and that a hot statement
// reads (sales, commissions, refunds, customers, click and lead events,
// attributions, processor events, the analytics rollups, webhooks'
// events, deliveries and listener queues, ...), the catalog replicas'
// per-partner rows (links, partner-program records, memberships) and
// balance entries. A table the routes only INSERT into or upsert by its
// key (visits, counters, analytics' counted) has
// no scan in any plan and is left empty; if a statement ever reads one,
// the check names it (catalog.problems: a table neither large nor
// bounded).
//
// The rows belong to 1,000 programs of their own (ids from 1,000,000;
// catalog row ids from 1,000,000,000; partners from 2,000,000), so the
// programs the test makes through the admin API find only their own few
// rows, as a program among many does. What grows with the number of
// programs rather than with traffic (webhooks' endpoints and listeners)
// spreads over more of them: see loadWebhooks.
const bulkRows = 100_000

// prepare applies every service's migrations (`<service> migrate`), then
// fills its schema (INSERT ... SELECT over generate_series) and ANALYZEs
// it, each service on its own connection at the same time, before any
// service runs.
func prepare(ctx context.Context, env map[string]string) error {
	loads := map[string]string{"tracking": loadTracking, "commissions": loadCommissions, "analytics": loadAnalytics, "accounts": loadAccounts,
		"webhooks": loadWebhooks}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, svc := range stack.Services() {
		name := svc.Spec.Name
		wg.Go(func() {
			t0 := time.Now()
			getenv := func(k string) string {
				if k == "DB_SCHEMA" {
					return name
				}
				return env[k]
			}
			var err error
			if code := platform.Run(ctx, svc.Spec, []string{"migrate"}, getenv, io.Discard); code != 0 {
				err = fmt.Errorf("%s migrate: exit %d", name, code)
			} else if sql, ok := loads[name]; ok {
				debugf("%s migrated in %s", name, time.Since(t0))
				if err = loadSchema(ctx, env["DATABASE_URL"], name, sql); err != nil {
					err = fmt.Errorf("load %s: %w", name, err)
				}
			}
			debugf("%s ready in %s", name, time.Since(t0))
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func loadSchema(ctx context.Context, dsn, schema, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	// Foreign keys are not checked while loading (the rows are made
	// consistent): their triggers were most of the load's time.
	// A smaller statistics sample than the server's default (10 x 300 rows
	// a column instead of 100 x 300): ANALYZE was half of the load, and
	// the plans checked here turn on row counts and distinct values, which
	// it still estimates well.
	if _, err := conn.Exec(ctx, "SET search_path = "+schema+"; SET synchronous_commit = off; SET session_replication_role = replica; "+
		"SET default_statistics_target = 10"); err != nil {
		return err
	}
	for _, stmt := range append(strings.Split(strings.ReplaceAll(sql, "{N}", fmt.Sprint(bulkRows)), ";\n"), "ANALYZE") {
		t0 := time.Now()
		if _, err := conn.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
		debugf("%s %s %s", schema, time.Since(t0).Round(time.Millisecond), strings.Fields(stmt)[min(2, len(strings.Fields(stmt))-1)])
	}
	return nil
}

func debugf(format string, args ...any) {
	if os.Getenv("PLANS_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

// Bulk rows: i is the row number; program 1,000,000 + i % 1,000; partner
// 2,000,000 + i % 5,000; customer i (tracking's serial gives the bulk
// customers ids 1..N, and analytics keys them the same).
const loadTracking = `
INSERT INTO programs (id, advertiser_id, attribution_window_days, lead_auth_policy, payment_tracking_mode, processor_status, catalog_seq, updated_at)
SELECT 1000000 + i, 3000000 + i, 30, 'server_required', 'processor_connect', 'connected', 0, now() FROM generate_series(0, 999) i;
INSERT INTO api_keys (id, program_id, key_hash, test, catalog_seq)
SELECT 1000000000 + i, 1000000 + i % 1000, int8send(i), i % 2 = 0, 0 FROM generate_series(1, 2000) i;
INSERT INTO partner_programs (id, partner_id, program_id, approved, created_at, catalog_seq)
SELECT 1000000000 + i, 2000000 + i, 1000000 + i % 1000, true, now(), 0 FROM generate_series(1, {N}) i;
INSERT INTO links (id, program_id, partner_id, code, active, catalog_seq)
SELECT 1000000000 + i, 1000000 + i % 1000, 2000000 + i, 'b' || i, true, 0 FROM generate_series(1, {N}) i;
INSERT INTO customers (click_id, program_id, status, first_partner_id, first_link_id, customer_key, email_hash, processor_customer_id,
	signup_date, first_purchase_date, sale_recorded_at, created_at, updated_at)
SELECT 'b' || i, 1000000 + i % 1000, 'conversion', 2000000 + i % 5000, 1000000000 + i, 'k' || i, 'e' || i, 'c' || i,
	now(), now(), now(), now(), now() FROM generate_series(1, {N}) i;
INSERT INTO affiliate_click_events (customer_id, click_id, program_id, link_id, partner_id, code, is_test, created_at)
SELECT i, 'b' || i, 1000000 + i % 1000, 1000000000 + i, 2000000 + i % 5000, 'b' || i, i % 50 = 0, now() FROM generate_series(1, {N}) i;
INSERT INTO lead_events (customer_id, program_id, partner_id, click_id, status, is_test, created_at, settled_at)
SELECT i, 1000000 + i % 1000, 2000000 + i % 5000, 'b' || i, 'settled', false, now(), now() FROM generate_series(1, {N}) i;
INSERT INTO attributions (transaction_id, program_id, outcome, customer_id, click_id, partner_id, link_id, customer_status, source, decided_at)
SELECT 'b' || i, 1000000 + i % 1000, 'attributed', i, 'b' || i, 2000000 + i % 5000, 1000000000 + i, 'conversion', 'api', now()
FROM generate_series(1, {N}) i`

const loadCommissions = `
INSERT INTO programs (id, advertiser_id, commission_type, commission_rate, duration_months, hold_days, catalog_seq, updated_at, processor_account_id)
SELECT 1000000 + i, 3000000 + i, 'percent', '10', 0, 0, 0, now(), 'acct_b' || i FROM generate_series(0, 999) i;
INSERT INTO api_keys (id, program_id, key_hash, test, catalog_seq)
SELECT 1000000000 + i, 1000000 + i % 1000, int8send(i), i % 2 = 0, 0 FROM generate_series(1, 2000) i;
INSERT INTO sales (transaction_id, program_id, customer_id, partner_id, amount_cents, currency, refunded_cents, is_test, source,
	commission_state, reserved, occurred_at, created_at)
SELECT 'b' || i, 1000000 + i % 1000, i, 2000000 + i % 5000, 10000, 'USD', 1000, i % 20 = 0, 'api', 'created', false,
	now() - interval '1 day', now() - interval '1 day' FROM generate_series(1, {N}) i;
INSERT INTO commissions (sale_id, program_id, partner_id, customer_id, kind, status, amount, currency, refunded_amount, credited,
	hold_until, approved_at, created_at, updated_at)
SELECT id, program_id, partner_id, customer_id, 'sale', 'approved', 1000, 'USD', 100, true, created_at, created_at, created_at, created_at
FROM sales;
INSERT INTO commissions (program_id, partner_id, customer_id, kind, status, amount, currency, credited, hold_until, created_at, updated_at)
SELECT 1000000 + i % 1000, 2000000 + i % 5000, i, 'lead', 'pending', 500, 'USD', false, now() + interval '30 days', now(), now()
FROM generate_series(1, {N} / 10) i;
INSERT INTO refunds (sale_id, commission_id, refund_id, requested_cents, amount_cents, deduction, debited, currency, created_at)
SELECT sale_id, id, 'r' || sale_id, 1000, 1000, 100, 100, 'USD', created_at FROM commissions WHERE kind = 'sale';
INSERT INTO balances (partner_id, currency, balance, updated_at)
SELECT 2000000 + i, c, 100000, now() FROM generate_series(0, {N} / 2 - 1) i, (VALUES ('USD'), ('EUR')) v(c);
INSERT INTO balance_entries (partner_id, currency, delta, kind, commission_id, balance_after, created_at)
SELECT partner_id, 'USD', amount, 'credit', id, 100000, created_at FROM commissions WHERE kind = 'sale';
INSERT INTO withdrawals (partner_id, program_id, currency, amount, requested_amount, status, created_at, updated_at)
SELECT 2000000 + i % 5000, 1000000 + i % 1000, 'USD', 500, 500, 'paid', now(), now() FROM generate_series(1, {N}) i;
-- The console (issue 21): one program (1000001) with 100,000 commissions of
-- 50 partners, a third approved and credited, newest every second back;
-- the session check's replica (members, their standing, a day's sign-outs)
-- and partner records as analytics has them. User 4000001 reads 1000001.
INSERT INTO commissions (program_id, partner_id, customer_id, kind, status, amount, currency, credited, hold_until, approved_at,
	created_at, updated_at)
SELECT 1000001, 2000000 + i % 50, 10000000 + i, 'lead', CASE WHEN i % 3 = 0 THEN 'approved' ELSE 'pending' END, 500, 'USD', i % 3 = 0,
	now() + interval '30 days', CASE WHEN i % 3 = 0 THEN now() END, now() - interval '1 second' * i, now() FROM generate_series(1, {N}) i;
INSERT INTO memberships (program_id, user_id, active, permissions, catalog_seq)
SELECT 1000000 + i % 1000, 4000000 + i, true, '{tracking:read}', 0 FROM generate_series(1, {N}) i;
INSERT INTO partner_programs (id, program_id, partner_id, approved, catalog_seq)
SELECT 1000000000 + i, 1000000 + i % 1000, 2000000 + i, true, 0 FROM generate_series(1, {N}) i;
INSERT INTO users (id, blocked, catalog_seq) SELECT 4000000 + i, i % 100 = 0, 0 FROM generate_series(1, {N}) i;
INSERT INTO session_revocations (session_id, user_id, expires_at, catalog_seq)
SELECT md5(i::text), 4000000 + i, now() + interval '1 hour' * (i % 12), 0 FROM generate_series(1, {N}) i;
INSERT INTO notifications (recipient_kind, recipient_id, kind, payload, created_at)
SELECT CASE WHEN i % 2 = 0 THEN 'partner' ELSE 'advertiser' END, 2000000 + i % 5000, 'sale', '{}', now() FROM generate_series(1, {N}) i;
INSERT INTO processor_events (event_id, type, account_id, program_id, livemode, outcome, sale_id, payload, received_at)
SELECT 'b' || i, 'checkout.session.completed', 'acct_b' || i % 1000, 1000000 + i % 1000, true, 'sale_recorded', i, '{}', now()
FROM generate_series(1, {N}) i;
INSERT INTO payment_refs (ref, kind, sale_id, program_id, created_at) SELECT 'b' || id, 'payment_intent', id, program_id, created_at FROM sales;
INSERT INTO processor_refunds (sale_id, refund_id, amount_cents, created_at) SELECT id, 'b', 1000, created_at FROM sales;
INSERT INTO disputes (dispute_id, sale_id, status, opened_at, closed_at) SELECT 'b' || id, id, 'won', created_at, created_at FROM sales;
-- The running totals the ledger's triggers keep (migration 00010); the
-- load runs with triggers off, so they are summed from the rows
-- (program_money_from_rows, migration 00012).
INSERT INTO program_money SELECT * FROM program_money_from_rows;
-- and as many again of partners with money in the bulk programs, so the
-- table is as large as the others.
INSERT INTO program_money (program_id, partner_id, currency, earned, paid, open)
SELECT 1000000 + i % 1000, 5000000 + i, 'USD', 1000, 500, 0 FROM generate_series(1, {N}) i`

const loadAnalytics = `
INSERT INTO programs (id, created_at, payment_tracking_mode, processor_status, processor_account_id, charges_enabled, payouts_enabled,
	details_submitted, catalog_seq)
SELECT 1000000 + i, now() - interval '2 years', 'processor_connect', 'connected', 'acct_b' || i, true, true, true, 0
FROM generate_series(0, 999) i;
INSERT INTO api_keys (id, program_id, key_hash, test, catalog_seq)
SELECT 1000000000 + i, 1000000 + i % 1000, int8send(i), i % 2 = 0, 0 FROM generate_series(1, 2000) i;
INSERT INTO memberships (program_id, user_id, active, permissions, catalog_seq)
SELECT 1000000 + i % 1000, 4000000 + i, true, '{tracking:read}', 0 FROM generate_series(1, {N}) i;
INSERT INTO partner_programs (id, program_id, partner_id, approved, created_at, catalog_seq)
SELECT 1000000000 + i, 1000000 + i % 1000, 2000000 + i, true, now() - interval '1 day' * (i % 700), 0 FROM generate_series(1, {N}) i;
INSERT INTO partners (id, name, catalog_seq) SELECT 2000000 + i, 'p', 0 FROM generate_series(1, {N}) i;
-- Every member's standing and a day's sign-outs: read on each dashboard request.
INSERT INTO users (id, blocked, catalog_seq) SELECT 4000000 + i, i % 100 = 0, 0 FROM generate_series(1, {N}) i;
INSERT INTO session_revocations (session_id, user_id, expires_at, catalog_seq)
SELECT md5(i::text), 4000000 + i, now() + interval '1 hour' * (i % 12), 0 FROM generate_series(1, {N}) i;
-- 1,000 programs x 100 quarter hours (or days), ending today.
INSERT INTO activity_buckets (program_id, bucket, clicks, leads, conversions, sales)
SELECT 1000000 + i % 1000, date_trunc('day', now()) - interval '15 minutes' * (i / 1000), 5, 2, 1, 1 FROM generate_series(1, {N}) i;
INSERT INTO money_buckets (program_id, bucket, currency, revenue_minor, commission_minor)
SELECT 1000000 + i % 1000, date_trunc('day', now()) - interval '15 minutes' * (i / 1000), 'USD', 10000, 1000 FROM generate_series(1, {N}) i;
INSERT INTO activity_days (program_id, day, clicks, leads, conversions, sales, revenue_usd, commission_usd)
SELECT 1000000 + i % 1000, current_date - (i / 1000), 5, 2, 1, 1, 100, 10 FROM generate_series(1, {N}) i;
-- The producers' ids already counted (a refund reads whether its sale was).
INSERT INTO counted (kind, id)
SELECT (ARRAY['click', 'sale', 'commission', 'refund'])[1 + i % 4], 1000000000 + i FROM generate_series(1, {N}) i;
INSERT INTO customers (customer_id, program_id, status, signup_bucket, first_purchase_bucket)
SELECT i, 1000000 + i % 1000, 'conversion', date_trunc('day', now()), date_trunc('day', now()) FROM generate_series(1, {N}) i;
INSERT INTO test_events (program_id, kind, event_id, occurred_at, created_at)
SELECT 1000000 + i % 1000, CASE WHEN i % 2 = 0 THEN 'click' ELSE 'lead' END, 1000000000 + i, now(), now() FROM generate_series(1, {N}) i;
INSERT INTO sources (program_id, referrer, utm_source, utm_medium, utm_campaign, landing_page, country, device)
SELECT 1000000 + i % 1000, 'r' || i, '', '', '', '/', 'US', 'desktop' FROM generate_series(1, {N}) i;
INSERT INTO customer_sources (customer_id, source_id) SELECT i, i FROM generate_series(1, {N}) i;
INSERT INTO source_buckets (program_id, bucket, source_id, clicks, leads, conversions)
SELECT 1000000 + i % 1000, date_trunc('day', now()) - interval '15 minutes' * (i / 1000), i, 3, 1, 1 FROM generate_series(1, {N}) i;
INSERT INTO source_money (program_id, bucket, source_id, currency, revenue_minor)
SELECT 1000000 + i % 1000, date_trunc('day', now()) - interval '15 minutes' * (i / 1000), i, 'USD', 10000 FROM generate_series(1, {N}) i;
INSERT INTO partner_buckets (program_id, bucket, partner_id, clicks, leads, conversions)
SELECT 1000000 + i % 1000, date_trunc('day', now()) - interval '15 minutes' * (i / 1000), 2000000 + i % 5000, 3, 1, 1 FROM generate_series(1, {N}) i;
INSERT INTO partner_money (program_id, bucket, partner_id, currency, revenue_minor, commission_minor)
SELECT 1000000 + i % 1000, date_trunc('day', now()) - interval '15 minutes' * (i / 1000), 2000000 + i % 5000, 'USD', 10000, 1000
FROM generate_series(1, {N}) i;
-- Sales of customers no click names (leads without one): their money
-- stays on the empty source, remembered for a click that never comes.
INSERT INTO unsourced_sales (customer_id, program_id, bucket, currency, source_id, revenue_minor)
SELECT 3000000 + i, 1000000 + i % 1000, date_trunc('day', now()), 'USD', 1 + i % 1000, 10000 FROM generate_series(1, {N}) i`

// loadAccounts: the catalog the console's routes read (a person's
// memberships, workspaces and programs, their session's standing, a
// program's partners): N workspaces (open sign-up makes one per person),
// the first 1,000 with a program each, N people each a member of one
// program, N revoked sessions, N partners each enrolled in one program
// with a link.
const loadAccounts = `
INSERT INTO advertisers (id, name, email) SELECT 3000000 + i, 'Bulk ' || i, 'b' || i || '@bulk.example' FROM generate_series(0, {N}) i;
INSERT INTO programs (id, advertiser_id, name, domain, commission_type, commission_rate)
SELECT 1000000 + i, 3000000 + i, 'Bulk ' || i, 'bulk.example', 'percent', 10 FROM generate_series(0, 999) i;
INSERT INTO users (id, email, advertiser_id) SELECT 1000000000 + i, 'u' || i || '@bulk.example', 3000000 + i FROM generate_series(1, {N}) i;
INSERT INTO memberships (program_id, user_id, active, permissions)
SELECT 1000000 + i % 1000, 1000000000 + i, i % 10 <> 0, '{tracking:read}' FROM generate_series(1, {N}) i;
INSERT INTO session_revocations (session_id, user_id, expires_at, revoked_at)
SELECT md5(i::text), 1000000000 + i, now() + interval '1 hour' * (i % 12), now() FROM generate_series(1, {N}) i;
INSERT INTO partners (id, name, email) SELECT 2000000 + i, 'Partner ' || i, 'p' || i || '@bulk.example' FROM generate_series(1, {N}) i;
INSERT INTO partner_programs (partner_id, program_id, approved) SELECT 2000000 + i, 1000000 + i % 1000, true FROM generate_series(1, {N}) i;
INSERT INTO links (program_id, partner_id, code) SELECT 1000000 + i % 1000, 2000000 + i, 'bulk' || i FROM generate_series(1, {N}) i;
-- Written after the migrations, as if always there: the catalog backfills
-- (republishing it all once at accounts' start) are not what this test
-- measures, and would send 300,000 events through the replicas first.
INSERT INTO catalog_backfills (name, events) VALUES ('2026-11-blocked-users', 0), ('2026-11-commissions-console-replica', 0)`

// loadWebhooks: the console replica (as commissions'), then what grows
// with programs and with traffic. Endpoints and listeners grow with
// programs (at most 20 endpoints a program; a program keeps its listeners,
// expired ones included, until it starts another), so theirs are two each
// of N/2 programs from 1,000,000, the bulk programs among them: program
// 1,000,000 + k has endpoints and listeners 2k+1 and 2k+2. Events,
// deliveries and the listeners' queues are traffic: N events of the bulk
// programs (program 1,000,000 + i % 1,000, a minute apart, oldest first),
// each delivered to one of its program's two endpoints. Ids are given and
// the sequences moved past them, so the test's own rows come after, as new
// rows do.
const loadWebhooks = `
INSERT INTO programs (id, advertiser_id, catalog_seq) SELECT 1000000 + i, 3000000 + i, 0 FROM generate_series(0, 999) i;
INSERT INTO api_keys (id, program_id, key_hash, test, catalog_seq)
SELECT 1000000000 + i, 1000000 + i % 1000, int8send(i), i % 2 = 0, 0 FROM generate_series(1, 2000) i;
INSERT INTO memberships (program_id, user_id, active, permissions, catalog_seq)
SELECT 1000000 + i % 1000, 4000000 + i, true, '{tracking:read}', 0 FROM generate_series(1, {N}) i;
INSERT INTO partner_programs (id, program_id, partner_id, approved, catalog_seq)
SELECT 1000000000 + i, 1000000 + i % 1000, 2000000 + i, true, 0 FROM generate_series(1, {N}) i;
INSERT INTO users (id, blocked, catalog_seq) SELECT 4000000 + i, i % 100 = 0, 0 FROM generate_series(1, {N}) i;
-- Session and event ids in key order (hex, padded): random ones made
-- their inserts two to three times slower, and no plan depends on them.
INSERT INTO session_revocations (session_id, user_id, expires_at, catalog_seq)
SELECT lpad(to_hex(i), 32, '0'), 4000000 + i, now() + interval '1 hour' * (i % 12), 0 FROM generate_series(1, {N}) i;
-- svc test's fixture partner of each program.
INSERT INTO fixture_partners (partner_id, program_id) SELECT 2500000 + i, 1000000 + i FROM generate_series(0, 999) i;
-- Endpoints: every v1 type but clicks, or (one in ten) clicks, leads and
-- sales; one in five include_test; one program in 25 has its endpoints
-- disabled by the dispatcher (failing for 5 days).
INSERT INTO endpoints (id, program_id, url, events, include_test, enabled, disabled_reason, disabled_at, failing_since, created_at, updated_at)
SELECT i, 1000000 + (i - 1) / 2, 'https://hooks.b' || i || '.example/svc',
	CASE WHEN i % 10 = 0 THEN '{click.recorded,lead.created,sale.created}'::text[]
		ELSE '{lead.created,sale.created,sale.refunded,commission.created,commission.approved,commission.reversed,partner.enrolled,payout.paid}' END,
	i % 5 = 0, live, CASE WHEN live THEN '' ELSE 'failing' END, CASE WHEN NOT live THEN now() - interval '2 days' END,
	CASE WHEN NOT live THEN now() - interval '7 days' END, now() - interval '200 days', now() - interval '30 days'
FROM generate_series(1, {N}) i, LATERAL (SELECT (i - 1) / 2 % 25 <> 0 AS live) e;
SELECT setval(pg_get_serial_sequence('endpoints', 'id'), {N});
INSERT INTO endpoint_secrets (id, endpoint_id, secret_sealed, created_at) SELECT i, i, int8send(i), now() - interval '30 days'
FROM generate_series(1, {N}) i;
SELECT setval(pg_get_serial_sequence('endpoint_secrets', 'id'), {N});
-- Events: the v1 types in turn (a few events per object), one in 50 a
-- test event.
INSERT INTO events (id, seq, program_id, type, is_test, object_key, body, created_at)
SELECT 'evt_' || lpad(to_hex(i), 32, '0'), i, 1000000 + i % 1000, t, i % 50 = 0, split_part(t, '.', 1) || ':b' || i / 4, convert_to('{"type":"' || t || '"}', 'UTF8'),
	now() - interval '1 minute' * ({N} - i)
FROM generate_series(1, {N}) i, LATERAL (SELECT (ARRAY['lead.created', 'sale.created', 'commission.created', 'commission.approved',
	'sale.refunded', 'commission.reversed', 'partner.enrolled', 'payout.paid'])[1 + i % 8] AS t) e;
SELECT setval(pg_get_serial_sequence('events', 'seq'), {N});
-- Deliveries, by j, the event's rank in its program: most delivered at
-- the first attempt, 2 % failed (retries over), the last 2 % pending:
-- waiting for a retry an hour or more ahead, or, for a disabled endpoint,
-- due long ago and parked (its backlog waits for the brand to turn it on
-- again, out of the claim's index).
-- Inserted by endpoint (the order of three of the table's indexes): half
-- the time of id order.
INSERT INTO deliveries (id, endpoint_id, event_id, event_type, object_key, status, attempts, next_attempt_at, last_attempt_at, last_status,
	last_error, last_duration_ms, delivered_at, created_at, parked)
SELECT seq, 2 * (program_id - 1000000) + 1 + j % 2, id, type, object_key, st,
	CASE st WHEN 'delivered' THEN 1 WHEN 'failed' THEN 14 ELSE 3 END,
	CASE WHEN st <> 'pending' THEN NULL WHEN (program_id - 1000000) % 25 = 0 THEN now() - interval '1 day'
		ELSE now() + interval '1 hour' + interval '1 minute' * (seq % 600) END,
	created_at + interval '1 second', CASE st WHEN 'delivered' THEN 200 ELSE 503 END, CASE st WHEN 'delivered' THEN '' ELSE 'HTTP 503' END,
	120, CASE WHEN st = 'delivered' THEN created_at + interval '1 second' END, created_at,
	st = 'pending' AND (program_id - 1000000) % 25 = 0
FROM events, LATERAL (SELECT seq / 1000 AS j) r,
	LATERAL (SELECT CASE WHEN j >= 98 THEN 'pending' WHEN j % 50 = 7 THEN 'failed' ELSE 'delivered' END AS st) s
ORDER BY 2, 1;
SELECT setval(pg_get_serial_sequence('deliveries', 'id'), {N});
-- Listeners, all long expired but one in 1,000; each event queued for one
-- of its program's two, never taken (a listener that stopped polling
-- keeps its queue until it is deleted).
INSERT INTO listeners (id, program_id, secret_sealed, events, include_test, created_at, expires_at)
SELECT i, 1000000 + (i - 1) / 2, int8send(i),
	'{lead.created,sale.created,sale.refunded,commission.created,commission.approved,commission.reversed,partner.enrolled,payout.paid}', true,
	now() - interval '1 minute' * ({N} - i),
	CASE WHEN i % 1000 = 0 THEN now() + interval '1 hour' ELSE now() - interval '1 minute' * ({N} - i) + interval '2 minutes' END
FROM generate_series(1, {N}) i;
SELECT setval(pg_get_serial_sequence('listeners', 'id'), {N});
INSERT INTO listener_events (listener_id, seq, event_id) SELECT 2 * (program_id - 1000000) + 1 + seq / 1000 % 2, seq, id FROM events ORDER BY 1, 2;
-- What the dispatcher told the programs: their endpoints disabled, a
-- hundred each (deleted endpoints' included).
INSERT INTO notifications (id, program_id, endpoint_id, kind, created_at)
SELECT i, 1000000 + i % 1000, 2 * (i % 1000) + 1, 'endpoint_disabled', now() - interval '1 minute' * ({N} - i)
FROM generate_series(1, {N}) i ORDER BY 2, 1;
SELECT setval(pg_get_serial_sequence('notifications', 'id'), {N});
-- The ledger's test sales.
INSERT INTO test_sales (sale_id) SELECT 1000000000 + i FROM generate_series(1, {N}) i`
