// Package catalogsync is the consumer half of the catalog propagation
// barrier. Accounts numbers every catalog event with a gapless sequence; a
// service that keeps a replica of the catalog calls Applied inside the inbox
// transaction of each catalog event, and this package advances the service's
// contiguous watermark and acknowledges it on eventsv1.TopicCatalogApplied
// through the service's own outbox. Accounts collects the acknowledgements
// and answers GET /admin/v1/catalog/sync once every consumer has reached a
// sequence. README.md describes the protocol.
package catalogsync

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/libs/catalogsync/migrations"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// BatchSize is how many catalog events a replica applies in one
// transaction (platform.BatchEvents): each is still deduplicated by its
// inbox row and Applied advances the watermark event by event, but the
// commit, its WAL flush and the progress row's lock are paid once per
// batch. One transaction an event held a replica to about 100 events a
// second on a 2-core box (docs/benchmarks.md, bench-console), minutes
// for a brand that enrols thousands of partners.
const BatchSize = 100

// VersionTable is the goose version table of the progress tables, in the
// service's schema beside the service's own (goose_db_version) and the
// outbox's.
const VersionTable = "catalogsync_db_version"

// Migrate creates the progress tables in schema, with their own version
// table so they never collide with the service's migrations. A replica
// service lists it in its platform.Spec.ExtraMigrations.
func Migrate(ctx context.Context, dsn, schema string, logger *slog.Logger) error {
	if err := pg.Migrate(ctx, dsn, schema, migrations.FS, logger, pg.WithVersionTable(VersionTable)); err != nil {
		return fmt.Errorf("catalogsync: %w", err)
	}
	return nil
}

// Applied records that the catalog event numbered seq of epoch (the
// accounts database that numbered it, Envelope.epoch) has been applied in
// tx. When that extends the run of applied numbers starting at the epoch's
// watermark, the watermark moves and an acknowledgement naming the epoch is
// written to the outbox in tx. Each epoch counts on its own: events an
// earlier accounts database left in the broker neither advance nor hold back
// the current one.
func Applied(ctx context.Context, tx pgx.Tx, service, epoch string, seq int64, now time.Time) error {
	if seq <= 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO catalog_progress (epoch, watermark) VALUES ($1, 0) ON CONFLICT DO NOTHING`, epoch); err != nil {
		return fmt.Errorf("start catalog progress of epoch %q: %w", epoch, err)
	}
	var wm int64
	// The row lock serialises pods of one service applying in parallel.
	if err := tx.QueryRow(ctx, `SELECT watermark FROM catalog_progress WHERE epoch = $1 FOR UPDATE`, epoch).Scan(&wm); err != nil {
		return fmt.Errorf("lock catalog progress: %w", err)
	}
	if seq <= wm {
		return nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO catalog_applied (epoch, seq) VALUES ($1, $2) ON CONFLICT DO NOTHING`, epoch, seq); err != nil {
		return fmt.Errorf("record applied seq %d: %w", seq, err)
	}
	// The contiguous run from the watermark, walked one key probe a number:
	// each applied number is walked once (the run is trimmed below), where
	// looking for the run's end among every applied number above the
	// watermark cost a scan of all of them per event (20 ms at 13,000
	// applied ahead of a lagging partition: minutes for a brand enrolling
	// thousands of partners).
	var next int64
	err := tx.QueryRow(ctx, `
		WITH RECURSIVE run(seq) AS (
			SELECT $1::bigint
			UNION ALL
			SELECT r.seq + 1 FROM run r
			WHERE EXISTS (SELECT 1 FROM catalog_applied b WHERE b.epoch = $2 AND b.seq = r.seq + 1))
		SELECT max(seq) FROM run`, wm, epoch).Scan(&next)
	if err != nil {
		return fmt.Errorf("advance catalog watermark: %w", err)
	}
	if next == wm {
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE catalog_progress SET watermark = $2, updated_at = now() WHERE epoch = $1`, epoch, next); err != nil {
		return fmt.Errorf("store catalog watermark: %w", err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM catalog_applied WHERE epoch = $1 AND seq <= $2`, epoch, next); err != nil {
		return fmt.Errorf("trim applied seqs: %w", err)
	}
	payload, err := proto.Marshal(&eventsv1.CatalogApplied{Service: service, Seq: next, Epoch: epoch})
	if err != nil {
		return fmt.Errorf("marshal catalog ack: %w", err)
	}
	_, err = outbox.Enqueue(ctx, tx, eventsv1.TopicCatalogApplied, &eventsv1.Envelope{
		Id:         outbox.NewEventID(),
		Type:       eventsv1.TypeCatalogApplied,
		OccurredAt: timestamppb.New(now),
		Source:     service,
		Payload:    payload,
	})
	return err
}

// Watermark reads how far the catalog has been applied, in the epoch that
// advanced last (0 before any catalog event).
func Watermark(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int64, error) {
	var wm int64
	if err := q.QueryRow(ctx, `SELECT coalesce((SELECT watermark FROM catalog_progress ORDER BY updated_at DESC, watermark DESC LIMIT 1), 0)`).Scan(&wm); err != nil {
		return 0, fmt.Errorf("read catalog watermark: %w", err)
	}
	return wm, nil
}
