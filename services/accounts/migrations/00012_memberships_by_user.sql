-- +goose Up
-- The console reads a person's memberships by user (GET /api/v1/programs,
-- /api/v1/dashboard/me, the workspaces they reach): the primary key
-- (program_id, user_id) cannot serve user_id = $1, so each read scanned
-- every membership of every program. Ordered by program_id for the
-- programs list's keyset pages.
CREATE INDEX memberships_user ON memberships (user_id, program_id);

-- +goose Down
DROP INDEX memberships_user;
