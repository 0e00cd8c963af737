-- +goose Up
-- The dashboard's browser sign-in: one row per sign-in started in a
-- browser. Only the SHA-256 of the state is stored (it is what the
-- callback presents); a row is used once (consumed_at) and lives 5 minutes.
CREATE TABLE dashboard_signin_sessions (
    id          bigserial   PRIMARY KEY,
    state_hash  bytea       NOT NULL UNIQUE,
    nonce       text        NOT NULL,
    return_to   text        NOT NULL,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    consumed_at timestamptz
);
CREATE INDEX dashboard_signin_sessions_created_idx ON dashboard_signin_sessions (created_at);

-- +goose Down
DROP TABLE dashboard_signin_sessions;
