-- +goose Up
-- One row per catalog backfill a database has run (pgstore.Backfill): a
-- replica whose consumer group had passed events before it kept their
-- kind never sees them, so accounts republishes that state once per
-- database, and this row is what makes it once.
CREATE TABLE catalog_backfills (
    name   text PRIMARY KEY,
    ran_at timestamptz NOT NULL DEFAULT now(),
    events integer NOT NULL
);

-- +goose Down
DROP TABLE catalog_backfills;
