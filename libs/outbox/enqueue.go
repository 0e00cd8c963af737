package outbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// Enqueue stores env for publication on topic, inside tx, so the event
// commits or rolls back together with the caller's domain write. It returns
// the outbox row id.
//
// tx must belong to a pool whose search_path is the service's schema
// (pg.Options.Schema): the row goes to that schema's outbox table and the
// relay of that schema is woken through NOTIFY "<schema>_outbox" when tx
// commits. The current trace context is stored with the row and travels in
// the Kafka headers, so the consumer's span joins the producer's trace.
//
// env.Type is required. An empty env.Id is filled with a new UUID. The Kafka
// key is env.ProgramId in decimal, so events of one program stay ordered.
// Call Enqueue after the domain write that locks the affected row: outbox
// ids are then allocated in the same order as conflicting commits, and the
// relay publishes in id order.
//
// A marshalled envelope larger than the limit (DefaultMaxPayloadBytes, or
// WithMaxPayloadBytes) is refused with an error wrapping ErrTooLarge and
// nothing is written: the caller's transaction fails instead of committing a
// row no broker would accept.
func Enqueue(ctx context.Context, tx pgx.Tx, topic string, env *eventsv1.Envelope, opts ...EnqueueOption) (int64, error) {
	payload, err := prepare(topic, env, enqueueOptions(opts))
	if err != nil {
		return 0, err
	}
	headers := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, headers)

	// One round trip: insert, then queue the wake-up; Postgres delivers the
	// notification only if tx commits, and folds duplicates within tx.
	var id int64
	err = tx.QueryRow(ctx, `
		WITH ins AS (
			INSERT INTO outbox (event_id, topic, key, event_type, payload, headers)
			VALUES ($1, $2, $3, $4, $5, $6)
			RETURNING id
		)
		SELECT id FROM ins, LATERAL (SELECT pg_notify(current_schema() || '_outbox', '')) AS n`,
		env.Id, topic, strconv.FormatInt(env.ProgramId, 10), env.Type, payload, map[string]string(headers),
	).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("enqueue event %s (%s): %w", env.Id, env.Type, err)
	}
	return id, nil
}

// DefaultMaxPayloadBytes is the largest marshalled envelope Enqueue accepts
// by default: 900 KiB, under the broker's default message.max.bytes (1 MiB)
// with room for the key, headers and record overhead.
const DefaultMaxPayloadBytes = 900 << 10

// ErrTooLarge is wrapped by the error of Enqueue, EnqueueMany and QueueMany
// for an envelope over the payload limit.
var ErrTooLarge = errors.New("outbox: event payload too large")

// EnqueueOption adjusts one Enqueue, EnqueueMany or QueueMany call.
type EnqueueOption func(*enqueueConfig)

type enqueueConfig struct{ maxPayload int }

// WithMaxPayloadBytes sets the payload limit (n <= 0: the default). Raise it
// only together with the broker's and topic's max.message.bytes and the
// writer's BatchBytes.
func WithMaxPayloadBytes(n int) EnqueueOption {
	return func(c *enqueueConfig) {
		if n > 0 {
			c.maxPayload = n
		}
	}
}

func enqueueOptions(opts []EnqueueOption) enqueueConfig {
	c := enqueueConfig{maxPayload: DefaultMaxPayloadBytes}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// prepare checks env, fills its id and marshals it.
func prepare(topic string, env *eventsv1.Envelope, cfg enqueueConfig) ([]byte, error) {
	if topic == "" {
		return nil, errors.New("enqueue event: empty topic")
	}
	if env == nil || env.GetType() == "" {
		return nil, errors.New("enqueue event: envelope type is required")
	}
	if env.Id == "" {
		env.Id = newUUID()
	} else if !ValidUUID(env.Id) {
		return nil, fmt.Errorf("enqueue event: id %q is not a UUID", env.Id)
	}
	payload, err := proto.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("enqueue event %s: marshal envelope: %w", env.Id, err)
	}
	if len(payload) > cfg.maxPayload {
		return nil, fmt.Errorf("enqueue event %s (%s): %d bytes over the limit of %d: %w", env.Id, env.Type, len(payload), cfg.maxPayload, ErrTooLarge)
	}
	return payload, nil
}

// EnqueueMany stores several events in one statement, for writers that
// commit many domain rows per transaction (a group-commit writer). Unlike
// Enqueue it sends no NOTIFY: on a hot path every notifying transaction
// serialises on Postgres's notification queue lock at commit, so such a
// service relies on the relay's poll interval instead (RelayConfig.
// PollInterval; tens of milliseconds is cheap). Rows get ascending ids in
// the order of envs.
func EnqueueMany(ctx context.Context, tx BatchSender, topic string, envs []*eventsv1.Envelope, opts ...EnqueueOption) error {
	if len(envs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	if err := QueueMany(ctx, b, topic, envs, opts...); err != nil {
		return err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("enqueue %d events on %s: %w", len(envs), topic, err)
	}
	return nil
}

// BatchSender sends a batch inside a transaction: a pgx.Tx, or a
// transaction of libs/pg that pipelines its BEGIN and COMMIT.
type BatchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// QueueMany adds the insert of EnqueueMany to b, so a writer can send it in
// the same round trip as its domain writes; b must then run inside the
// transaction of those writes.
func QueueMany(ctx context.Context, b *pgx.Batch, topic string, envs []*eventsv1.Envelope, opts ...EnqueueOption) error {
	if len(envs) == 0 {
		return nil
	}
	cfg := enqueueOptions(opts)
	ids := make([]string, len(envs))
	keys := make([]string, len(envs))
	types := make([]string, len(envs))
	payloads := make([][]byte, len(envs))
	for i, env := range envs {
		payload, err := prepare(topic, env, cfg)
		if err != nil {
			return err
		}
		ids[i], keys[i], types[i], payloads[i] = env.Id, strconv.FormatInt(env.ProgramId, 10), env.Type, payload
	}
	headers := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, headers)
	// The ids go as text[] and are cast in SQL: pgx has no binary encoding
	// of a []string as uuid[], and falls back to text only after searching
	// for one (not remembered) and formatting the error, on every call.
	b.Queue(`
		INSERT INTO outbox (event_id, topic, key, event_type, payload, headers)
		SELECT e.id::uuid, $2, e.key, e.type, e.payload, $6
		FROM unnest($1::text[], $3::text[], $4::text[], $5::bytea[]) WITH ORDINALITY AS e(id, key, type, payload, n)
		ORDER BY e.n`,
		ids, topic, keys, types, payloads, map[string]string(headers))
	return nil
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hexDigits = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hexDigits[c>>4], hexDigits[c&0x0f])
	}
	return string(out)
}

// ValidUUID reports whether s is a UUID in canonical 8-4-4-4-12 hex form.
func ValidUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// NewEventID returns a new random UUID for Envelope.Id.
func NewEventID() string { return newUUID() }
