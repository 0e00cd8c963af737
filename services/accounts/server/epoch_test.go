package server_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/accounts/internal/catalog/pgstore"
)

// The sync barrier counts only acknowledgements of this database's epoch:
// acks an earlier database left in the broker (a second clone, a recreated
// local database) carry another epoch and must not open the barrier.
func TestCatalogEventsCarryTheEpochAndForeignAcksCountForNothing(t *testing.T) {
	t.Parallel()
	s := start(t, map[string]string{"CATALOG_CONSUMERS": "replica-x"})
	ctx := context.Background()
	r := s.admin("POST", "/admin/v1/advertisers", `{"name":"Epoch","email":"epoch@brand.example"}`)
	if r.status != 201 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	var epoch string
	if err := s.pool.QueryRow(ctx, `SELECT epoch FROM catalog_seq`).Scan(&epoch); err != nil || len(epoch) != 36 {
		t.Fatalf("epoch %q %v", epoch, err)
	}
	var payload []byte
	if err := s.pool.QueryRow(ctx, `SELECT payload FROM outbox WHERE topic = $1 ORDER BY id DESC LIMIT 1`, eventsv1.TopicCatalog).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	var env eventsv1.Envelope
	if err := proto.Unmarshal(payload, &env); err != nil {
		t.Fatal(err)
	}
	if env.GetEpoch() != epoch || env.GetSeq() < 1 {
		t.Fatalf("catalog event epoch %q seq %d, want epoch %q", env.GetEpoch(), env.GetSeq(), epoch)
	}

	record := func(ackEpoch string, seq int64) bool {
		t.Helper()
		var counted bool
		err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			counted, err = pgstore.RecordAck(ctx, tx, "replica-x", ackEpoch, seq)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return counted
	}
	ackOf := func() int64 {
		t.Helper()
		var seq int64
		err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT seq FROM catalog_acks WHERE service = 'replica-x'), 0)`).Scan(&seq)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	if record("00000000-0000-4000-8000-000000000000", 1000) || ackOf() != 0 {
		t.Fatalf("a foreign epoch's ack was counted: %d", ackOf())
	}
	if record("", 1000) || ackOf() != 0 {
		t.Fatalf("an ack without epoch was counted: %d", ackOf())
	}
	// The barrier: seq 1 was acknowledged only under foreign epochs so far.
	if r := s.admin("GET", "/admin/v1/catalog/sync?seq=1&timeout=200ms", ""); r.status != 504 {
		t.Fatalf("barrier opened on foreign acks: %d %s", r.status, r.raw)
	}
	if !record(epoch, 1) || ackOf() != 1 {
		t.Fatalf("this epoch's ack was not counted: %d", ackOf())
	}
	if r := s.admin("GET", "/admin/v1/catalog/sync?seq=1&timeout=5s", ""); r.status != 200 {
		t.Fatalf("barrier closed after this epoch's ack: %d %s", r.status, r.raw)
	}
}
