-- +goose Up
-- Analytics' replica of the accounts catalog: what the dashboard routes
-- read (a program's creation and payment setup for status and the "all"
-- period, who may see it, its partner-program records). Rows are full
-- snapshots from catalog events; catalog_seq keeps an older event from
-- overwriting a newer one.

CREATE TABLE programs (
    id                    bigint PRIMARY KEY,
    created_at            timestamptz,
    payment_tracking_mode text        NOT NULL,
    processor_status      text        NOT NULL,
    processor_account_id  text        NOT NULL,
    charges_enabled       boolean     NOT NULL,
    payouts_enabled       boolean     NOT NULL,
    details_submitted     boolean     NOT NULL,
    connected_at          timestamptz,
    catalog_seq           bigint      NOT NULL
);

-- A user's workspace membership of a program (performance needs an active
-- one, status the tracking:read permission).
CREATE TABLE memberships (
    program_id  bigint  NOT NULL,
    user_id     bigint  NOT NULL,
    active      boolean NOT NULL,
    permissions text[]  NOT NULL,
    catalog_seq bigint  NOT NULL,
    PRIMARY KEY (program_id, user_id)
);

-- Partner-program records: "partners" of a day are those created that
-- day; status's hasPartners wants an approved one. Counted from here at
-- read time (an index range per program), so an upsert never double counts.
CREATE TABLE partner_programs (
    id          bigint PRIMARY KEY,
    program_id  bigint      NOT NULL,
    partner_id  bigint      NOT NULL,
    approved    boolean     NOT NULL,
    created_at  timestamptz NOT NULL,
    catalog_seq bigint      NOT NULL
);
CREATE INDEX partner_programs_program_created_idx ON partner_programs (program_id, created_at);

-- +goose Down
DROP TABLE partner_programs, memberships, programs;
