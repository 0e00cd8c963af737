-- +goose Up
-- No statement reads attribution decisions by customer (the plan test,
-- deploy/devstack/plans, records every statement tracking runs): the index
-- only cost every attributed sale an index entry.
DROP INDEX IF EXISTS attributions_customer_idx;

-- +goose Down
CREATE INDEX attributions_customer_idx ON attributions (customer_id);
