-- +goose Up
-- `svc listen` sessions (issue 22): a developer's CLI long-polls a
-- program's events and forwards them, signed with the listener's secret,
-- to a local server. A listener lives while it is polled: every poll moves
-- expires_at two minutes ahead, and the events writer keeps an event row
-- (without any delivery) while a listener of its program wants its type.
-- secret_sealed: the listener's signing secret, sealed like endpoints'
-- (internal/secret) but under a listener's own additional data, so it never
-- opens as an endpoint's secret nor the other way round.
CREATE TABLE listeners (
    id            bigserial   PRIMARY KEY,
    program_id    bigint      NOT NULL,
    secret_sealed bytea       NOT NULL,
    events        text[]      NOT NULL,
    include_test  boolean     NOT NULL,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL
);
-- The writer's probe (a program's listeners still alive) and the cap per
-- program.
CREATE INDEX listeners_program ON listeners (program_id, expires_at);

-- Program API keys, from catalog.api_key.upserted (libs/catalogsync
-- UpsertAPIKey documents the table): `svc listen` may authenticate with
-- the program's key instead of a login token.
CREATE TABLE api_keys (
    id                 bigint      PRIMARY KEY,
    program_id         bigint      NOT NULL,
    key_hash           bytea       NOT NULL UNIQUE,
    test               boolean     NOT NULL,
    rotation_marked_at timestamptz,
    rotation_deadline  timestamptz,
    revoked            boolean     NOT NULL DEFAULT false,
    catalog_seq        bigint      NOT NULL
);

-- +goose Down
SELECT 'forward-only';
