-- +goose Up
-- Each UTC day's row keeps the day's dollars too, every currency's money
-- converted at the rate of that day (fx_daily), so the performance
-- route's UTC days are one row per day of one table: summing and
-- converting the per-currency rows at read time was most of a two-year
-- answer (4-6 ms of joining to rates, then 2 ms of numeric sums). The
-- ledger consumer adds an amount's dollars in the same statement as its
-- minor units; `analytics fx import` (and a rebuild's switch) recompute
-- the days whose dollars the rates now make different, holding the
-- consumers off (the figures' advisory lock). numeric products and sums
-- are exact, so a day's dollars always equal the sum over its currencies
-- of minor units × the day's rate.
ALTER TABLE activity_days
    ADD COLUMN revenue_usd    numeric NOT NULL DEFAULT 0,
    ADD COLUMN commission_usd numeric NOT NULL DEFAULT 0,
    -- Some of the day's money used an earlier day's rate.
    ADD COLUMN fx_estimated   boolean NOT NULL DEFAULT false;

INSERT INTO activity_days (program_id, day, revenue_usd, commission_usd, fx_estimated)
SELECT m.program_id, m.day, sum(m.revenue_minor * f.usd_per_minor), sum(m.commission_minor * f.usd_per_minor), bool_or(f.estimated)
FROM money_days m
JOIN fx_daily f ON f.currency = m.currency AND f.day = LEAST(GREATEST(m.day, DATE '2000-01-01'), DATE '2100-12-31')
GROUP BY 1, 2
ON CONFLICT (program_id, day) DO UPDATE SET revenue_usd = EXCLUDED.revenue_usd, commission_usd = EXCLUDED.commission_usd,
    fx_estimated = EXCLUDED.fx_estimated;

-- +goose Down
SELECT 'forward-only';
