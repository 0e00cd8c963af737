-- +goose Up
-- The payment processor's webhook (internal/processor).
--
-- The catalog replica keeps each program's processor connection and payment
-- tracking mode (catalog Program fields 12 and 13), so an event's connected
-- account selects its program here. Rows written before this migration get
-- the empty account (no event selects them) until the next catalog event;
-- accounts republishes every program on its snapshot.
ALTER TABLE programs
    ADD COLUMN payment_tracking_mode text NOT NULL DEFAULT 'processor_connect',
    ADD COLUMN processor_status      text NOT NULL DEFAULT '',
    ADD COLUMN processor_account_id  text NOT NULL DEFAULT '';

CREATE INDEX programs_processor_account ON programs (processor_account_id) WHERE processor_account_id <> '';

-- Every verified processor event, once: the processor redelivers until it
-- gets a 2xx, so the event id is the idempotency key. The raw payload is
-- kept (events nothing acts on yet stay available to replay) and outcome
-- says what was done. A row is written only once the event's effects are
-- done: a delivery that failed leaves none, and its redelivery does the work.
CREATE TABLE processor_events (
    event_id    text PRIMARY KEY,
    type        text        NOT NULL,
    account_id  text        NOT NULL DEFAULT '',
    program_id  bigint,
    livemode    boolean     NOT NULL,
    outcome     text        NOT NULL,
    -- The sale it recorded or found (no foreign key: a duplicate may name
    -- a sale still reserved, which a release deletes).
    sale_id     bigint,
    payload     jsonb       NOT NULL,
    received_at timestamptz NOT NULL
);

CREATE INDEX processor_events_type ON processor_events (type, received_at);

-- The processor's references of a payment (payment intent, charge,
-- invoice, checkout session) → the sale it recorded, so refunds and
-- disputes, which name a charge or a payment intent, find their sale.
CREATE TABLE payment_refs (
    ref        text PRIMARY KEY,
    kind       text        NOT NULL CHECK (kind IN ('payment_intent', 'charge', 'invoice', 'checkout_session')),
    sale_id    bigint      NOT NULL REFERENCES sales (id),
    program_id bigint      NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE INDEX payment_refs_sale ON payment_refs (sale_id);

-- +goose Down
SELECT 'forward-only';
