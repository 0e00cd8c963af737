-- +goose Up
-- A disabled endpoint's pending deliveries wait for the brand, possibly for
-- days and by the thousand. Left in deliveries_due they were due long ago,
-- so every claim (every poll, every pod) walked past all of them before
-- the join on endpoints.enabled dropped them: the claim's cost grew with
-- the backlog of every disabled endpoint. Parked deliveries are out of the
-- claim's index; turning the endpoint back on unparks them.
ALTER TABLE deliveries ADD COLUMN parked boolean NOT NULL DEFAULT false;
UPDATE deliveries d SET parked = true FROM endpoints e
WHERE e.id = d.endpoint_id AND NOT e.enabled AND d.status = 'pending';
DROP INDEX deliveries_due;
CREATE INDEX deliveries_due ON deliveries (next_attempt_at, id) WHERE status = 'pending' AND NOT parked;

-- +goose Down
SELECT 'forward-only';
