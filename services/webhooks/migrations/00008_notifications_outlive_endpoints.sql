-- +goose Up
-- A notification outlives its endpoint. The brand was told an endpoint was
-- disabled (the console lists it), and deleting that endpoint, often the
-- answer to it, must not erase what they were told: the cascade from
-- endpoints goes. endpoint_id keeps the id it had (a bigserial, never
-- reused), and the console shows a deleted endpoint's url as null.
ALTER TABLE notifications DROP CONSTRAINT notifications_endpoint_id_fkey;

-- +goose Down
SELECT 'forward-only';
