-- +goose Up
-- A brand's webhook endpoints, the events written for them and one
-- delivery per (endpoint, event).

-- An endpoint of a program. events lists the event types it receives
-- (click.recorded only when named); include_test also sends test events
-- and test-mode sales. failing_since is the first failed attempt since the
-- last 2xx (NULL while it succeeds): after 5 days of failures the endpoint
-- is disabled (enabled false, disabled_reason 'failing').
CREATE TABLE endpoints (
    id              bigserial   PRIMARY KEY,
    program_id      bigint      NOT NULL,
    url             text        NOT NULL,
    description     text        NOT NULL DEFAULT '',
    events          text[]      NOT NULL,
    include_test    boolean     NOT NULL DEFAULT false,
    enabled         boolean     NOT NULL DEFAULT true,
    disabled_reason text        NOT NULL DEFAULT '',
    disabled_at     timestamptz,
    failing_since   timestamptz,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);
-- The program's endpoints (the list route, the fan-out of each event).
CREATE INDEX endpoints_program ON endpoints (program_id, id);

-- Signing secrets, sealed (AES-256-GCM under WEBHOOKS_SECRET_KEY: a
-- signature needs the secret itself, so it cannot be kept as a hash).
-- expires_at NULL is the current secret; a rotation sets the old one's to
-- 24 hours ahead, and both sign until then.
CREATE TABLE endpoint_secrets (
    id            bigserial   PRIMARY KEY,
    endpoint_id   bigint      NOT NULL REFERENCES endpoints ON DELETE CASCADE,
    secret_sealed bytea       NOT NULL,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz
);
CREATE INDEX endpoint_secrets_endpoint ON endpoint_secrets (endpoint_id, id);

-- An event as delivered: id is the webhook-id header (evt_…), the same on
-- every attempt; body the exact bytes signed and sent. seq is the order
-- events were written in. object_key names the object the event is about
-- ('commission:12'): one endpoint receives one object's events in seq order.
CREATE TABLE events (
    id         text        PRIMARY KEY,
    seq        bigserial   NOT NULL UNIQUE,
    program_id bigint      NOT NULL,
    type       text        NOT NULL,
    is_test    boolean     NOT NULL,
    object_key text        NOT NULL,
    body       bytea       NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX events_program_seq ON events (program_id, seq);

-- One delivery of an event to an endpoint. A pending delivery is due at
-- next_attempt_at; an attempt in flight stays pending with next_attempt_at
-- pushed past its timeout (a lease), so an attempt cut short by a crash is
-- made again once the lease ends. delivered and failed are final.
CREATE TABLE deliveries (
    id               bigserial   PRIMARY KEY,
    endpoint_id      bigint      NOT NULL REFERENCES endpoints ON DELETE CASCADE,
    event_id         text        NOT NULL REFERENCES events,
    event_type       text        NOT NULL,
    object_key       text        NOT NULL,
    status           text        NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz,
    last_attempt_at  timestamptz,
    last_status      integer,
    last_error       text        NOT NULL DEFAULT '',
    last_duration_ms integer,
    delivered_at     timestamptz,
    created_at       timestamptz NOT NULL,
    UNIQUE (endpoint_id, event_id)
);
-- The dispatcher's claim: due pending deliveries, soonest first.
CREATE INDEX deliveries_due ON deliveries (next_attempt_at, id) WHERE status = 'pending';
-- One object's earlier deliveries to the same endpoint still pending.
CREATE INDEX deliveries_object_pending ON deliveries (endpoint_id, object_key, id) WHERE status = 'pending';
-- The delivery log of an endpoint, newest first, with or without a status.
CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, id);
CREATE INDEX deliveries_endpoint_status ON deliveries (endpoint_id, status, id);

-- +goose Down
SELECT 'forward-only';
