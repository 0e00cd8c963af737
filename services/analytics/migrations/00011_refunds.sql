-- +goose Up
-- Refunds the ledger applied (commissions.refund.recorded) beside the
-- sales they reduce, so Overview shows why a partner's balance is lower
-- than the commission tile: a count and the refunded money, by the day
-- the refund happened, in the same rows the route already reads (no new
-- statement, no new index). Only refunds of sales the figures count (not
-- test sales) are counted.
ALTER TABLE activity_buckets ADD COLUMN refunds bigint NOT NULL DEFAULT 0;
ALTER TABLE money_buckets ADD COLUMN refunded_minor bigint NOT NULL DEFAULT 0;
ALTER TABLE money_days ADD COLUMN refunded_minor bigint NOT NULL DEFAULT 0;
ALTER TABLE activity_days
    ADD COLUMN refunds      bigint  NOT NULL DEFAULT 0,
    ADD COLUMN refunded_usd numeric NOT NULL DEFAULT 0;

-- +goose Down
SELECT 'forward-only';
