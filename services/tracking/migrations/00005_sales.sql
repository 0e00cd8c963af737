-- +goose Up
-- Sales: tracking resolves a payment to its customer and partner, moves the
-- customer to conversion, and publishes the sale for the commissions
-- service. The sale route and the payment processor's events both land here.

-- Which program a processor event belongs to: its connected account.
ALTER TABLE programs ADD COLUMN processor_account_id text NOT NULL DEFAULT '';
CREATE INDEX programs_processor_account_idx ON programs (processor_account_id) WHERE processor_account_id <> '';

CREATE TABLE sales (
    id                    bigserial PRIMARY KEY,
    -- The sale route's transaction_id (or the processor's payment id): one
    -- sale per id across all programs, which is what makes retries safe.
    processor_event_id    text        NOT NULL UNIQUE,
    program_id            bigint      NOT NULL,
    customer_id           bigint REFERENCES customers (id),
    partner_id            bigint,
    click_id              text,
    amount_cents          bigint      NOT NULL CHECK (amount_cents > 0),
    currency              text        NOT NULL CHECK (currency IN ('USD', 'EUR', 'VND')),
    occurred_at           timestamptz NOT NULL,
    provider              text        NOT NULL DEFAULT '',
    provider_payment_id   text        NOT NULL DEFAULT '',
    livemode              boolean,
    is_test               boolean     NOT NULL DEFAULT false,
    source                text        NOT NULL CHECK (source IN ('api', 'processor')),
    payment_kind          text        NOT NULL DEFAULT '',
    processor_customer_id text        NOT NULL DEFAULT '',
    api_key_id            bigint,
    created_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sales_customer_idx ON sales (customer_id);
CREATE INDEX sales_program_created_idx ON sales (program_id, created_at);

-- Renewals are matched by the processor customer id saved on the first
-- attributed payment, or by the buyer's email against the lead record.
CREATE INDEX customers_program_processor_idx ON customers (program_id, processor_customer_id) WHERE processor_customer_id IS NOT NULL;
CREATE INDEX customers_program_email_idx ON customers (program_id, email_hash) WHERE email_hash IS NOT NULL;

-- Every processor event received, once: the processor redelivers until it
-- gets a 2xx, so the event id is the idempotency key. The payload is kept
-- (events this service does not act on yet, such as refunds, stay
-- available to replay) and outcome says what was done.
CREATE TABLE processor_events (
    event_id     text PRIMARY KEY,
    type         text        NOT NULL,
    account_id   text        NOT NULL DEFAULT '',
    program_id   bigint,
    outcome      text        NOT NULL,
    payload      jsonb       NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE processor_events, sales;
DROP INDEX customers_program_processor_idx, customers_program_email_idx;
ALTER TABLE programs DROP COLUMN processor_account_id;
