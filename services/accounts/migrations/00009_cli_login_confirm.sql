-- +goose Up
-- The command-line sign-in's confirmation step (device-flow pattern): a
-- short user code shown by the CLI and on the page the sign-in lands on,
-- and the SHA-256 of the one-time value that page confirms with. The login
-- token is released to the poller only once confirmed_at is set. Sessions
-- started before this migration have no code ('') and can no longer
-- finish: they live 5 minutes, and `svc login` starts a new one.
ALTER TABLE cli_login_sessions
    ADD COLUMN user_code    text        NOT NULL DEFAULT '',
    ADD COLUMN confirm_hash bytea       UNIQUE,
    ADD COLUMN confirmed_at timestamptz;

-- +goose Down
ALTER TABLE cli_login_sessions DROP COLUMN confirmed_at, DROP COLUMN confirm_hash, DROP COLUMN user_code;
