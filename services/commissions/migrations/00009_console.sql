-- +goose Up
-- The brand console's commissions and payouts routes (issue 21), behind the
-- dashboard session as analytics' routes are.
--
-- The session check's replica (from the catalog topic, as analytics keeps
-- it): memberships with their permissions, users' suspensions, sessions
-- signed out before their expiry; and the partner-program records, so a
-- partner id is known to be in the program before its payouts are read or
-- opened. A deployment that consumed the catalog before this migration
-- fills them by replaying the topic (README: "Console routes").
CREATE TABLE memberships (
    program_id  bigint  NOT NULL,
    user_id     bigint  NOT NULL,
    active      boolean NOT NULL,
    permissions text[]  NOT NULL,
    catalog_seq bigint  NOT NULL,
    PRIMARY KEY (program_id, user_id)
);

CREATE TABLE users (
    id          bigint  PRIMARY KEY,
    blocked     boolean NOT NULL,
    catalog_seq bigint  NOT NULL
);

CREATE TABLE session_revocations (
    session_id  text        PRIMARY KEY,
    user_id     bigint      NOT NULL,
    expires_at  timestamptz NOT NULL,
    catalog_seq bigint      NOT NULL
);
CREATE INDEX session_revocations_expires_idx ON session_revocations (expires_at);

CREATE TABLE partner_programs (
    id          bigint  PRIMARY KEY,
    program_id  bigint  NOT NULL,
    partner_id  bigint  NOT NULL,
    approved    boolean NOT NULL,
    catalog_seq bigint  NOT NULL
);
CREATE UNIQUE INDEX partner_programs_program_partner ON partner_programs (program_id, partner_id);

-- A payout opened from the console belongs to its program (NULL: opened by
-- the admin API for the partner as a whole); pay may record the external
-- reference of the transfer.
ALTER TABLE withdrawals ADD COLUMN program_id bigint;
ALTER TABLE withdrawals ADD COLUMN reference text NOT NULL DEFAULT '';
CREATE INDEX withdrawals_program ON withdrawals (program_id, id) WHERE program_id IS NOT NULL;
-- A program's money per partner (the payouts list and a payout's cap).
CREATE INDEX withdrawals_program_partner ON withdrawals (program_id, partner_id, currency) WHERE program_id IS NOT NULL;

-- The commissions list: newest first by (created_at, id) within a program,
-- with or without a status or partner filter; scanned backwards, the keyset
-- condition (created_at, id) < (…) is an index condition and LIMIT stops
-- the scan after a page.
CREATE INDEX commissions_program_created ON commissions (program_id, created_at, id);
CREATE INDEX commissions_program_partner_created ON commissions (program_id, partner_id, created_at, id);
-- The program's credited money per partner and currency.
CREATE INDEX commissions_program_credited ON commissions (program_id, partner_id, currency) INCLUDE (amount, refunded_amount) WHERE credited;

-- +goose Down
SELECT 'forward-only';
