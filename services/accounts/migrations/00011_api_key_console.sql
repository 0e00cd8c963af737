-- +goose Up
-- The brand console's keys (issue 21).
-- last4: the key's last 4 characters, kept at issue so the console can show
-- a key masked as its prefix and last 4 characters; the key itself is
-- still stored only as its hash. NULL for keys issued before this
-- migration: their last characters were never kept and cannot be derived
-- from the hash, so the console shows them by their prefix alone.
-- revoked_at: when the key was revoked (DELETE …/keys/:keyId); the catalog
-- event carries revoked = true and every replica refuses the key.
-- last_used_at: the latest successful authentication any service reported
-- (apikeys.used.v1, at most one report per key per minute per service
-- process), kept as the maximum seen so redeliveries and late reports
-- never move it back.
ALTER TABLE api_keys ADD COLUMN last4 text, ADD COLUMN revoked_at timestamptz, ADD COLUMN last_used_at timestamptz;

-- +goose Down
SELECT 'forward-only';
