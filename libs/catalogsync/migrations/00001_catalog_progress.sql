-- +goose Up
-- How far this service has applied the accounts catalog. Catalog events carry
-- a gapless sequence but arrive on several partitions, so they can apply out
-- of order: applied numbers above the watermark wait here until the gap below
-- them fills.
CREATE TABLE catalog_progress (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    watermark bigint  NOT NULL
);
INSERT INTO catalog_progress (watermark) VALUES (0);

CREATE TABLE catalog_applied (
    seq bigint PRIMARY KEY
);

-- +goose Down
DROP TABLE catalog_applied, catalog_progress;
