-- +goose Up
-- Refund and dispute events of the processor that arrive before the
-- payment they name is recorded (the processor delivers out of order) are
-- kept with outcome awaiting_payment and the references of that payment
-- (charge, payment intent, invoice). Once a sale with one of them is
-- recorded, the webhook applies them (and the backstop, for a process that
-- stopped in between or a payment the brand's sale route recorded) and
-- replaces the outcome.
ALTER TABLE processor_events ADD COLUMN refs text[] NOT NULL DEFAULT '{}';

CREATE INDEX processor_events_waiting ON processor_events USING gin (refs) WHERE outcome = 'awaiting_payment';

-- +goose Down
SELECT 'forward-only';
