-- +goose Up
-- The contract step of 00005 (issue 23). Tracking wrote `sales` and
-- `processor_events` only while it served POST /api/v1/track/sale and the
-- processor webhook: from 4412b9b (2026-11-21) to 842c744 (the sale route
-- moved to commissions, 2026-11-23 20:37 UTC) and d1ac59e (the webhook
-- moved, 22:07 UTC). Nothing has written them since, and commissions never
-- received those rows (no consumer of tracking.sale.recorded ever existed),
-- so a row here is a sale commissions lacks. A database created since holds
-- none and loses nothing; one that holds rows stops here, with the counts,
-- instead of dropping money: services/tracking/README.md, "Sales recorded
-- before commissions", says how to move them.
-- +goose StatementBegin
DO $$
DECLARE
    s bigint;
    p bigint;
BEGIN
    SELECT count(*) INTO s FROM sales;
    SELECT count(*) INTO p FROM processor_events;
    IF s > 0 OR p > 0 THEN
        RAISE EXCEPTION 'tracking.sales holds % rows and tracking.processor_events % rows that commissions lacks: move them first (services/tracking/README.md, "Sales recorded before commissions")', s, p;
    END IF;
END
$$;
-- +goose StatementEnd
DROP TABLE processor_events, sales;

-- +goose Down
-- The tables as 00005 made them, empty.
CREATE TABLE sales (
    id                    bigserial PRIMARY KEY,
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
CREATE TABLE processor_events (
    event_id     text PRIMARY KEY,
    type         text        NOT NULL,
    account_id   text        NOT NULL DEFAULT '',
    program_id   bigint,
    outcome      text        NOT NULL,
    payload      jsonb       NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now()
);
