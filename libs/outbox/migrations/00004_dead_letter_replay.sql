-- +goose Up
-- `<service> dead-letters replay` (inbox.Consumer.Replay) resolves a dead
-- letter: replayed_at is when, replay_outcome how (applied: the handler ran
-- in the replay's transaction; already_applied: the inbox held the event, so
-- it had been applied by then and nothing ran). A row with replayed_at NULL
-- is pending. Numbered apart from the outbox's own migrations (00001..)
-- because it belongs to the inbox's replay, written separately.
ALTER TABLE dead_letters
    ADD COLUMN replayed_at    timestamptz,
    ADD COLUMN replay_outcome text;
