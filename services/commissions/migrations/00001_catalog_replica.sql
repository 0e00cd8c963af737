-- +goose Up
-- Commissions' replica of the accounts catalog: what the money routes will
-- read (the program a key authenticates, the program's hold period and
-- commission terms). Rows are full snapshots from catalog events;
-- catalog_seq guards against an older event overwriting a newer one.

CREATE TABLE programs (
    id              bigint PRIMARY KEY,
    advertiser_id   bigint      NOT NULL,
    commission_type text        NOT NULL,
    -- The rate as accounts sends it (a decimal string: a percentage for
    -- percent types, an amount in currency units for fixed ones).
    commission_rate text        NOT NULL,
    duration_months integer     NOT NULL,
    hold_days       integer     NOT NULL,
    catalog_seq     bigint      NOT NULL,
    updated_at      timestamptz NOT NULL
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

-- +goose Down
DROP TABLE api_keys, programs;
