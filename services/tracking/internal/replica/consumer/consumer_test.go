package consumer_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/tracking/internal/replica/consumer"
	"github.com/svc-dev/svc/services/tracking/migrations"
)

func setup(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, m := range []func() error{
		func() error { return pg.Migrate(ctx, dsn, "tracking", migrations.FS, logger) },
		func() error { return outbox.Migrate(ctx, dsn, "tracking", logger) },
		func() error { return catalogsync.Migrate(ctx, dsn, "tracking", logger) },
	} {
		if err := m(); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := pg.NewPool(ctx, dsn, pg.Options{Schema: "tracking", MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func envelope(t *testing.T, typ string, seq int64, msg proto.Message) *eventsv1.Envelope {
	t.Helper()
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return &eventsv1.Envelope{Id: outbox.NewEventID(), Type: typ, Seq: seq, Payload: b, OccurredAt: timestamppb.Now()}
}

func applyAll(t *testing.T, pool *pgxpool.Pool, envs ...*eventsv1.Envelope) {
	t.Helper()
	a := consumer.Applier{Service: "tracking", Now: time.Now}
	for _, env := range envs {
		if err := pg.InTx(context.Background(), pool, func(tx pgx.Tx) error { return a.Apply(context.Background(), tx, env) }); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOlderEventNeverOverwritesNewer(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	on := envelope(t, "catalog.link.upserted", 2, &eventsv1.Link{Id: 7, ProgramId: 1, PartnerId: 3, Code: "A", Active: true})
	off := envelope(t, "catalog.link.upserted", 3, &eventsv1.Link{Id: 7, ProgramId: 1, PartnerId: 3, Code: "A", Active: false})
	other := envelope(t, "catalog.partner.upserted", 1, &eventsv1.Partner{Id: 3, Name: "P"})
	// The later event (seq 3) arrives first, as it can from another partition
	// or a redelivery.
	applyAll(t, pool, off, on, other)
	var active bool
	var seq int64
	if err := pool.QueryRow(context.Background(), `SELECT active, catalog_seq FROM links WHERE id = 7`).Scan(&active, &seq); err != nil {
		t.Fatal(err)
	}
	if active || seq != 3 {
		t.Fatalf("link active=%v seq=%d, want the seq-3 snapshot (inactive)", active, seq)
	}
	wm, err := catalogsync.Watermark(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if wm != 3 {
		t.Fatalf("watermark %d, want 3: events tracking does not keep still count", wm)
	}
}

func TestProgramKeyAndEnrolmentSnapshots(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	deadline := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	applyAll(t, pool,
		envelope(t, "catalog.program.upserted", 1, &eventsv1.Program{Id: 5, AdvertiserId: 2, AttributionWindowDays: 60,
			LeadAuthPolicy: "server_required", PaymentTrackingMode: "processor_connect",
			ProcessorConnection: &eventsv1.ProcessorConnection{Status: "not_connected"}, UpdatedAt: timestamppb.Now()}),
		envelope(t, "catalog.api_key.upserted", 2, &eventsv1.ApiKey{Id: 9, ProgramId: 5, KeyHash: []byte{1, 2, 3}, Test: true}),
		envelope(t, "catalog.api_key.upserted", 3, &eventsv1.ApiKey{Id: 9, ProgramId: 5, KeyHash: []byte{1, 2, 3}, Test: true,
			RotationMarkedAt: timestamppb.Now(), RotationDeadline: timestamppb.New(deadline)}),
		envelope(t, "catalog.partner_program.upserted", 4, &eventsv1.PartnerProgram{Id: 4, PartnerId: 3, ProgramId: 5, Approved: true, CreatedAt: timestamppb.Now()}),
	)
	var policy string
	var origins []string
	if err := pool.QueryRow(context.Background(), `SELECT lead_auth_policy, allowed_origins FROM programs WHERE id = 5`).Scan(&policy, &origins); err != nil {
		t.Fatal(err)
	}
	if policy != "server_required" || origins == nil || len(origins) != 0 {
		t.Fatalf("program %q %v", policy, origins)
	}
	var got *time.Time
	if err := pool.QueryRow(context.Background(), `SELECT rotation_deadline FROM api_keys WHERE id = 9`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got == nil || !got.Equal(deadline) {
		t.Fatalf("rotation deadline %v, want %v", got, deadline)
	}
	var approved bool
	if err := pool.QueryRow(context.Background(), `SELECT approved FROM partner_programs WHERE id = 4`).Scan(&approved); err != nil || !approved {
		t.Fatalf("partner-program approved=%v err=%v", approved, err)
	}
}
