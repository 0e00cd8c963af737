-- +goose Up
-- Tracking's own records: customers, click events, lead events, visits, and
-- the per-link and per-partner-program counters it keeps.

CREATE TABLE customers (
    id                    bigserial PRIMARY KEY,
    click_id              text        NOT NULL UNIQUE,
    program_id            bigint      NOT NULL,
    status                text        NOT NULL DEFAULT 'click' CHECK (status IN ('click', 'lead', 'conversion')),
    first_partner_id      bigint      NOT NULL,
    first_link_id         bigint      NOT NULL,
    customer_key          text,
    email_hash            text,
    processor_customer_id text,
    signup_date           timestamptz,
    first_purchase_date   timestamptz,
    -- Set when a sale is recorded for the customer (from commissions); a
    -- provisional lead can then no longer be settled by a Bearer lead.
    sale_recorded_at      timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX customers_program_key_idx ON customers (program_id, customer_key) WHERE customer_key IS NOT NULL;

CREATE TABLE affiliate_click_events (
    id                bigserial PRIMARY KEY,
    customer_id       bigint REFERENCES customers (id),
    click_id          text,
    program_id        bigint      NOT NULL,
    link_id           bigint      NOT NULL,
    partner_id        bigint      NOT NULL,
    code              text        NOT NULL,
    page_url          text        NOT NULL DEFAULT '',
    page_title        text        NOT NULL DEFAULT '',
    referrer_url      text        NOT NULL DEFAULT '',
    session_id        text        NOT NULL DEFAULT '',
    user_agent        text        NOT NULL DEFAULT '',
    screen_resolution text        NOT NULL DEFAULT '',
    viewport_size     text        NOT NULL DEFAULT '',
    language          text        NOT NULL DEFAULT '',
    timezone          text        NOT NULL DEFAULT '',
    ip                inet,
    country           text        NOT NULL DEFAULT '',
    region            text        NOT NULL DEFAULT '',
    city              text        NOT NULL DEFAULT '',
    device_type       text        NOT NULL DEFAULT '',
    os                text        NOT NULL DEFAULT '',
    browser           text        NOT NULL DEFAULT '',
    is_test           boolean     NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX click_events_customer_idx ON affiliate_click_events (customer_id);
CREATE INDEX click_events_program_test_idx ON affiliate_click_events (program_id, created_at) WHERE is_test;

CREATE TABLE lead_events (
    id           bigserial PRIMARY KEY,
    customer_id  bigint REFERENCES customers (id),
    program_id   bigint      NOT NULL,
    partner_id   bigint,
    click_id     text,
    customer_key text,
    email_hash   text,
    event_name   text        NOT NULL DEFAULT '',
    status       text        NOT NULL CHECK (status IN ('settled', 'provisional')),
    is_test      boolean     NOT NULL DEFAULT false,
    via_api_key  boolean     NOT NULL DEFAULT false,
    api_key_id   bigint,
    created_at   timestamptz NOT NULL DEFAULT now(),
    settled_at   timestamptz
);
-- At most one real lead per customer: a provisional one that later settles,
-- or one settled directly.
CREATE UNIQUE INDEX lead_events_one_per_customer ON lead_events (customer_id) WHERE NOT is_test;
CREATE INDEX lead_events_program_test_idx ON lead_events (program_id, created_at) WHERE is_test;

CREATE TABLE visits (
    id           bigserial PRIMARY KEY,
    program_id   bigint      NOT NULL,
    click_id     text,
    page_url     text        NOT NULL,
    referrer_url text        NOT NULL DEFAULT '',
    session_id   text        NOT NULL DEFAULT '',
    ip           inet,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- Counters live beside the catalog replica rather than in it, so replica
-- upserts and click traffic never touch the same rows.
CREATE TABLE link_stats (
    link_id      bigint PRIMARY KEY,
    clicks       bigint      NOT NULL DEFAULT 0,
    last_clicked timestamptz
);

CREATE TABLE partner_program_metrics (
    program_id bigint NOT NULL,
    partner_id bigint NOT NULL,
    clicks     bigint NOT NULL DEFAULT 0,
    leads      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (program_id, partner_id)
);

-- +goose Down
DROP TABLE partner_program_metrics, link_stats, visits, lead_events, affiliate_click_events, customers;
