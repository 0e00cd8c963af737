-- +goose Up
-- The customer's click id (tracking's customer identifier, the one the
-- brand and support staff know) on every sale and commission, from the
-- attribution decision (sales and their commissions) or the lead event
-- (lead commissions). '' only on rows written before this migration until
-- `commissions backfill customer-click-ids` fills them from tracking's
-- export (services/commissions/README.md). A constant default: no rewrite
-- of either table.
ALTER TABLE sales ADD COLUMN customer_click_id text NOT NULL DEFAULT '';
ALTER TABLE commissions ADD COLUMN customer_click_id text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE commissions DROP COLUMN customer_click_id;
ALTER TABLE sales DROP COLUMN customer_click_id;
