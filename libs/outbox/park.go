package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/svc-dev/svc/libs/pg"
)

// publishClass is how the relay treats a failed write of one message.
type publishClass int

const (
	// transient: retried with ErrorBackoff for as long as it lasts (leader
	// not available, network, timeouts, anything unrecognised).
	transient publishClass = iota
	// missingTopic: retried, and parked once it has lasted
	// RelayConfig.ParkMissingTopicAfter (a topic may be created late).
	missingTopic
	// permanent: the broker will never accept this message; parked at once.
	permanent
)

// classifyPublish classifies a WriteMessages error; for a kafka.WriteErrors
// the worst class of its messages.
func classifyPublish(err error) publishClass {
	if err == nil {
		return transient
	}
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		worst := transient
		for _, e := range we {
			if e != nil {
				worst = max(worst, classifyPublish(e))
			}
		}
		return worst
	}
	if _, ok := errors.AsType[kafka.MessageTooLargeError](err); ok {
		return permanent
	}
	if _, ok := errors.AsType[*kafka.MessageTooLargeError](err); ok {
		return permanent
	}
	switch {
	case errors.Is(err, kafka.MessageSizeTooLarge), errors.Is(err, kafka.InvalidMessage),
		errors.Is(err, kafka.InvalidMessageSize), errors.Is(err, kafka.InvalidTopic),
		errors.Is(err, kafka.RecordListTooLarge), errors.Is(err, kafka.InvalidRecord):
		return permanent
	case errors.Is(err, kafka.UnknownTopicOrPartition):
		return missingTopic
	}
	return transient
}

// Unpark releases parked outbox rows of schema for the relay to publish
// again, in id order: the rows with the given ids together with every later
// parked row of the same topic and key (held behind them, so per-key order
// holds), or every parked row when ids is empty. Fix the cause first
// (create the topic, raise the broker's limit): a row failing the same way
// is parked again. It wakes the relay and returns the number of rows
// released. To discard a parked row instead, delete it with SQL (see
// docs/operations.md).
func Unpark(ctx context.Context, pool *pgxpool.Pool, schema string, ids []int64) (int64, error) {
	if err := pg.ValidSchema(schema); err != nil {
		return 0, fmt.Errorf("outbox unpark: %w", err)
	}
	table := pgx.Identifier{schema, "outbox"}.Sanitize()
	where := `parked_at IS NOT NULL AND sent_at IS NULL`
	args := []any{schema + "_outbox"}
	if len(ids) > 0 {
		where += ` AND (id = ANY($2) OR EXISTS (
			SELECT 1 FROM ` + table + ` p
			WHERE p.id = ANY($2) AND p.parked_at IS NOT NULL AND p.sent_at IS NULL
			  AND p.topic = o.topic AND p.key = o.key AND p.id < o.id))`
		args = append(args, ids)
	}
	var n int64
	err := pool.QueryRow(ctx, `
		WITH up AS (
			UPDATE `+table+` o SET parked_at = NULL, park_reason = NULL
			WHERE `+where+`
			RETURNING 1
		)
		SELECT count(*) FROM up, LATERAL (SELECT pg_notify($1, '')) AS n`, args...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("outbox unpark in %s: %w", schema, err)
	}
	return n, nil
}

// Discard deletes parked rows of schema with the given ids for good (rows
// not parked, or already sent, are left alone) and returns how many went.
// The rows held behind them are released by the relay within its
// StatsInterval and published in id order (unless another parked row of
// their key still holds them). The deleted events are never published:
// record what they were (park_reason, payload) before calling it.
func Discard(ctx context.Context, pool *pgxpool.Pool, schema string, ids []int64) (int64, error) {
	if err := pg.ValidSchema(schema); err != nil {
		return 0, fmt.Errorf("outbox discard: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	var n int64
	err := pool.QueryRow(ctx, `
		WITH del AS (
			DELETE FROM `+pgx.Identifier{schema, "outbox"}.Sanitize()+`
			WHERE id = ANY($2) AND parked_at IS NOT NULL AND sent_at IS NULL
			RETURNING 1
		)
		SELECT count(*) FROM del, LATERAL (SELECT pg_notify($1, '')) AS n`, schema+"_outbox", ids).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("outbox discard in %s: %w", schema, err)
	}
	return n, nil
}
