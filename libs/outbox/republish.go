package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/pg"
)

// Republish queues every published row schema's outbox still keeps to be
// published again, in id order, and returns how many. It is for a broker
// that lost its log while the database kept its state (a local stack's
// broker data deleted): events that were published but not yet consumed
// are gone from the broker, and nothing else would ever send them again.
// Consumers are idempotent by event id, so the events they did consume
// are skipped. Rows a relay with DeleteSent removed, or retention swept,
// cannot be republished. A schema without an outbox table has none: 0.
// Call it before the schema's relay starts: it wakes no relay.
func Republish(ctx context.Context, pool *pgxpool.Pool, schema string) (int64, error) {
	if err := pg.ValidSchema(schema); err != nil {
		return 0, fmt.Errorf("outbox republish: %w", err)
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{schema, "outbox"}.Sanitize()).Scan(&exists); err != nil {
		return 0, fmt.Errorf("outbox republish in %s: %w", schema, err)
	}
	if !exists {
		return 0, nil
	}
	tag, err := pool.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "outbox"}.Sanitize()+` SET sent_at = NULL WHERE sent_at IS NOT NULL`)
	if err != nil {
		return 0, fmt.Errorf("outbox republish in %s: %w", schema, err)
	}
	return tag.RowsAffected(), nil
}
