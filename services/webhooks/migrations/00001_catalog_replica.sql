-- +goose Up
-- Webhooks' replica of the accounts catalog: which programs exist (and
-- whose they are), and what the console routes check (libs/catalogsync
-- ApplyConsole: memberships with their permissions, users' suspensions,
-- sessions signed out before their expiry, partner-program records). Rows
-- are full snapshots from catalog events; catalog_seq guards against an
-- older event overwriting a newer one.
CREATE TABLE programs (
    id            bigint PRIMARY KEY,
    advertiser_id bigint NOT NULL,
    catalog_seq   bigint NOT NULL
);

CREATE TABLE memberships (
    program_id  bigint  NOT NULL,
    user_id     bigint  NOT NULL,
    active      boolean NOT NULL,
    permissions text[]  NOT NULL,
    catalog_seq bigint  NOT NULL,
    PRIMARY KEY (program_id, user_id)
);

CREATE TABLE users (
    id          bigint  PRIMARY KEY,
    blocked     boolean NOT NULL,
    catalog_seq bigint  NOT NULL
);

CREATE TABLE session_revocations (
    session_id  text        PRIMARY KEY,
    user_id     bigint      NOT NULL,
    expires_at  timestamptz NOT NULL,
    catalog_seq bigint      NOT NULL
);
CREATE INDEX session_revocations_expires_idx ON session_revocations (expires_at);

CREATE TABLE partner_programs (
    id          bigint  PRIMARY KEY,
    program_id  bigint  NOT NULL,
    partner_id  bigint  NOT NULL,
    approved    boolean NOT NULL,
    catalog_seq bigint  NOT NULL
);
CREATE UNIQUE INDEX partner_programs_program_partner ON partner_programs (program_id, partner_id);

-- +goose Down
SELECT 'forward-only';
