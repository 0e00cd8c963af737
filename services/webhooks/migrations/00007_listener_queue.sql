-- +goose Up
-- Each `svc listen` listener's own queue of the events it wants. A cursor
-- over events.seq could skip an event: seq is taken at insert, so a
-- transaction that commits after a later-numbered one was already polled
-- would be behind the cursor. The writer instead queues the event for
-- every live listener in the event's own statement, and a poll takes
-- (deletes) what is queued, whatever order the writers committed in.
CREATE TABLE listener_events (
    listener_id bigint NOT NULL REFERENCES listeners ON DELETE CASCADE,
    seq         bigint NOT NULL,
    event_id    text   NOT NULL REFERENCES events,
    PRIMARY KEY (listener_id, seq)
);

-- +goose Down
SELECT 'forward-only';
