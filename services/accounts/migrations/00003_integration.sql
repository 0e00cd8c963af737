-- +goose Up
-- Command-line integration checks (GET/POST /api/v1/cli/status|test-event).

-- Test events of tracking that count toward a program's integration state,
-- kept from topic tracking.events.v1: every test click, and test leads sent
-- with the program API key. Accounts never reads tracking's schema. Tracking
-- numbers clicks and leads in separate tables, hence the key on both.
CREATE TABLE integration_test_events (
    kind         text        NOT NULL CHECK (kind IN ('click', 'lead')),
    event_id     bigint      NOT NULL,
    program_id   bigint      NOT NULL,
    occurred_at  timestamptz NOT NULL, -- the click or lead time
    published_at timestamptz NOT NULL, -- when tracking committed it
    received_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, event_id)
);
CREATE INDEX integration_test_events_latest_idx
    ON integration_test_events (program_id, kind, occurred_at DESC, event_id DESC);

-- One row per program that ever ran a synthetic chain: locked (FOR UPDATE)
-- while the hourly cap is checked and a run recorded, so concurrent chains
-- of one program cannot both take the last slot.
CREATE TABLE integration_chain_quota (
    program_id bigint PRIMARY KEY REFERENCES programs (id)
);

-- One row per synthetic chain run that passed the cap.
CREATE TABLE integration_chain_runs (
    id         bigserial PRIMARY KEY,
    program_id bigint      NOT NULL REFERENCES programs (id),
    started_at timestamptz NOT NULL,
    request_id text        NOT NULL DEFAULT ''
);
CREATE INDEX integration_chain_runs_window_idx ON integration_chain_runs (program_id, started_at DESC);

-- +goose Down
DROP TABLE integration_chain_runs, integration_chain_quota, integration_test_events;
