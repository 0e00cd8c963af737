-- +goose Up
-- Each `analytics rebuild`: when it ran, how it ended, how many events it
-- applied (analytics_rebuild_* metrics and the rebuild alerts read it).
CREATE TABLE rebuilds (
    id          bigserial   PRIMARY KEY,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    status      text        NOT NULL CHECK (status IN ('running', 'done', 'failed')),
    events      bigint      NOT NULL DEFAULT 0,
    detail      text        NOT NULL DEFAULT ''
);

-- +goose Down
SELECT 'forward-only';
