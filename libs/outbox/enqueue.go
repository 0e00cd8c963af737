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
func Enqueue(ctx context.Context, tx pgx.Tx, topic string, env *eventsv1.Envelope) (int64, error) {
	if topic == "" {
		return 0, errors.New("enqueue event: empty topic")
	}
	if env == nil || env.GetType() == "" {
		return 0, errors.New("enqueue event: envelope type is required")
	}
	if env.Id == "" {
		env.Id = newUUID()
	} else if !ValidUUID(env.Id) {
		return 0, fmt.Errorf("enqueue event: id %q is not a UUID", env.Id)
	}
	payload, err := proto.Marshal(env)
	if err != nil {
		return 0, fmt.Errorf("enqueue event %s: marshal envelope: %w", env.Id, err)
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
