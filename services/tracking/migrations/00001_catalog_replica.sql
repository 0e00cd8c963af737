-- +goose Up
-- Tracking's replica of the accounts catalog: only what the tracking routes
-- read. Rows are full snapshots from catalog events; catalog_seq guards
-- against an older event overwriting a newer one.

CREATE TABLE programs (
    id                      bigint PRIMARY KEY,
    advertiser_id           bigint      NOT NULL,
    attribution_window_days integer     NOT NULL,
    lead_auth_policy        text        NOT NULL,
    payment_tracking_mode   text        NOT NULL,
    processor_status        text        NOT NULL,
    allowed_origins         text[]      NOT NULL DEFAULT '{}',
    catalog_seq             bigint      NOT NULL,
    updated_at              timestamptz NOT NULL
);

CREATE TABLE api_keys (
    id                 bigint PRIMARY KEY,
    program_id         bigint      NOT NULL,
    key_hash           bytea       NOT NULL UNIQUE,
    test               boolean     NOT NULL,
    rotation_marked_at timestamptz,
    rotation_deadline  timestamptz,
    revoked            boolean     NOT NULL DEFAULT false,
    catalog_seq        bigint      NOT NULL
);

CREATE TABLE partner_programs (
    id          bigint PRIMARY KEY,
    partner_id  bigint      NOT NULL,
    program_id  bigint      NOT NULL,
    approved    boolean     NOT NULL,
    created_at  timestamptz NOT NULL,
    catalog_seq bigint      NOT NULL,
    UNIQUE (program_id, partner_id)
);

CREATE TABLE links (
    id          bigint PRIMARY KEY,
    program_id  bigint  NOT NULL,
    partner_id  bigint  NOT NULL,
    code        text    NOT NULL,
    active      boolean NOT NULL,
    catalog_seq bigint  NOT NULL
);
CREATE INDEX links_code_idx ON links (code);
CREATE UNIQUE INDEX links_program_code_idx ON links (program_id, code);

-- +goose Down
DROP TABLE links, partner_programs, api_keys, programs;
