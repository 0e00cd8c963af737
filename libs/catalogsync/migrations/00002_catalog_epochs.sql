-- +goose Up
-- Progress is kept per epoch (the accounts database's identity carried by
-- every catalog event): sequence numbers restart on a new accounts database,
-- so a watermark is meaningful only within the epoch it was counted in.
-- Rows from before epochs existed keep the empty epoch.
ALTER TABLE catalog_progress DROP COLUMN singleton;
ALTER TABLE catalog_progress ADD COLUMN epoch text NOT NULL DEFAULT '';
ALTER TABLE catalog_progress ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE catalog_progress ADD PRIMARY KEY (epoch);
-- Nothing counted yet: the first event's epoch starts its own row.
DELETE FROM catalog_progress WHERE watermark = 0;

ALTER TABLE catalog_applied ADD COLUMN epoch text NOT NULL DEFAULT '';
ALTER TABLE catalog_applied DROP CONSTRAINT catalog_applied_pkey;
ALTER TABLE catalog_applied ADD PRIMARY KEY (epoch, seq);

-- +goose Down
SELECT 'forward-only';
