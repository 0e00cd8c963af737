-- +goose Up
-- The catalog's epoch: this database's identity, carried by every catalog
-- event and echoed in every acknowledgement. Sequence numbers restart on a
-- new database, so acknowledgements left in the broker by an earlier one
-- (a second clone, a recreated local database) must not count toward the
-- sync barrier of this one.
ALTER TABLE catalog_seq ADD COLUMN epoch text NOT NULL DEFAULT gen_random_uuid()::text;

-- +goose Down
SELECT 'forward-only';
