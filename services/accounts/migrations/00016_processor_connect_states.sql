-- +goose Up
-- The states of the console's processor connections (POST
-- /api/v1/programs/{id}/processor/connect): only a SHA-256 of each state,
-- bound to the program and the person who asked, used at most once before
-- it expires. The callback looks one up by its hash (the primary key); the
-- expiry index serves the sweep of old rows on each issue.
CREATE TABLE processor_connect_states (
    state_hash bytea PRIMARY KEY,
    program_id bigint NOT NULL REFERENCES programs (id),
    user_id bigint NOT NULL REFERENCES users (id),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at timestamptz
);
CREATE INDEX processor_connect_states_expiry ON processor_connect_states (expires_at);

-- +goose Down
DROP TABLE processor_connect_states;
