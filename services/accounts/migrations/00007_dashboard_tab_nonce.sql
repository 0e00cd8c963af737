-- +goose Up
-- The nonce the dashboard page stored in its browser tab before starting a
-- sign-in; the callback hands it back in the fragment beside the session,
-- and the page keeps only a session that carries its own (login CSRF).
-- '' for a sign-in started without one.
ALTER TABLE dashboard_signin_sessions ADD COLUMN tab_nonce text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE dashboard_signin_sessions DROP COLUMN tab_nonce;
