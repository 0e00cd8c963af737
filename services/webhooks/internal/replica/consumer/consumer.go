// Package consumer is the Kafka transport of webhooks' catalog replica: it
// applies accounts catalog events (topic accounts.catalog.v1) to webhooks'
// copy of the programs, the program API keys (`svc listen`) and of what
// the console routes check
// (catalogsync.ApplyConsole), inside the inbox transaction the platform
// opens for each event, and advances the catalog watermark the sync
// barrier waits on.
package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/libs/catalogsync"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// Group is the consumer group (and inbox name) of the replica consumer of
// service; keep it stable, renaming it re-applies every event in Kafka.
func Group(service string) string { return service + ".catalog" }

// Hook sees a catalog event inside the same transaction, before the
// replica applies it (so it can compare the replica's previous state with
// the event): webhooks' partner.enrolled is written this way.
type Hook func(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error

// Applier applies one catalog event inside the inbox transaction.
type Applier struct {
	// Service is the name catalog progress is acknowledged under (the
	// platform's service name).
	Service string
	Now     func() time.Time
	// Before, when set, runs before each event is applied.
	Before Hook
}

// Apply is an inbox handler: it upserts the entities webhooks keeps and,
// for every catalog event (kept or not), advances the catalog watermark.
func (a Applier) Apply(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	if a.Before != nil {
		if err := a.Before(ctx, tx, env); err != nil {
			return err
		}
	}
	if err := upsert(ctx, tx, env); err != nil {
		return err
	}
	// Every pod's key cache (`svc listen` authenticates program keys on
	// it) drops its entries when a key's change commits: a revoked key is
	// refused at once. Only then: a notifying commit holds Postgres'
	// cluster-wide notification lock through its WAL flush.
	if env.GetType() == eventsv1.TypeAPIKeyUpserted {
		if err := catalogsync.Notify(ctx, tx); err != nil {
			return err
		}
	}
	return catalogsync.Applied(ctx, tx, a.Service, env.GetEpoch(), env.GetSeq(), a.Now())
}

func upsert(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	if env.GetType() == eventsv1.TypeProgramUpserted {
		var p eventsv1.Program
		if err := proto.Unmarshal(env.GetPayload(), &p); err != nil {
			return fmt.Errorf("decode program event %s: %w", env.GetId(), err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO programs (id, advertiser_id, catalog_seq) VALUES ($1, $2, $3)
			ON CONFLICT (id) DO UPDATE SET advertiser_id = EXCLUDED.advertiser_id, catalog_seq = EXCLUDED.catalog_seq
			WHERE programs.catalog_seq < EXCLUDED.catalog_seq`, p.GetId(), p.GetAdvertiserId(), env.GetSeq()); err != nil {
			return fmt.Errorf("upsert program %d: %w", p.GetId(), err)
		}
		return nil
	}
	if env.GetType() == eventsv1.TypeAPIKeyUpserted {
		return catalogsync.UpsertAPIKey(ctx, tx, env)
	}
	if catalogsync.ConsoleEvent(env) {
		return catalogsync.ApplyConsole(ctx, tx, env)
	}
	// Other catalog events are not kept here; they still advance the
	// watermark.
	return nil
}
