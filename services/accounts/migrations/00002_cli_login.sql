-- +goose Up
-- Command-line sign-in: login sessions (the state a sign-in link carries)
-- and the login tokens the CLI gets once a session is signed in.

-- The state is what lets a poller collect the login token, so only its
-- SHA-256 hash is stored. Every timestamp comes from the service's clock.
CREATE TABLE cli_login_sessions (
    id           bigserial   PRIMARY KEY,
    state_hash   bytea       NOT NULL UNIQUE,
    nonce        text        NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    user_id      bigint      REFERENCES users (id),
    signed_in_at timestamptz,
    consumed_at  timestamptz
);
CREATE INDEX cli_login_sessions_created_idx ON cli_login_sessions (created_at);

-- Login tokens are stored only as SHA-256 hashes. user_id has no foreign
-- key on purpose: a token whose user is gone must answer "User not found",
-- not disappear with it.
CREATE TABLE cli_login_tokens (
    id         bigserial   PRIMARY KEY,
    token_hash bytea       NOT NULL UNIQUE,
    user_id    bigint      NOT NULL,
    session_id bigint      UNIQUE REFERENCES cli_login_sessions (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX cli_login_tokens_expires_idx ON cli_login_tokens (expires_at);

-- +goose Down
DROP TABLE cli_login_tokens, cli_login_sessions;
