// Package consumer is the Kafka transport of the catalog's sync barrier:
// it decodes the acknowledgements other services publish once they applied
// the catalog (topic catalog.applied.v1) and records them inside the inbox
// transaction the platform opens for each event.
package consumer

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// Group is the consumer group (and inbox name) of this consumer; keep it
// stable, renaming it re-applies every event still in Kafka.
const Group = "accounts.catalog-acks"

// Recorder stores one acknowledgement inside tx (pgstore.RecordAck).
type Recorder func(ctx context.Context, tx pgx.Tx, service, epoch string, seq int64) (bool, error)

// Handler returns the inbox handler for catalog.applied.v1.
func Handler(record Recorder) func(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	return func(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
		var ack eventsv1.CatalogApplied
		if err := proto.Unmarshal(env.GetPayload(), &ack); err != nil {
			return fmt.Errorf("decode catalog ack %s: %w", env.GetId(), err)
		}
		_, err := record(ctx, tx, ack.GetService(), ack.GetEpoch(), ack.GetSeq())
		return err
	}
}
