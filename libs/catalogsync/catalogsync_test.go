package catalogsync_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

func setup(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := outbox.Migrate(ctx, dsn, "replica", logger); err != nil {
		t.Fatal(err)
	}
	if err := catalogsync.Migrate(ctx, dsn, "replica", logger); err != nil {
		t.Fatal(err)
	}
	pool, err := pg.NewPool(ctx, dsn, pg.Options{Schema: "replica", MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func apply(t *testing.T, pool *pgxpool.Pool, seq int64) {
	t.Helper()
	applyEpoch(t, pool, "epoch-a", seq)
}

func applyEpoch(t *testing.T, pool *pgxpool.Pool, epoch string, seq int64) {
	t.Helper()
	err := pg.InTx(context.Background(), pool, func(tx pgx.Tx) error {
		return catalogsync.Applied(context.Background(), tx, "tracking", epoch, seq, time.Unix(1700000000, 0))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// acks returns the acknowledged sequences in the order they were written.
func acks(t *testing.T, pool *pgxpool.Pool) []int64 {
	t.Helper()
	var out []int64
	for _, a := range epochAcks(t, pool) {
		out = append(out, a.GetSeq())
	}
	return out
}

// epochAcks returns the acknowledgements in the order they were written.
func epochAcks(t *testing.T, pool *pgxpool.Pool) []*eventsv1.CatalogApplied {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT payload FROM outbox WHERE topic = $1 ORDER BY id`, eventsv1.TopicCatalogApplied)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []*eventsv1.CatalogApplied
	for rows.Next() {
		var payload []byte
		if err := rows.Scan(&payload); err != nil {
			t.Fatal(err)
		}
		var env eventsv1.Envelope
		if err := proto.Unmarshal(payload, &env); err != nil {
			t.Fatal(err)
		}
		var ack eventsv1.CatalogApplied
		if err := proto.Unmarshal(env.GetPayload(), &ack); err != nil {
			t.Fatal(err)
		}
		if ack.GetService() != "tracking" || env.GetType() != eventsv1.TypeCatalogApplied {
			t.Fatalf("ack %v %s", &ack, env.GetType())
		}
		out = append(out, &ack)
	}
	return out
}

func TestWatermarkWaitsForGaps(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	steps := []struct {
		apply     int64
		watermark int64
	}{
		{2, 0}, // 1 not applied yet: nothing to acknowledge
		{3, 0},
		{1, 3}, // the gap fills: the whole run 1..3 is acknowledged at once
		{3, 3}, // a redelivered number changes nothing
		{5, 3},
		{4, 5},
		{0, 5}, // events outside the catalog sequence are ignored
	}
	for _, s := range steps {
		apply(t, pool, s.apply)
		wm, err := catalogsync.Watermark(context.Background(), pool)
		if err != nil {
			t.Fatal(err)
		}
		if wm != s.watermark {
			t.Fatalf("after applying %d: watermark %d, want %d", s.apply, wm, s.watermark)
		}
	}
	got := acks(t, pool)
	if len(got) != 2 || got[0] != 3 || got[1] != 5 {
		t.Fatalf("acks %v, want [3 5]", got)
	}
	var pending int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM catalog_applied`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending != 0 {
		t.Fatalf("%d applied numbers kept below the watermark", pending)
	}
}

func TestRolledBackApplyLeavesNoTrace(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	err := pg.InTx(context.Background(), pool, func(tx pgx.Tx) error {
		if err := catalogsync.Applied(context.Background(), tx, "tracking", "epoch-a", 1, time.Now()); err != nil {
			return err
		}
		return context.Canceled // the effect failed: everything rolls back
	})
	if err == nil {
		t.Fatal("expected the transaction to fail")
	}
	if wm, _ := catalogsync.Watermark(context.Background(), pool); wm != 0 {
		t.Fatalf("watermark %d after rollback", wm)
	}
	if got := acks(t, pool); len(got) != 0 {
		t.Fatalf("acks %v after rollback", got)
	}
}

// A catalog rebuilt on a new accounts database numbers from 1 again under a
// new epoch; events of the earlier database still in the broker must neither
// hold the new count back nor be acknowledged as the new database's.
func TestEpochsCountApart(t *testing.T) {
	t.Parallel()
	pool := setup(t)
	for _, seq := range []int64{1, 2, 3, 4} {
		applyEpoch(t, pool, "old", seq)
	}
	applyEpoch(t, pool, "new", 1)
	applyEpoch(t, pool, "old", 5) // a late event of the earlier database
	applyEpoch(t, pool, "new", 2)
	if wm, err := catalogsync.Watermark(context.Background(), pool); err != nil || wm != 2 {
		t.Fatalf("watermark %d %v, want 2 (the epoch that advanced last)", wm, err)
	}
	var got []string
	for _, a := range epochAcks(t, pool) {
		got = append(got, fmt.Sprintf("%s/%d", a.GetEpoch(), a.GetSeq()))
	}
	if want := "[old/1 old/2 old/3 old/4 new/1 old/5 new/2]"; fmt.Sprint(got) != want {
		t.Fatalf("acks %v, want %s", got, want)
	}
}
