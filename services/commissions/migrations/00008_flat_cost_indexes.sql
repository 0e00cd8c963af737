-- +goose Up
-- Flat cost at any size (issue 20): every statement of the sale, refund,
-- processor and admin-read paths is served by an index whose leading
-- columns its predicate fixes (the plan test, deploy/devstack/plans,
-- checks it on 100,000-row tables).
--
-- sales: UNIQUE (is_test, transaction_id) could not serve
-- `transaction_id = $1` (the refund's lock, GET /admin/v1/sales/{id}, the
-- processor's SaleFor): Postgres 15 has no skip scan, so each read scanned
-- the whole index. The same uniqueness, live and test ids apart, with the
-- transaction id first; `ON CONFLICT (is_test, transaction_id)` infers it
-- (an arbiter is matched by its set of columns, not their order).
--
-- commissions: SaleCommissionIDs reads `sale_id = $1` without kind, which
-- the partial unique index (sale_id) WHERE kind = 'sale' cannot serve. A
-- commission has a sale_id exactly when its kind is 'sale' (the table's
-- CHECK), and a unique index lets NULLs repeat, so a plain unique index on
-- sale_id enforces the same thing and serves both reads.
--
-- processor_events: the waiting-events gauge (WaitingStats: count and
-- oldest of outcome 'awaiting_payment') had only the GIN index on refs,
-- which serves `refs && $1` but not a count: it scanned the table. A
-- small partial index on received_at of the waiting events serves it.
--
-- sales_customer is dropped: no statement reads sales by (program_id,
-- customer_id) (the customer's history is read from commissions by
-- commissions_customer), and it made every completion, which writes
-- customer_id, a non-HOT update.
--
-- fillfactor: the refund's `UPDATE sales SET refunded_cents`, a partial
-- refund's commission update that keeps its status, and every balance
-- move change no indexed column, so they can be HOT updates (no index
-- entries written) when the row's page has room; leave room on new pages.
-- Setting it rewrites nothing and does not block reads or writes.
--
-- Not CONCURRENTLY: a concurrent build waits for every transaction open in
-- the database, and the other services sharing a database (the local stack,
-- every test stack of make test) keep consumer transactions open, so each
-- commissions start waited on them for tens of seconds. In one transaction
-- the swap is atomic; on a large production ledger the build blocks sale
-- writes for its duration (seconds per million sales): run it in a quiet
-- window, or build the same indexes by hand with CREATE INDEX CONCURRENTLY
-- first (IF NOT EXISTS makes this migration keep them).
CREATE UNIQUE INDEX IF NOT EXISTS sales_transaction ON sales (transaction_id, is_test);
CREATE UNIQUE INDEX IF NOT EXISTS commissions_sale ON commissions (sale_id);
CREATE INDEX IF NOT EXISTS processor_events_awaiting ON processor_events (received_at) WHERE outcome = 'awaiting_payment';

ALTER TABLE sales DROP CONSTRAINT IF EXISTS sales_is_test_transaction_id_key;
DROP INDEX IF EXISTS commissions_one_per_sale;
DROP INDEX IF EXISTS sales_customer;

ALTER TABLE sales SET (fillfactor = 90);
ALTER TABLE commissions SET (fillfactor = 90);
ALTER TABLE balances SET (fillfactor = 70);

-- +goose Down
SELECT 'forward-only';
