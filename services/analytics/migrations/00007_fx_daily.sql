-- +goose Up
-- Each currency's rate for every day from 2000 through 2100, from
-- fx_rate_on (the nearest earlier rate, flagged as an estimate): the
-- figures join their (currency, day) sums to it by equality instead of
-- looking a rate up per row (8 ms of a two-year answer). `analytics fx
-- import` refreshes the days its rates change, in its transaction; a day
-- outside the table falls back to fx_rate_on.
CREATE TABLE fx_daily (
    currency      text    NOT NULL,
    day           date    NOT NULL,
    usd_per_minor numeric NOT NULL,
    estimated     boolean NOT NULL,
    -- Day first: a span's days of every currency are one index range.
    PRIMARY KEY (day, currency)
);

INSERT INTO fx_daily (currency, day, usd_per_minor, estimated)
SELECT c.code, d::date, r.usd_per_minor, r.estimated
FROM currencies c
CROSS JOIN generate_series('2000-01-01'::date, '2100-12-31'::date, interval '1 day') d
CROSS JOIN LATERAL fx_rate_on(c.code, d::date) r;
ANALYZE fx_daily;

-- +goose Down
SELECT 'forward-only';
