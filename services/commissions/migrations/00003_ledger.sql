-- +goose Up
-- The money ledger (internal/ledger): sales, their commissions, refunds, the
-- partners' balances with their append-only journal, withdrawals and
-- notifications. Every amount is bigint minor units beside its currency.
-- Every effect that must happen once has a unique key here; the store relies
-- on them under concurrency.

CREATE TABLE sales (
    id               bigserial PRIMARY KEY,
    -- The brand's or processor's id: unique across programs among live
    -- sales, and separately among test sales (a test sale never consumes
    -- a live id).
    transaction_id   text        NOT NULL,
    program_id       bigint      NOT NULL,
    -- Tracking's customer id and the partner it attributes the sale to
    -- (0: none known).
    customer_id      bigint      NOT NULL,
    partner_id       bigint      NOT NULL,
    amount_cents     bigint      NOT NULL CHECK (amount_cents > 0),
    currency         text        NOT NULL CHECK (currency IN ('USD', 'EUR', 'VND')),
    refunded_cents   bigint      NOT NULL DEFAULT 0 CHECK (refunded_cents >= 0 AND refunded_cents <= amount_cents),
    is_test          boolean     NOT NULL,
    source           text        NOT NULL CHECK (source IN ('api', 'processor')),
    -- NULL until the sale's commission was decided; then 'created' or the
    -- reason none is due (money.Reason, or 'no_partner'). The backstop
    -- (EnsureCommission) scans the NULLs.
    commission_state text,
    -- A reserved sale holds its transaction id while tracking decides its
    -- attribution: no event yet, invisible to refunds and reads. It is
    -- completed (the event written) or deleted once the decision is known;
    -- attribution_ref is what the backstop asks tracking again with when
    -- the process that reserved it died.
    reserved         boolean     NOT NULL DEFAULT false,
    attribution_ref  jsonb,
    occurred_at      timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    UNIQUE (is_test, transaction_id)
);

CREATE INDEX sales_reserved ON sales (created_at) WHERE reserved;

CREATE INDEX sales_undecided ON sales (created_at) WHERE commission_state IS NULL AND NOT reserved;
CREATE INDEX sales_customer ON sales (program_id, customer_id);

CREATE TABLE commissions (
    id              bigserial PRIMARY KEY,
    sale_id         bigint REFERENCES sales (id),
    program_id      bigint      NOT NULL,
    partner_id      bigint      NOT NULL,
    customer_id     bigint      NOT NULL,
    kind            text        NOT NULL CHECK (kind IN ('sale', 'lead')),
    status          text        NOT NULL CHECK (status IN ('pending', 'approved', 'refunded', 'reversed')),
    -- The commission as created, never changed; refunds add to
    -- refunded_amount (the sum of their deductions).
    amount          bigint      NOT NULL CHECK (amount > 0),
    currency        text        NOT NULL CHECK (currency IN ('USD', 'EUR', 'VND')),
    refunded_amount bigint      NOT NULL DEFAULT 0 CHECK (refunded_amount >= 0 AND refunded_amount <= amount),
    -- Its amount was added to the partner's balance (approved, not a test).
    credited        boolean     NOT NULL DEFAULT false,
    reason          text        NOT NULL DEFAULT '',
    hold_until      timestamptz NOT NULL,
    approved_at     timestamptz,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CHECK ((kind = 'sale') = (sale_id IS NOT NULL))
);

-- Exactly once: a sale has at most one commission, a customer at most one
-- lead commission per program.
CREATE UNIQUE INDEX commissions_one_per_sale ON commissions (sale_id) WHERE kind = 'sale';
CREATE UNIQUE INDEX commissions_one_lead ON commissions (program_id, customer_id) WHERE kind = 'lead';
CREATE INDEX commissions_due ON commissions (hold_until) WHERE status = 'pending';
CREATE INDEX commissions_partner ON commissions (partner_id, currency, id);
CREATE INDEX commissions_customer ON commissions (program_id, customer_id) WHERE kind = 'sale';

CREATE TABLE refunds (
    id              bigserial PRIMARY KEY,
    sale_id         bigint      NOT NULL REFERENCES sales (id),
    commission_id   bigint REFERENCES commissions (id),
    -- The brand's refund id; NULL when not sent, or when the call refunded
    -- all that was left (the spec ignores refund_id then).
    refund_id       text,
    -- What the call asked for (refund_amount_cents; 0: all that was left)
    -- and what it refunded after the cap.
    requested_cents bigint      NOT NULL CHECK (requested_cents >= 0),
    amount_cents    bigint      NOT NULL CHECK (amount_cents >= 0),
    -- The commission share it covered (deductionAmount), in the
    -- commission's currency; debited: taken from the balance.
    deduction       bigint      NOT NULL DEFAULT 0 CHECK (deduction >= 0),
    debited         bigint      NOT NULL DEFAULT 0 CHECK (debited >= 0),
    currency        text,
    reason          text        NOT NULL DEFAULT '',
    -- The notifications the refund sends (a JSON array), written with it
    -- and sent after its transaction (the spec: they never change the
    -- answer); NULL once sent. The backstop sends what a failure left.
    pending_notifications jsonb,
    created_at      timestamptz NOT NULL
);

CREATE INDEX refunds_to_notify ON refunds (created_at) WHERE pending_notifications IS NOT NULL;

-- A refund id is applied once per sale; without one, a second call with the
-- same (positive) amount for the same sale is a retry.
CREATE UNIQUE INDEX refunds_refund_id ON refunds (sale_id, refund_id) WHERE refund_id IS NOT NULL;
CREATE UNIQUE INDEX refunds_same_amount ON refunds (sale_id, requested_cents) WHERE refund_id IS NULL AND requested_cents > 0;

CREATE TABLE balances (
    partner_id bigint      NOT NULL,
    currency   text        NOT NULL CHECK (currency IN ('USD', 'EUR', 'VND')),
    -- May go negative (a refund of a paid-out commission).
    balance    bigint      NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (partner_id, currency)
);

-- Append-only: balances.balance is the sum of its entries, updated in the
-- same transaction as each entry.
CREATE TABLE balance_entries (
    id            bigserial PRIMARY KEY,
    partner_id    bigint      NOT NULL,
    currency      text        NOT NULL,
    delta         bigint      NOT NULL,
    kind          text        NOT NULL CHECK (kind IN ('credit', 'deduction', 'withdrawal')),
    commission_id bigint REFERENCES commissions (id),
    refund_id     bigint REFERENCES refunds (id),
    withdrawal_id bigint,
    balance_after bigint      NOT NULL,
    created_at    timestamptz NOT NULL
);

CREATE INDEX balance_entries_partner ON balance_entries (partner_id, currency, id);
-- A commission is credited once.
CREATE UNIQUE INDEX balance_entries_one_credit ON balance_entries (commission_id) WHERE kind = 'credit';

CREATE TABLE withdrawals (
    id               bigserial PRIMARY KEY,
    partner_id       bigint      NOT NULL,
    currency         text        NOT NULL CHECK (currency IN ('USD', 'EUR', 'VND')),
    -- What is withdrawn: requested_amount, reduced while open when a
    -- deduction leaves the balance short (FitWithdrawals).
    amount           bigint      NOT NULL CHECK (amount >= 0),
    requested_amount bigint      NOT NULL CHECK (requested_amount > 0),
    status           text        NOT NULL CHECK (status IN ('open', 'paid', 'cancelled')),
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);

CREATE INDEX withdrawals_partner ON withdrawals (partner_id, currency, id);

CREATE TABLE notifications (
    id             bigserial PRIMARY KEY,
    recipient_kind text        NOT NULL CHECK (recipient_kind IN ('partner', 'advertiser')),
    recipient_id   bigint      NOT NULL,
    kind           text        NOT NULL,
    payload        jsonb       NOT NULL,
    created_at     timestamptz NOT NULL
);

CREATE INDEX notifications_recipient ON notifications (recipient_kind, recipient_id, id);

-- +goose Down
SELECT 'forward-only';
