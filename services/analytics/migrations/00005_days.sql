-- +goose Up
-- Daily rollups of the 15-minute buckets, by UTC calendar day: the spec's
-- performance route (UTC days) reads one row per day instead of 96, so a
-- two-year `all` is 730 rows, not 70,000. The consumers add to both in
-- the same transaction; another time zone's days still read the buckets.

CREATE TABLE activity_days (
    program_id  bigint NOT NULL,
    day         date   NOT NULL,
    clicks      bigint NOT NULL DEFAULT 0,
    leads       bigint NOT NULL DEFAULT 0,
    conversions bigint NOT NULL DEFAULT 0,
    sales       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (program_id, day)
);

CREATE TABLE money_days (
    program_id       bigint NOT NULL,
    day              date   NOT NULL,
    currency         text   NOT NULL,
    revenue_minor    bigint NOT NULL DEFAULT 0,
    commission_minor bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (program_id, day, currency)
);

-- What was counted before this migration.
INSERT INTO activity_days (program_id, day, clicks, leads, conversions, sales)
SELECT program_id, (bucket AT TIME ZONE 'UTC')::date, sum(clicks), sum(leads), sum(conversions), sum(sales)
FROM activity_buckets GROUP BY 1, 2;

INSERT INTO money_days (program_id, day, currency, revenue_minor, commission_minor)
SELECT program_id, (bucket AT TIME ZONE 'UTC')::date, currency, sum(revenue_minor), sum(commission_minor)
FROM money_buckets GROUP BY 1, 2, 3;

-- Dollars per minor unit of cur on day, and whether that rate is an
-- estimate: the nearest earlier rate stands in for a day without its own
-- (a day before the first rate uses the first; USD is exact). A table
-- function whose body Postgres inlines into the calling query, so each
-- (day, currency) row is two index probes of fx_rates; the scalar usd() of
-- 00004 was planned per call (60 µs each, 263 ms for a two-year answer).
-- +goose StatementBegin
CREATE FUNCTION fx_rate_on(cur text, day date) RETURNS TABLE (usd_per_minor numeric, estimated boolean) LANGUAGE sql STABLE AS $$
    SELECT r.usd_per_unit / 10 ^ c.exponent, cur <> 'USD' AND r.valid_from IS DISTINCT FROM day
    FROM currencies c
    CROSS JOIN LATERAL (
        SELECT * FROM (SELECT f.usd_per_unit, f.valid_from FROM fx_rates f WHERE f.currency = cur AND f.valid_from <= day ORDER BY f.valid_from DESC LIMIT 1) earlier
        UNION ALL
        SELECT * FROM (SELECT f.usd_per_unit, f.valid_from FROM fx_rates f WHERE f.currency = cur ORDER BY f.valid_from LIMIT 1) first
        LIMIT 1) r
    WHERE c.code = cur
$$;
-- +goose StatementEnd
DROP FUNCTION usd(numeric, text, date);

-- +goose Down
SELECT 'forward-only';
