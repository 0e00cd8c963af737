-- +goose Up
-- Where a program's traffic and money come from (the sources route) and
-- which partners bring it (the dashboard's top partners), in the same
-- 15-minute UTC buckets as activity_buckets.

-- Partners' display names, from the catalog (catalog.partner.upserted).
CREATE TABLE partners (
    id          bigint PRIMARY KEY,
    name        text   NOT NULL,
    catalog_seq bigint NOT NULL
);

-- A click's source dimensions, interned once per program: a bucket row
-- then names one id instead of seven strings. Values are bounded and
-- cleaned by the consumer (sources.FromClick).
CREATE TABLE sources (
    id           bigserial PRIMARY KEY,
    program_id   bigint NOT NULL,
    referrer     text   NOT NULL,
    utm_source   text   NOT NULL,
    utm_medium   text   NOT NULL,
    utm_campaign text   NOT NULL,
    landing_page text   NOT NULL,
    country      text   NOT NULL,
    device       text   NOT NULL,
    UNIQUE (program_id, referrer, utm_source, utm_medium, utm_campaign, landing_page, country, device)
);

-- The source of the click that created each customer: its leads,
-- conversions and sales are credited there.
CREATE TABLE customer_sources (
    customer_id bigint PRIMARY KEY,
    source_id   bigint NOT NULL
);

CREATE TABLE source_buckets (
    program_id  bigint      NOT NULL,
    bucket      timestamptz NOT NULL,
    source_id   bigint      NOT NULL,
    clicks      bigint      NOT NULL DEFAULT 0,
    leads       bigint      NOT NULL DEFAULT 0,
    conversions bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (program_id, bucket, source_id)
);

CREATE TABLE source_money (
    program_id    bigint      NOT NULL,
    bucket        timestamptz NOT NULL,
    source_id     bigint      NOT NULL,
    currency      text        NOT NULL,
    revenue_minor bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (program_id, bucket, source_id, currency)
);

-- Per partner: clicks by the click's partner, leads and conversions by
-- the partner the lead or conversion was attributed to, revenue by the
-- sale's partner and commission by the commission's partner.
CREATE TABLE partner_buckets (
    program_id  bigint      NOT NULL,
    bucket      timestamptz NOT NULL,
    partner_id  bigint      NOT NULL,
    clicks      bigint      NOT NULL DEFAULT 0,
    leads       bigint      NOT NULL DEFAULT 0,
    conversions bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (program_id, bucket, partner_id)
);

CREATE TABLE partner_money (
    program_id       bigint      NOT NULL,
    bucket           timestamptz NOT NULL,
    partner_id       bigint      NOT NULL,
    currency         text        NOT NULL,
    revenue_minor    bigint      NOT NULL DEFAULT 0,
    commission_minor bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (program_id, bucket, partner_id, currency)
);

-- Dollars of an amount in minor units of cur, at the rate of day (the
-- nearest earlier rate; a day before the first rate uses the first). One
-- definition for every figure that reports money.
-- +goose StatementBegin
CREATE FUNCTION usd(minor numeric, cur text, day date) RETURNS numeric LANGUAGE sql STABLE AS $$
    SELECT minor / 10 ^ c.exponent * (
        SELECT f.usd_per_unit FROM fx_rates f WHERE f.currency = cur
        ORDER BY (f.valid_from <= day) DESC, CASE WHEN f.valid_from <= day THEN f.valid_from END DESC NULLS LAST, f.valid_from
        LIMIT 1)
    FROM currencies c WHERE c.code = cur
$$;
-- +goose StatementEnd

-- +goose Down
SELECT 'forward-only';
