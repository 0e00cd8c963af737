-- +goose Up
-- What the brand is told about its endpoints, for the console to list: for
-- now one kind, an endpoint the dispatcher disabled after failing every
-- attempt for DISABLE_AFTER. Written in the transaction that disables it.
CREATE TABLE notifications (
    id          bigserial   PRIMARY KEY,
    program_id  bigint      NOT NULL,
    endpoint_id bigint      NOT NULL REFERENCES endpoints ON DELETE CASCADE,
    kind        text        NOT NULL CHECK (kind IN ('endpoint_disabled')),
    created_at  timestamptz NOT NULL
);
-- The console's list of a program's notifications, newest first.
CREATE INDEX notifications_program ON notifications (program_id, id);

-- +goose Down
SELECT 'forward-only';
