-- +goose Up
-- The console's Install page shows the latest real click and lead beside
-- the test events the spec's checklist counts (issue 21), so a brand sees
-- its live traffic arrive. One row a program and kind, moved forward only
-- (a redelivered or late event never moves it back). Real events of a
-- database from before this migration show once the next one arrives.
CREATE TABLE latest_events (
    program_id  bigint      NOT NULL,
    kind        text        NOT NULL CHECK (kind IN ('click', 'lead')),
    event_id    bigint      NOT NULL,
    occurred_at timestamptz NOT NULL,
    PRIMARY KEY (program_id, kind)
);

-- +goose Down
DROP TABLE latest_events;
