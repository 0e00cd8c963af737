-- +goose Up
-- Processor disputes (chargebacks) of sales (ledger.OpenDispute,
-- CloseDispute). While a sale has an open dispute its commission is not
-- approved: the approval scheduler (DuePending) and its lag gauge
-- (OldestDueSince) skip it. A dispute closed lost reverses the commission
-- as a full refund with reason chargeback (its refund row keyed
-- 'dispute:<dispute_id>'); closed won releases the hold. The processor's
-- dispute id is the once-only key: a redelivered open is a no-op, and a
-- dispute is closed once (closed_at set with its outcome).
CREATE TABLE disputes (
    dispute_id text PRIMARY KEY,
    sale_id    bigint      NOT NULL REFERENCES sales (id),
    status     text        NOT NULL CHECK (status IN ('open', 'won', 'lost')),
    opened_at  timestamptz NOT NULL,
    closed_at  timestamptz,
    CHECK ((status = 'open') = (closed_at IS NULL))
);

-- The scheduler's check: does this sale have an open dispute?
CREATE INDEX disputes_open ON disputes (sale_id) WHERE status = 'open';

-- The processor's refunds (refund.created / refund.updated, succeeded) of a
-- sale, each with its own amount, once (ledger.ProcessorRefund): what they
-- add up to is a lower bound of the charge's cumulative refunded amount,
-- like charge.refunded's amount_refunded (ledger.RefundTo). The ledger
-- applies only what raises the larger of the two above the sale's
-- refunded_cents, so a refund counted by a cumulative is not applied again
-- when its own event comes later, in whichever order they arrive.
CREATE TABLE processor_refunds (
    sale_id      bigint      NOT NULL REFERENCES sales (id),
    refund_id    text        NOT NULL,
    amount_cents bigint      NOT NULL CHECK (amount_cents > 0),
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (sale_id, refund_id)
);

-- +goose Down
SELECT 'forward-only';
