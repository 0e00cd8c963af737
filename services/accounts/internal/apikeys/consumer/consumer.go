// Package consumer is the Kafka transport of keys' last use: it decodes
// the ApiKeyUsed reports tracking and commissions publish (topic
// apikeys.used.v1) and records them inside the inbox transaction the
// platform opens for each event.
package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// Group is the consumer group (and inbox name) of this consumer; keep it
// stable, renaming it re-applies every event still in Kafka.
const Group = "accounts.key-uses"

// Recorder stores one use inside tx (pgstore.RecordUse).
type Recorder func(ctx context.Context, tx pgx.Tx, keyID int64, at time.Time) error

// Handler returns the inbox handler for apikeys.used.v1. A report without
// a key or a time is skipped: nothing could be recorded from it.
func Handler(record Recorder) func(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	return func(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
		if env.GetType() != eventsv1.TypeAPIKeyUsed {
			return nil
		}
		var u eventsv1.ApiKeyUsed
		if err := proto.Unmarshal(env.GetPayload(), &u); err != nil {
			return fmt.Errorf("decode key use %s: %w", env.GetId(), err)
		}
		if u.GetKeyId() <= 0 || u.GetUsedAt() == nil {
			return nil
		}
		return record(ctx, tx, u.GetKeyId(), u.GetUsedAt().AsTime())
	}
}
