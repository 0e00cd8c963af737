package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"

	"github.com/svc-dev/svc/libs/pg"
)

// DeadLetter is one row of the dead_letters table.
type DeadLetter struct {
	ID        int64             `json:"id"`
	Consumer  string            `json:"consumer"`
	Topic     string            `json:"topic"`
	Partition int               `json:"partition"`
	Offset    int64             `json:"offset"`
	EventID   string            `json:"event_id,omitempty"`
	EventType string            `json:"event_type,omitempty"`
	Key       []byte            `json:"-"`
	Value     []byte            `json:"-"`
	Headers   map[string]string `json:"-"`
	Error     string            `json:"error"`
	Attempts  int               `json:"attempts"`
	CreatedAt time.Time         `json:"dead_lettered_at"`
	// ReplayedAt and ReplayOutcome are set once the dead letter is
	// resolved by Consumer.Replay (nil and "" while pending).
	ReplayedAt    *time.Time `json:"replayed_at,omitempty"`
	ReplayOutcome string     `json:"replay_outcome,omitempty"`
}

// Replay outcomes, stored in dead_letters.replay_outcome.
const (
	// ReplayApplied: the handler applied the event in the replay's
	// transaction, with its inbox row.
	ReplayApplied = "applied"
	// ReplayAlreadyApplied: the inbox already held the event (applied since,
	// by a redelivery or an earlier replay); nothing ran.
	ReplayAlreadyApplied = "already_applied"
)

// ErrNotFound is returned for a dead-letter id that does not exist.
var ErrNotFound = errors.New("dead letter not found")

// DeadLetterFilter selects dead letters for ListDeadLetters.
type DeadLetterFilter struct {
	Consumer string // empty: every consumer
	Pending  bool   // only those not replayed yet
	Limit    int    // 0: 50
	BeforeID int64  // when set, only ids below it (paging)
}

const deadLetterColumns = `id, consumer, topic, partition, "offset", coalesce(event_id, ''), coalesce(event_type, ''),
	key, value, headers, error, attempts, created_at, replayed_at, coalesce(replay_outcome, '')`

func scanDeadLetter(row pgx.Row) (DeadLetter, error) {
	var d DeadLetter
	var headers []byte
	err := row.Scan(&d.ID, &d.Consumer, &d.Topic, &d.Partition, &d.Offset, &d.EventID, &d.EventType,
		&d.Key, &d.Value, &headers, &d.Error, &d.Attempts, &d.CreatedAt, &d.ReplayedAt, &d.ReplayOutcome)
	if err != nil {
		return d, err
	}
	if len(headers) > 0 {
		if err := json.Unmarshal(headers, &d.Headers); err != nil {
			return d, fmt.Errorf("dead letter %d: decode headers: %w", d.ID, err)
		}
	}
	return d, nil
}

func deadLetterTable(schema string) (string, error) {
	if schema == "" {
		return "dead_letters", nil
	}
	if err := pg.ValidSchema(schema); err != nil {
		return "", err
	}
	return pgx.Identifier{schema, "dead_letters"}.Sanitize(), nil
}

// ListDeadLetters returns the dead letters of schema (empty: the pool's
// search_path) matching f, newest first.
func ListDeadLetters(ctx context.Context, pool *pgxpool.Pool, schema string, f DeadLetterFilter) ([]DeadLetter, error) {
	table, err := deadLetterTable(schema)
	if err != nil {
		return nil, err
	}
	if f.Limit <= 0 {
		f.Limit = 50
	}
	rows, err := pool.Query(ctx, `SELECT `+deadLetterColumns+` FROM `+table+`
		WHERE ($1 = '' OR consumer = $1) AND (NOT $2 OR replayed_at IS NULL) AND ($4 = 0 OR id < $4)
		ORDER BY id DESC LIMIT $3`, f.Consumer, f.Pending, f.Limit, f.BeforeID)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeadLetter, error) { return scanDeadLetter(r) })
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return out, nil
}

// GetDeadLetter returns one dead letter, or ErrNotFound.
func GetDeadLetter(ctx context.Context, pool *pgxpool.Pool, schema string, id int64) (DeadLetter, error) {
	table, err := deadLetterTable(schema)
	if err != nil {
		return DeadLetter{}, err
	}
	d, err := scanDeadLetter(pool.QueryRow(ctx, `SELECT `+deadLetterColumns+` FROM `+table+` WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fmt.Errorf("dead letter %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return d, fmt.Errorf("load dead letter %d: %w", id, err)
	}
	return d, nil
}

// ReplayResult says what Replay did (or, with dryRun, would do).
type ReplayResult struct {
	DeadLetter DeadLetter
	// Outcome is ReplayApplied or ReplayAlreadyApplied for a dead letter
	// resolved now (or that would be, with dryRun); for one resolved
	// before, it is the outcome recorded then and AlreadyReplayed is set.
	Outcome         string
	AlreadyReplayed bool
	DryRun          bool
}

// Replay applies dead letter id through this consumer's handler, exactly
// as Run applies a message: in one transaction, the inbox row and, if it is
// new, the handler; the dead letter is marked replayed in the same
// transaction, so the event is applied once and the mark cannot be lost or
// given without it. The row is locked first, so concurrent replays of one
// id run one after the other and the second finds it replayed. An event
// already in the inbox (applied since) runs nothing and its dead letter is
// resolved as ReplayAlreadyApplied. A dead letter of another consumer, an
// undecodable one or a handler error is an error and changes nothing. With
// dryRun the transaction (handler included) is rolled back: the result
// says what would happen and nothing changes.
func (c *Consumer) Replay(ctx context.Context, id int64, dryRun bool) (ReplayResult, error) {
	res := ReplayResult{DryRun: dryRun}
	errDryRun := errors.New("dry run")
	err := pg.InTx(ctx, c.pool, func(tx pgx.Tx) error {
		d, err := scanDeadLetter(tx.QueryRow(ctx, `SELECT `+deadLetterColumns+` FROM `+c.dead+` WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("dead letter %d: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("load dead letter %d: %w", id, err)
		}
		res.DeadLetter = d
		if d.Consumer != c.cfg.Name {
			return fmt.Errorf("dead letter %d belongs to consumer %q, not %q", id, d.Consumer, c.cfg.Name)
		}
		if d.ReplayedAt != nil {
			res.Outcome, res.AlreadyReplayed = d.ReplayOutcome, true
			return nil
		}
		env, err := decode(kafka.Message{Value: d.Value})
		if err != nil {
			return fmt.Errorf("dead letter %d cannot be replayed: %w", id, err)
		}
		tag, err := tx.Exec(ctx, `INSERT INTO `+c.inbox+` (consumer, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			c.cfg.Name, env.GetId())
		if err != nil {
			return fmt.Errorf("insert inbox row: %w", err)
		}
		res.Outcome = ReplayAlreadyApplied
		if tag.RowsAffected() == 1 {
			if err := c.cfg.Handler(ctx, tx, env); err != nil {
				return fmt.Errorf("handle %s: %w", env.GetType(), err)
			}
			res.Outcome = ReplayApplied
		}
		if _, err := tx.Exec(ctx, `UPDATE `+c.dead+` SET replayed_at = now(), replay_outcome = $2 WHERE id = $1`, id, res.Outcome); err != nil {
			return fmt.Errorf("mark dead letter %d replayed: %w", id, err)
		}
		if dryRun {
			return errDryRun
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		err = nil
	}
	if err == nil && !dryRun && !res.AlreadyReplayed {
		c.log.InfoContext(ctx, "dead letter replayed", "dead_letter_id", id, "event_id", res.DeadLetter.EventID,
			"event_type", res.DeadLetter.EventType, "outcome", res.Outcome)
	}
	return res, err
}

// Name is the consumer's name (its group and inbox key).
func (c *Consumer) Name() string { return c.cfg.Name }
