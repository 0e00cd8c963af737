-- +goose Up
-- Attribution decisions for POST /internal/v1/attributions: the commissions
-- service asks tracking whether a payment is attributed to a partner, and
-- tracking answers from the customers it owns. The caller's transaction_id
-- is the idempotency key: the first decision is stored here, in the same
-- transaction as the customer transition it made (lead settled, conversion),
-- and every later call with the same id is answered from this row, so a
-- retry after a timeout transitions nothing twice. "Customer not found" is
-- never stored (the customer may be tracked later).
CREATE TABLE attributions (
    transaction_id      text PRIMARY KEY,
    program_id          bigint      NOT NULL,
    outcome             text        NOT NULL CHECK (outcome IN ('attributed', 'refused')),
    customer_id         bigint      NOT NULL,
    click_id            text        NOT NULL,
    -- The customer's first partner: who earns the commission.
    partner_id          bigint      NOT NULL,
    -- The customer's first link.
    link_id             bigint      NOT NULL,
    -- The customer's status after the decision.
    customer_status     text        NOT NULL,
    first_purchase_date timestamptz,
    refusal_code        text        NOT NULL DEFAULT '',
    refusal_message     text        NOT NULL DEFAULT '',
    source              text        NOT NULL,
    decided_at          timestamptz NOT NULL,
    CHECK ((outcome = 'refused') = (refusal_code <> ''))
);
CREATE INDEX attributions_customer_idx ON attributions (customer_id);

-- +goose Down
DROP TABLE attributions;
