-- +goose Up
-- Program API keys from the catalog (hashes only; catalogsync.UpsertAPIKey
-- writes them), for the program-key routes (readiness).
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
SELECT 'forward-only';
