-- +goose Up
-- Click counters (link_stats, partner_program_metrics) are hot rows: every
-- click of a link or partner would wait on the same row lock inside its own
-- transaction. Instead each click transaction appends its increments here
-- (plain inserts, no shared rows), and a folder moves them into the counters
-- a few times a second, deleting what it folded in the same statement, so
-- each increment counts exactly once.
CREATE TABLE click_count_deltas (
    id           bigserial PRIMARY KEY,
    link_id      bigint      NOT NULL,
    program_id   bigint      NOT NULL,
    partner_id   bigint      NOT NULL,
    clicks       bigint      NOT NULL,
    last_clicked timestamptz NOT NULL
);

-- +goose Down
DROP TABLE click_count_deltas;
