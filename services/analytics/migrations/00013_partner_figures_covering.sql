-- +goose Up
-- The partners list's figures (issue 21's benchmark, make bench-console)
-- sum 30 days of a page of partners: 1,500 rows of each table. The rows of
-- one partner lie on as many heap pages as days (the rollups are written
-- day by day across partners), so the sums visited about 1,650 pages; with
-- the summed columns in the index they are index-only scans of about 160
-- (2.0 ms to 0.95 ms on 10,000 partners).
CREATE INDEX partner_buckets_partner_figures ON partner_buckets (program_id, partner_id, bucket)
    INCLUDE (clicks, leads, conversions);
CREATE INDEX partner_money_partner_figures ON partner_money (program_id, partner_id, bucket)
    INCLUDE (currency, revenue_minor, commission_minor);
DROP INDEX partner_buckets_partner;
DROP INDEX partner_money_partner;

-- +goose Down
CREATE INDEX partner_buckets_partner ON partner_buckets (program_id, partner_id, bucket);
CREATE INDEX partner_money_partner ON partner_money (program_id, partner_id, bucket);
DROP INDEX partner_money_partner_figures;
DROP INDEX partner_buckets_partner_figures;
