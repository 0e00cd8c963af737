-- +goose Up
-- The catalog's epoch: this database's identity, carried by every catalog
-- event and echoed in every acknowledgement. Sequence numbers restart on a
-- new database, so acknowledgements left in the broker by an earlier one
-- (a second clone, a recreated local database) must not count toward the
-- sync barrier of this one.
-- A database that already numbered catalog events keeps the empty epoch its
-- replicas counted them under (a new epoch would restart their count and
-- hold the barrier shut); a fresh one gets a random identity.
ALTER TABLE catalog_seq ADD COLUMN epoch text NOT NULL DEFAULT '';
UPDATE catalog_seq SET epoch = gen_random_uuid()::text WHERE seq = 0;

-- +goose Down
SELECT 'forward-only';
