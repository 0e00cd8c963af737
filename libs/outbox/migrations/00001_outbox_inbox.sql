-- +goose Up
-- Events waiting to be published, written in the same transaction as the
-- domain change they describe. payload is the marshalled
-- svc.events.v1.Envelope, published as the Kafka message value.
CREATE TABLE outbox (
    id         bigserial   PRIMARY KEY,
    event_id   uuid        NOT NULL UNIQUE,
    topic      text        NOT NULL,
    key        text        NOT NULL,
    event_type text        NOT NULL,
    payload    bytea       NOT NULL,
    headers    jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz
);
-- The relay reads unsent rows in id order; the partial index stays small.
CREATE INDEX outbox_unsent_idx ON outbox (id) WHERE sent_at IS NULL;
-- The sweeper deletes sent rows past retention.
CREATE INDEX outbox_sent_at_idx ON outbox (sent_at) WHERE sent_at IS NOT NULL;

-- Events applied by a consumer; the primary key makes a redelivery a no-op.
CREATE TABLE inbox (
    consumer   text        NOT NULL,
    event_id   uuid        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);

-- Messages a consumer gave up on (undecodable, or failing after its retry
-- budget), kept for inspection and replay even when no dead-letter topic is
-- configured. One row per source message.
CREATE TABLE dead_letters (
    id          bigserial   PRIMARY KEY,
    consumer    text        NOT NULL,
    topic       text        NOT NULL,
    partition   integer     NOT NULL,
    "offset"    bigint      NOT NULL,
    event_id    text,
    event_type  text,
    key         bytea,
    value       bytea,
    headers     jsonb       NOT NULL DEFAULT '{}'::jsonb,
    error       text        NOT NULL,
    attempts    integer     NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (consumer, topic, partition, "offset")
);
