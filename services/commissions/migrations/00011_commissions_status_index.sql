-- +goose Up
-- The console's commissions list filtered by status (issue 21's benchmark,
-- make bench-console). With (program_id, created_at, id) the planner read a
-- page of `status=approved` through that index, guessing from approved
-- being most rows that a page came soon; but the newest commissions are
-- all pending (in their hold period: 76,000 of a program's 1,000,000 in the
-- benchmark), and the page scanned every one of them first (20 ms).
--
-- A status now has its own range, (program_id, status, created_at, id).
-- The unfiltered list keeps a (program_id, created_at, id) index, made
-- partial on a predicate that holds for every row (the table's CHECK
-- allows no other kind) and that only the unfiltered statement states
-- (pgstore.CommissionsQuery): a statement with a status does not imply it,
-- so the planner cannot choose it for one.
CREATE INDEX commissions_program_status_created ON commissions (program_id, status, created_at, id);
CREATE INDEX commissions_program_listed ON commissions (program_id, created_at, id) WHERE kind IN ('sale', 'lead');
DROP INDEX commissions_program_created;

-- +goose Down
SELECT 'forward-only';
