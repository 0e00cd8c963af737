-- +goose Up
-- The foreign key from click events to customers made every inserted click
-- run a per-row check that locks the customer row (FOR KEY SHARE), turning
-- concurrent click groups into multixact traffic on the click path. The
-- writer creates or finds the customer in the same transaction and
-- customers are never deleted, so the check adds nothing but cost.
ALTER TABLE affiliate_click_events DROP CONSTRAINT affiliate_click_events_customer_id_fkey;

-- +goose Down
ALTER TABLE affiliate_click_events ADD CONSTRAINT affiliate_click_events_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES customers (id);
