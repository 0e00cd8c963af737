-- +goose Up
-- The dashboard's pre-aggregated figures, per program and 15-minute UTC
-- bucket (bucket = the bucket's first instant): every real time-zone
-- offset is a whole number of quarter hours, so a day in any zone is a
-- whole number of buckets and a later timezone parameter needs no new
-- data. Counters are only ever incremented, in the inbox transaction of
-- the event that caused them.

CREATE TABLE activity_buckets (
    program_id  bigint      NOT NULL,
    bucket      timestamptz NOT NULL,
    -- Real (non-test) click events.
    clicks      bigint      NOT NULL DEFAULT 0,
    -- Customers whose signup_date falls in the bucket (status lead or later).
    leads       bigint      NOT NULL DEFAULT 0,
    -- Customers whose first_purchase_date falls in the bucket.
    conversions bigint      NOT NULL DEFAULT 0,
    -- Paid (non-test) sales recorded by the ledger, by occurred_at.
    sales       bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (program_id, bucket)
);

-- Money per currency in integer minor units; dollars only at read time.
CREATE TABLE money_buckets (
    program_id       bigint      NOT NULL,
    bucket           timestamptz NOT NULL,
    currency         text        NOT NULL,
    revenue_minor    bigint      NOT NULL DEFAULT 0,
    commission_minor bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (program_id, bucket, currency)
);

-- One row per customer that reached lead: where it was counted, so a
-- transition counts once and a customer is never counted twice.
CREATE TABLE customers (
    customer_id           bigint PRIMARY KEY,
    program_id            bigint      NOT NULL,
    status                text        NOT NULL CHECK (status IN ('lead', 'conversion')),
    signup_bucket         timestamptz,
    first_purchase_bucket timestamptz
);

-- What has been counted, by the producer's own id (click event, sale,
-- commission): a second copy of an event under another envelope id (a
-- replay from the beginning of a topic, a re-published outbox row) is
-- still counted once. The inbox already drops a redelivered envelope.
CREATE TABLE counted (
    kind text   NOT NULL,
    id   bigint NOT NULL,
    PRIMARY KEY (kind, id)
);

-- The latest test click and lead events per program (status lists up to
-- 10 per step); older ones are trimmed as new ones arrive.
CREATE TABLE test_events (
    program_id bigint      NOT NULL,
    kind       text        NOT NULL CHECK (kind IN ('click', 'lead')),
    event_id   bigint      NOT NULL,
    occurred_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (kind, event_id)
);
CREATE INDEX test_events_latest_idx ON test_events (program_id, kind, occurred_at DESC, event_id DESC);

-- Minor-unit exponents of the sale currencies (ISO 4217; the same values
-- golang.org/x/text/currency reports).
CREATE TABLE currencies (
    code     text PRIMARY KEY,
    exponent integer NOT NULL
);
INSERT INTO currencies (code, exponent) VALUES ('USD', 2), ('EUR', 2), ('VND', 0);

-- US dollars per major unit of a currency from valid_from on; a day uses
-- the rate of the nearest earlier (or same) valid_from, and a day before
-- the first row the first row's rate. Hand-entered reference values, a
-- placeholder until a rate feed is wired: EUR from the ECB's euro
-- foreign exchange reference rates (USD per EUR, first business day of
-- the period); VND from the State Bank of Vietnam's central rate (VND per
-- USD, inverted; the ECB does not publish VND). Values are rounded and
-- should be re-checked against the sources before figures are relied on.
CREATE TABLE fx_rates (
    currency     text    NOT NULL REFERENCES currencies (code),
    valid_from   date    NOT NULL,
    usd_per_unit numeric NOT NULL CHECK (usd_per_unit > 0),
    PRIMARY KEY (currency, valid_from)
);
INSERT INTO fx_rates (currency, valid_from, usd_per_unit) VALUES
    ('USD', '2000-01-01', 1),
    ('EUR', '2024-01-02', 1.0956),
    ('EUR', '2025-01-02', 1.0321),
    ('EUR', '2025-07-01', 1.1787),
    ('EUR', '2026-01-02', 1.1700),
    ('VND', '2024-01-02', 1.0 / 24000),
    ('VND', '2025-01-02', 1.0 / 24300),
    ('VND', '2025-07-01', 1.0 / 24950),
    ('VND', '2026-01-02', 1.0 / 25100);

-- +goose Down
SELECT 'forward-only';
