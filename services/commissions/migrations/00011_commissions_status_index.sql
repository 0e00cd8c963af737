-- +goose Up
-- The console's commissions list filtered by status (issue 21's benchmark,
-- make bench-console): with (program_id, created_at, id) alone, a page of
-- `status=approved` scanned back from the newest commission through every
-- commission still in its hold period (pending, the newest ones by
-- nature: 76,000 of a program's 1,000,000 in the benchmark) before it found
-- a page, and cost tens of milliseconds. With the status second, each
-- status is its own range, read backwards from the cursor as the other
-- filters are.
CREATE INDEX commissions_program_status_created ON commissions (program_id, status, created_at, id);

-- +goose Down
SELECT 'forward-only';
