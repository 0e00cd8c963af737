package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/libs/kafkakit"

	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/outbox/internal/testenv"
	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

func TestEnqueueRefusesAPayloadOverTheLimit(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	ctx := testenv.Ctx(t)
	big := func(n int) *eventsv1.Envelope {
		return &eventsv1.Envelope{Type: "test.big", ProgramId: 1, Payload: bytes.Repeat([]byte{'x'}, n)}
	}
	tests := []struct {
		name    string
		env     *eventsv1.Envelope
		opts    []outbox.EnqueueOption
		wantErr bool
	}{
		{name: "under the default limit is written", env: big(800 << 10)},
		{name: "over the default limit (900 KiB) is refused", env: big(900 << 10), wantErr: true},
		{name: "over a configured limit is refused", env: big(2000), opts: []outbox.EnqueueOption{outbox.WithMaxPayloadBytes(1000)}, wantErr: true},
		{name: "a raised limit admits more", env: big(1000 << 10), opts: []outbox.EnqueueOption{outbox.WithMaxPayloadBytes(2 << 20)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Count(t, `SELECT count(*) FROM outbox`)
			err := pg.InTx(ctx, e.Pool, func(tx pgx.Tx) error {
				_, err := outbox.Enqueue(ctx, tx, topic, tt.env, tt.opts...)
				return err
			})
			if got := errors.Is(err, outbox.ErrTooLarge); got != tt.wantErr {
				t.Fatalf("err = %v, want ErrTooLarge: %v", err, tt.wantErr)
			}
			if !tt.wantErr && err != nil {
				t.Fatal(err)
			}
			want := before
			if !tt.wantErr {
				want++
			}
			if n := e.Count(t, `SELECT count(*) FROM outbox`); n != want {
				t.Fatalf("outbox rows = %d, want %d", n, want)
			}
		})
	}
	t.Run("EnqueueMany refuses the whole batch", func(t *testing.T) {
		err := pg.InTx(ctx, e.Pool, func(tx pgx.Tx) error {
			return outbox.EnqueueMany(ctx, tx, topic, []*eventsv1.Envelope{big(10), big(1 << 20)})
		})
		if !errors.Is(err, outbox.ErrTooLarge) {
			t.Fatalf("err = %v, want ErrTooLarge", err)
		}
	})
}

// enqueueBig commits env with the payload limit lifted: a row as an older
// release (or a bypassing writer) could have left, which the broker refuses.
func enqueueBig(t *testing.T, e *testenv.Env, tp string, env *eventsv1.Envelope) int64 {
	t.Helper()
	ctx := testenv.Ctx(t)
	var id int64
	err := pg.InTx(ctx, e.Pool, func(tx pgx.Tx) error {
		var err error
		id, err = outbox.Enqueue(ctx, tx, tp, env, outbox.WithMaxPayloadBytes(8<<20))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// readInOrder fetches n messages and checks that each program's seqs come
// in order without gaps or repeats, starting after last[program].
func readInOrder(t *testing.T, ctx context.Context, r *kafka.Reader, n int, last map[int64]int64) {
	t.Helper()
	for range n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		env := testenv.Decode(t, m)
		if string(m.Key) != strconv.FormatInt(env.ProgramId, 10) {
			t.Fatalf("key %q for program %d", m.Key, env.ProgramId)
		}
		if env.Seq != last[env.ProgramId]+1 {
			t.Fatalf("program %d: seq %d after %d", env.ProgramId, env.Seq, last[env.ProgramId])
		}
		last[env.ProgramId] = env.Seq
	}
}

// Drill 3: a poison row (over the broker's message size) among healthy rows
// of other keys is parked, the parked gauge says 1, every other key's rows
// are delivered once and in order, the same key's later rows wait behind it,
// and after the row is fixed and unparked its key is delivered in order.
func TestDrillPoisonRowIsParkedAndOthersFlow(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	ctx := testenv.Ctx(t)
	reg := prometheus.NewRegistry()
	const healthy = 12 // seqs of programs 1 and 2
	var poisonID int64
	poison := testenv.Envelope("test.seq", 3, 2)
	for s := int64(1); s <= healthy; s++ {
		e.Enqueue(t, topic, testenv.Envelope("test.seq", 1, s))
		e.Enqueue(t, topic, testenv.Envelope("test.seq", 2, s))
		switch s {
		case 1, 3, 4: // program 3: seq 1 before the poison row, 3 and 4 after it
			e.Enqueue(t, topic, testenv.Envelope("test.seq", 3, min(s, 4)))
		case 2:
			big := proto.Clone(poison).(*eventsv1.Envelope)
			big.Payload = bytes.Repeat([]byte{'x'}, 2<<20) // over the writer's and broker's 1 MiB
			poisonID = enqueueBig(t, e, topic, big)
		}
	}
	start := time.Now()
	startRelay(t, e, relayOpts{reg: reg, batch: 7})

	r := kafkakit.NewReader(e.Brokers, "drill-poison", topic)
	defer r.Close()
	last := map[int64]int64{}
	readInOrder(t, ctx, r, 2*healthy+1, last)
	testenv.Eventually(t, 30*time.Second, "poison row parked, gauges set", func() bool {
		return testenv.Metric(t, reg, "outbox_parked") == 1 && testenv.Metric(t, reg, "outbox_held") == 2 &&
			testenv.Metric(t, reg, "outbox_backlog") == 0
	})
	t.Logf("parked and others delivered in %v", time.Since(start).Round(time.Millisecond))
	if last[1] != healthy || last[2] != healthy || last[3] != 1 {
		t.Fatalf("delivered up to %v, want programs 1 and 2 to %d and program 3 to 1", last, healthy)
	}
	if n := e.Count(t, `SELECT count(*) FROM outbox WHERE id = $1 AND parked_at IS NOT NULL AND sent_at IS NULL AND park_reason <> ''`, poisonID); n != 1 {
		t.Fatal("the poison row is not parked with a reason")
	}
	if n := e.Count(t, `SELECT count(*) FROM outbox WHERE key = '3' AND id > $1 AND parked_at IS NOT NULL AND park_reason = 'held behind parked row ' || $1`, poisonID); n != 2 {
		t.Fatalf("%d rows of the key held behind the poison row, want 2", n)
	}
	if n := testenv.Metric(t, reg, "outbox_parked_total"); n != 1 {
		t.Fatalf("outbox_parked_total = %v, want 1", n)
	}
	if n := e.TopicSize(t, topic); n != 2*healthy+1 {
		t.Fatalf("topic holds %d, want %d (each healthy row once)", n, 2*healthy+1)
	}

	// The operator fixes the event (here: shrinks it) and replays the key.
	small, err := proto.Marshal(poison)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `UPDATE outbox SET payload = $1 WHERE id = $2`, small, poisonID); err != nil {
		t.Fatal(err)
	}
	n, err := outbox.Unpark(ctx, e.Pool, testenv.Schema, []int64{poisonID})
	if err != nil || n != 3 {
		t.Fatalf("Unpark = %d, %v; want the row and the 2 held behind it", n, err)
	}
	readInOrder(t, ctx, r, 3, last)
	testenv.Eventually(t, 30*time.Second, "parked gauges back to 0", func() bool {
		return testenv.Metric(t, reg, "outbox_parked") == 0 && testenv.Metric(t, reg, "outbox_held") == 0
	})
	if last[3] != 4 || unsent(t, e) != 0 {
		t.Fatalf("program 3 delivered to %d, %d unsent", last[3], unsent(t, e))
	}
}

// A row whose topic stays unknown is retried (not parked) until
// ParkMissingTopicAfter, then parked while other topics flow; once the topic
// exists, Unpark with no ids replays it.
func TestRelayParksARowWhoseTopicStaysMissing(t *testing.T) {
	t.Parallel()
	const missing = "test.never.created.v1"
	e := testenv.New(t, topic)
	ctx := testenv.Ctx(t)
	reg := prometheus.NewRegistry()
	w := kafkakit.NewWriter(e.Brokers)
	w.MaxAttempts = 1
	w.Transport = &kafka.Transport{MetadataTTL: 50 * time.Millisecond}
	t.Cleanup(func() { _ = w.Close() })
	e.Enqueue(t, missing, testenv.Envelope("test.seq", 7, 1))
	for s := int64(1); s <= 3; s++ {
		e.Enqueue(t, topic, testenv.Envelope("test.seq", 8, s))
	}
	startRelay(t, e, relayOpts{reg: reg, writer: w, parkMissing: 300 * time.Millisecond})

	testenv.Eventually(t, 30*time.Second, "row of the missing topic parked, others sent", func() bool {
		return testenv.Metric(t, reg, "outbox_parked") == 1 && unsent(t, e) == 1
	})
	if n := testenv.Metric(t, reg, "outbox_publish_errors_total"); n < 1 {
		t.Fatalf("publish errors = %v: parked without being retried first", n)
	}
	if n := e.TopicSize(t, topic); n != 3 {
		t.Fatalf("topic holds %d, want 3", n)
	}
	if err := kafkakit.EnsureTopics(ctx, e.Brokers, []kafkakit.TopicSpec{{Name: missing, Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	if n, err := outbox.Unpark(ctx, e.Pool, testenv.Schema, nil); err != nil || n != 1 {
		t.Fatalf("Unpark = %d, %v", n, err)
	}
	testenv.Eventually(t, 30*time.Second, "replayed row published", func() bool { return unsent(t, e) == 0 })
	if n := e.TopicSize(t, missing); n != 1 {
		t.Fatalf("topic holds %d, want 1", n)
	}
}

func TestUnparkValidatesSchema(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	if _, err := outbox.Unpark(testenv.Ctx(t), e.Pool, "Bad-Schema", nil); err == nil {
		t.Fatal("accepted")
	}
}

// Discard drops a parked row; the relay then releases the rows held behind
// it (and any row held behind a row that is parked no longer) in order.
func TestDiscardReleasesTheRowsHeldBehind(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	ctx := testenv.Ctx(t)
	reg := prometheus.NewRegistry()
	e.Enqueue(t, topic, testenv.Envelope("test.seq", 5, 1))
	big := testenv.Envelope("test.seq", 5, 99)
	big.Payload = bytes.Repeat([]byte{'x'}, 2<<20)
	poisonID := enqueueBig(t, e, topic, big)
	e.Enqueue(t, topic, testenv.Envelope("test.seq", 5, 2))
	e.Enqueue(t, topic, testenv.Envelope("test.seq", 5, 3))
	// Held behind a row that is no longer parked (an Unpark that raced a batch).
	orphan := e.Enqueue(t, topic, testenv.Envelope("test.seq", 6, 1))
	if _, err := e.Pool.Exec(ctx, `UPDATE outbox SET parked_at = now(), park_reason = 'held behind parked row 1' WHERE id = $1`, orphan); err != nil {
		t.Fatal(err)
	}
	startRelay(t, e, relayOpts{reg: reg})

	r := kafkakit.NewReader(e.Brokers, "discard-check", topic)
	defer r.Close()
	last := map[int64]int64{}
	readInOrder(t, ctx, r, 2, last) // program 5 seq 1, program 6 seq 1
	testenv.Eventually(t, 30*time.Second, "poison row parked", func() bool {
		return testenv.Metric(t, reg, "outbox_parked") == 1 && testenv.Metric(t, reg, "outbox_held") == 2
	})
	if n, err := outbox.Discard(ctx, e.Pool, testenv.Schema, []int64{poisonID, orphan}); err != nil || n != 1 {
		t.Fatalf("Discard = %d, %v; want the parked row only", n, err)
	}
	readInOrder(t, ctx, r, 2, last)
	testenv.Eventually(t, 30*time.Second, "nothing parked, nothing unsent", func() bool {
		return testenv.Metric(t, reg, "outbox_parked") == 0 && testenv.Metric(t, reg, "outbox_held") == 0 && unsent(t, e) == 0
	})
	if n := e.TopicSize(t, topic); n != 4 {
		t.Fatalf("topic holds %d, want 4", n)
	}
}

// With the writer's own size check lifted, the broker refuses the message
// (MessageSizeTooLarge) and the row is parked the same way.
func TestRelayParksARowTheBrokerRefuses(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	reg := prometheus.NewRegistry()
	w := kafkakit.NewWriter(e.Brokers)
	w.BatchBytes = 16 << 20
	t.Cleanup(func() { _ = w.Close() })
	big := testenv.Envelope("test.seq", 9, 1)
	big.Payload = bytes.Repeat([]byte{'x'}, 2<<20)
	id := enqueueBig(t, e, topic, big)
	e.Enqueue(t, topic, testenv.Envelope("test.seq", 10, 1))
	startRelay(t, e, relayOpts{reg: reg, writer: w})
	testenv.Eventually(t, 30*time.Second, "row parked, other key sent", func() bool {
		return testenv.Metric(t, reg, "outbox_parked") == 1 && unsent(t, e) == 1
	})
	var reason string
	if err := e.Pool.QueryRow(testenv.Ctx(t), `SELECT park_reason FROM outbox WHERE id = $1`, id).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	t.Logf("park_reason: %s", reason)
	if n := e.TopicSize(t, topic); n != 1 {
		t.Fatalf("topic holds %d, want 1", n)
	}
}
