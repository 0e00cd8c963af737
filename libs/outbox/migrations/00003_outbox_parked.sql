-- +goose NO TRANSACTION
-- +goose Up
-- A row the broker will never accept (over its size limit, a topic that
-- does not exist for long, an invalid record) is parked by the relay instead
-- of blocking the whole outbox: parked_at and park_reason set, sent_at still
-- NULL. Later rows of the same topic and key are parked behind it (reason
-- "held behind ...") so per-key order holds; outbox.Unpark releases them.
-- Nullable columns without a default: no table rewrite.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS parked_at timestamptz;
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS park_reason text;
-- The relay looks up parked rows by topic and key for every row it reads;
-- parked rows are few, so the partial index is tiny. CONCURRENTLY (as in
-- 00002) so a large outbox is indexed without blocking Enqueue; a failed
-- build leaves an invalid index, dropped before the retry.
DROP INDEX CONCURRENTLY IF EXISTS outbox_parked_idx;
CREATE INDEX CONCURRENTLY outbox_parked_idx ON outbox (topic, key, id) WHERE parked_at IS NOT NULL AND sent_at IS NULL;
