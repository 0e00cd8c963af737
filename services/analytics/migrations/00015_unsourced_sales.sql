-- +goose Up
-- The ledger's sales and tracking's clicks arrive on two topics, in either
-- order. A sale applied before the click that made its customer is booked
-- under the empty source, and remembered here; the click, when it comes,
-- moves it under its own source (and deletes the row). A customer no click
-- ever names (a lead without one) keeps its money where it was booked.
CREATE TABLE unsourced_sales (
    customer_id   bigint      NOT NULL,
    program_id    bigint      NOT NULL,
    bucket        timestamptz NOT NULL,
    currency      text        NOT NULL,
    -- The source the money was booked under (the program's empty source).
    source_id     bigint      NOT NULL,
    revenue_minor bigint      NOT NULL,
    PRIMARY KEY (customer_id, bucket, currency)
);

-- A sale that finds no source for its customer claims the customer's row
-- with the empty source, provisional. The click's insert then conflicts
-- with it on the key: whichever commits second sees the other's row (a
-- concurrent sale and click can no longer each miss the other's
-- uncommitted write), and the click replaces a provisional source as it
-- would replace a reused customer's.
ALTER TABLE customer_sources ADD COLUMN provisional boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE customer_sources DROP COLUMN provisional;
DROP TABLE unsourced_sales;
