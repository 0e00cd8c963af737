-- +goose Up
-- The accounts service's catalog. Unqualified names resolve to the service's
-- own schema (search_path is set to it while migrating).

CREATE TABLE advertisers (
    id         bigserial PRIMARY KEY,
    name       text        NOT NULL,
    email      text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id            bigserial PRIMARY KEY,
    email         text        NOT NULL,
    name          text        NOT NULL DEFAULT '',
    advertiser_id bigint      REFERENCES advertisers (id),
    blocked       boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE programs (
    id                      bigserial PRIMARY KEY,
    advertiser_id           bigint        NOT NULL REFERENCES advertisers (id),
    name                    text          NOT NULL,
    domain                  text          NOT NULL,
    commission_type         text          NOT NULL CHECK (commission_type IN ('percent', 'fixed', 'recurring_percent', 'recurring_fixed')),
    commission_rate         numeric(12,4) NOT NULL CHECK (commission_rate > 0),
    duration_months         integer       NOT NULL DEFAULT 0 CHECK (duration_months >= 0),
    cookie_duration         integer       CHECK (cookie_duration BETWEEN 1 AND 365),
    attribution_window_days integer       NOT NULL DEFAULT 60 CHECK (attribution_window_days > 0),
    hold_days               integer       NOT NULL DEFAULT 30 CHECK (hold_days >= 0),
    lead_auth_policy        text          NOT NULL DEFAULT 'server_required' CHECK (lead_auth_policy IN ('server_required', 'browser_allowed')),
    payment_tracking_mode   text          NOT NULL DEFAULT 'processor_connect' CHECK (payment_tracking_mode IN ('processor_connect', 's2s')),
    processor_status        text          NOT NULL DEFAULT 'not_connected',
    processor_account_id    text          NOT NULL DEFAULT '',
    charges_enabled         boolean       NOT NULL DEFAULT false,
    payouts_enabled         boolean       NOT NULL DEFAULT false,
    details_submitted       boolean       NOT NULL DEFAULT false,
    connected_at            timestamptz,
    allowed_origins         text[]        NOT NULL DEFAULT '{}',
    created_at              timestamptz   NOT NULL DEFAULT now(),
    updated_at              timestamptz   NOT NULL DEFAULT now(),
    CHECK (commission_type NOT IN ('percent', 'recurring_percent') OR commission_rate <= 100)
);
CREATE INDEX programs_advertiser_idx ON programs (advertiser_id);

CREATE TABLE memberships (
    program_id  bigint  NOT NULL REFERENCES programs (id),
    user_id     bigint  NOT NULL REFERENCES users (id),
    active      boolean NOT NULL,
    permissions text[]  NOT NULL DEFAULT '{}',
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (program_id, user_id)
);

-- Keys are stored only as SHA-256 hashes; prefix is kept for masked display.
CREATE TABLE api_keys (
    id                 bigserial PRIMARY KEY,
    program_id         bigint      NOT NULL REFERENCES programs (id),
    key_hash           bytea       NOT NULL UNIQUE,
    prefix             text        NOT NULL,
    test               boolean     NOT NULL DEFAULT false,
    rotation_marked_at timestamptz,
    rotation_deadline  timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_keys_program_idx ON api_keys (program_id);

CREATE TABLE partners (
    id         bigserial PRIMARY KEY,
    name       text        NOT NULL,
    email      text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE partner_programs (
    id         bigserial PRIMARY KEY,
    partner_id bigint      NOT NULL REFERENCES partners (id),
    program_id bigint      NOT NULL REFERENCES programs (id),
    approved   boolean     NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (program_id, partner_id)
);

CREATE TABLE links (
    id         bigserial PRIMARY KEY,
    program_id bigint      NOT NULL REFERENCES programs (id),
    partner_id bigint      NOT NULL REFERENCES partners (id),
    code       text        NOT NULL,
    active     boolean     NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT links_program_code_key UNIQUE (program_id, code)
);

-- One gapless counter for catalog events: consumers can only report "applied
-- up to N" if no number is skipped, so this is a row, not a sequence (a
-- rolled-back nextval would leave a hole). Catalog writes are admin-rate, so
-- serialising them on this row costs nothing that matters.
CREATE TABLE catalog_seq (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    seq       bigint  NOT NULL
);
INSERT INTO catalog_seq (seq) VALUES (0);

-- How far each consuming service has applied the catalog, from its
-- catalog.applied.v1 acknowledgements.
CREATE TABLE catalog_acks (
    service    text PRIMARY KEY,
    seq        bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE catalog_acks, catalog_seq, links, partner_programs, partners, api_keys, memberships, programs, users, advertisers;
