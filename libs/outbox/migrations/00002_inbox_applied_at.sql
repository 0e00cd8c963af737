-- +goose NO TRANSACTION
-- +goose Up
-- The inbox sweeper deletes rows applied before its retention cutoff, in
-- batches picked by applied_at; without this index every batch would scan
-- the whole table.
--
-- CONCURRENTLY because the inbox may already be large (it was never swept
-- before this migration), and a plain CREATE INDEX would block consumers'
-- inserts for the whole build. A build that failed halfway leaves an invalid
-- index that IF NOT EXISTS would keep, so a retry drops it first; the version
-- is recorded only after both statements succeed, so the index can only
-- exist here from such a failed attempt.
DROP INDEX CONCURRENTLY IF EXISTS inbox_applied_at_idx;
CREATE INDEX CONCURRENTLY inbox_applied_at_idx ON inbox (applied_at);
