package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/outbox/inbox"
	"github.com/svc-dev/svc/libs/outbox/internal/testenv"
	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// enqueueBulk commits n events on tp in one transaction, spread over keys
// 1..keys with ascending seqs per key, and returns them.
func enqueueBulk(t *testing.T, e *testenv.Env, tp string, n, keys int) []*eventsv1.Envelope {
	t.Helper()
	ctx := testenv.Ctx(t)
	envs := make([]*eventsv1.Envelope, n)
	for i := range envs {
		envs[i] = testenv.Envelope("test.bulk", int64(i%keys+1), int64(i/keys+1))
	}
	err := pg.InTx(ctx, e.Pool, func(tx pgx.Tx) error {
		for chunk := range slices.Chunk(envs, 2000) {
			if err := outbox.EnqueueMany(ctx, tx, tp, chunk); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("enqueue %d events: %v", n, err)
	}
	return envs
}

// startEffects consumes tp through an inbox named name whose handler
// inserts one row per applied event into effects (no unique key there, so
// an event applied twice shows as two rows).
func startEffects(t *testing.T, e *testenv.Env, name, tp string) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	reader := kafkakit.NewReader(e.Brokers, name, tp)
	t.Cleanup(func() { _ = reader.Close() })
	c, err := inbox.NewConsumer(e.Pool, reader, inbox.ConsumerConfig{
		Name:       name,
		Registerer: reg,
		// Kept short: the drills terminate the consumer's connections too.
		MaxBackoff: 200 * time.Millisecond,
		Handler: func(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
			_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1, $2, $3)`, env.Id, env.ProgramId, env.Seq)
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Go(t, c.Run)
	return reg
}

// waitAppliedOnce waits until the consumer has taken every record of tp
// and checks that each of the n events had its effect exactly once.
func waitAppliedOnce(t *testing.T, e *testenv.Env, checker *pgx.Conn, reg *prometheus.Registry, name, tp string, n int) {
	t.Helper()
	records := e.TopicSize(t, tp)
	if records < int64(n) {
		t.Fatalf("topic holds %d records, want at least the %d events", records, n)
	}
	testenv.Eventually(t, 60*time.Second, "every record consumed", func() bool {
		return testenv.Metric(t, reg, "consumer_applied_total", "consumer", name) == float64(records)
	})
	if d := testenv.CountOn(t, checker, `SELECT count(DISTINCT event_id) FROM effects`); d != n {
		t.Fatalf("%d distinct events applied, want %d", d, n)
	}
	if c := testenv.CountOn(t, checker, `SELECT count(*) FROM effects`); c != n {
		t.Fatalf("%d effects for %d events: some applied twice", c, n)
	}
	t.Logf("%d events, %d records in Kafka (%d published again), each applied once", n, records, records-int64(n))
}

// Per-key order holds for a row committed late (its transaction open while
// the relay published more than the old fixed lookback of 10,000 ids past
// it), whether its transaction opened while the relay ran (a gap the relay
// waits for) or before the relay started (the session's start is waited
// for as a whole). The clock is frozen, so no periodic full scan comes to
// the rescue: without gap tracking the later row of the key is published
// first.
func TestRelayOrderHoldsForALateCommitFarBehindTheCursor(t *testing.T) {
	t.Parallel()
	const (
		keyTopic = "test.order.key.v1" // only key 99's two rows: its partition order is theirs
		bulk     = 10_500              // past the old 10,000-id lookback
	)
	tests := []struct {
		name string
		// heldBeforeStart opens the held transaction before the relay starts.
		heldBeforeStart bool
	}{
		{name: "transaction opened while the relay runs (a gap)"},
		{name: "transaction open when the relay starts", heldBeforeStart: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := testenv.New(t, topic, keyTopic)
			ctx := testenv.Ctx(t)
			clock := testenv.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			first := testenv.Envelope("test.key", 99, 1)
			var held pgx.Tx
			hold := func() {
				var err error
				if held, err = e.Pool.Begin(ctx); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = held.Rollback(context.Background()) })
				if _, err := outbox.Enqueue(ctx, held, keyTopic, first); err != nil {
					t.Fatal(err)
				}
			}

			if tt.heldBeforeStart {
				hold()
				startRelay(t, e, relayOpts{now: clock.Now, poll: 20 * time.Millisecond})
			} else {
				startRelay(t, e, relayOpts{now: clock.Now, poll: 20 * time.Millisecond})
				e.Enqueue(t, topic, testenv.Envelope("test.warmup", 1, 0))
				testenv.Eventually(t, 30*time.Second, "warm-up row sent", func() bool { return unsent(t, e) == 0 })
				// Past the session's start hold: from here only the gap
				// keeps the held row's place.
				clock.Advance(6 * time.Minute)
				hold()
			}
			enqueueBulk(t, e, topic, bulk, 50)
			testenv.Eventually(t, 60*time.Second, "bulk rows sent", func() bool { return unsent(t, e) == 0 })

			if err := held.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			// Begins after the first committed: causally after it.
			second := testenv.Envelope("test.key", 99, 2)
			e.Enqueue(t, keyTopic, second)

			r := kafkakit.NewReader(e.Brokers, "order-check", keyTopic)
			defer r.Close()
			for _, want := range []*eventsv1.Envelope{first, second} {
				fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				m, err := r.FetchMessage(fctx)
				cancel()
				if err != nil {
					t.Fatalf("waiting for seq %d: %v", want.Seq, err)
				}
				if got := testenv.Decode(t, m); got.Id != want.Id {
					t.Fatalf("key 99 partition: seq %d where seq %d belongs", got.Seq, want.Seq)
				}
			}
			testenv.Eventually(t, 30*time.Second, "all rows marked", func() bool { return unsent(t, e) == 0 })
		})
	}
}

// Drill: the active relay loses its lock connection while it drains full
// batches (a network cut, an operator's pg_terminate_backend). It must not
// publish one more batch: the standby has the lock now. The batch it had
// published but not marked is published again by the standby, and every
// event is applied exactly once through an inbox.
func TestDrillLockLossDuringAFullBatchDrain(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	ctx := testenv.Ctx(t)
	checker := e.Conn(t)
	const rows, batch = 3000, 50

	var (
		mu          sync.Mutex
		batchesA    int
		killedBatch []int64 // published by A just before its lock went
		afterKill   [][]int64
		hookErr     error
		published   = map[int64]int{}
	)
	// A's hook kills A's own lock connection after its third batch was
	// written to Kafka, and waits for the backend to be gone: any batch A
	// publishes after that ran without the lock.
	hookA := func(ids []int64) error {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			published[id]++
		}
		if killedBatch != nil {
			afterKill = append(afterKill, ids)
			return nil
		}
		if batchesA++; batchesA == 3 {
			n, err := testenv.TerminateRelayLockHolder(ctx, e.Pool)
			if err == nil && n != 1 {
				err = fmt.Errorf("terminated %d lock holders, want 1", n)
			}
			hookErr = err
			killedBatch = ids
		}
		return nil
	}
	hookB := func(ids []int64) error {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			published[id]++
		}
		return nil
	}

	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	// An hour of backoff: once A's session ends, A stays out of the race for
	// the lock, so whatever it publishes afterwards is a violation.
	_, doneA := startRelay(t, e, relayOpts{reg: regA, batch: batch, afterPublish: hookA, errorBackoff: time.Hour})
	testenv.Eventually(t, 10*time.Second, "relay A active", func() bool { return testenv.Metric(t, regA, "outbox_relay_active") == 1 })
	startRelay(t, e, relayOpts{reg: regB, batch: batch, afterPublish: hookB})
	effects := startEffects(t, e, "drill-lock-loss", topic)

	enqueueBulk(t, e, topic, rows, 20)
	testenv.Eventually(t, 60*time.Second, "every row sent", func() bool {
		return testenv.CountOn(t, checker, `SELECT count(*) FROM outbox WHERE sent_at IS NULL`) == 0
	})

	mu.Lock()
	if hookErr != nil || killedBatch == nil {
		t.Fatalf("killing A's lock connection: %v (killed: %v)", hookErr, killedBatch != nil)
	}
	if len(afterKill) > 0 {
		t.Fatalf("relay A published %d batches after its lock connection died (first ids %v)", len(afterKill), afterKill[0])
	}
	for _, id := range killedBatch {
		if published[id] < 2 {
			t.Fatalf("row %d of the batch A could not mark was published %d times, want again by B", id, published[id])
		}
	}
	var ids []int64
	if err := pgx.BeginFunc(ctx, checker, func(tx pgx.Tx) error {
		r, err := tx.Query(ctx, `SELECT id FROM outbox`)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(r, pgx.RowTo[int64])
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if published[id] == 0 {
			t.Fatalf("row %d marked sent but never seen published", id)
		}
	}
	mu.Unlock()
	if len(ids) != rows {
		t.Fatalf("%d outbox rows, want %d", len(ids), rows)
	}
	if v := testenv.Metric(t, regA, "outbox_relay_active"); v != 0 {
		t.Fatalf("relay A still reports itself active (%v)", v)
	}
	if testenv.Metric(t, regB, "outbox_relay_active") != 1 {
		t.Fatal("relay B did not take over")
	}
	select {
	case err := <-doneA:
		t.Fatalf("relay A's Run returned %v; a lost lock must only end the session", err)
	default:
	}
	waitAppliedOnce(t, e, checker, effects, "drill-lock-loss", topic, rows)
}

// Drill: every backend of the database (the relay's lock connection, its
// pool's connections, the consumer's) is terminated several times while the
// relay drains. Run never returns, every row ends sent, every event is in
// Kafka at least once and applied exactly once through an inbox.
func TestDrillRelaySurvivesConnectionKillsMidBatch(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	checker := e.Conn(t)
	const rows, wantKills = 6000, 5
	enqueueBulk(t, e, topic, rows, 20)
	reg := prometheus.NewRegistry()
	_, done := startRelay(t, e, relayOpts{reg: reg, batch: 50})
	effects := startEffects(t, e, "drill-kills", topic)

	sentRows := func() int {
		return testenv.CountOn(t, checker, `SELECT count(*) FROM outbox WHERE sent_at IS NOT NULL`)
	}
	kills, lastKill := 0, 0
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("%d kills while the relay drains", wantKills), func() bool {
		sent := sentRows()
		if sent == rows {
			return true
		}
		if sent >= lastKill+300 {
			n := testenv.TerminateOthers(t, checker)
			kills++
			lastKill = sent
			t.Logf("kill %d at %d rows sent: %d backends terminated", kills, sent, n)
		}
		return kills == wantKills
	})
	if kills < 3 {
		t.Fatalf("only %d kills before the relay finished: the drill did not strike mid-drain", kills)
	}
	testenv.Eventually(t, 60*time.Second, "every row sent", func() bool { return sentRows() == rows })
	select {
	case err := <-done:
		t.Fatalf("Run returned %v, want it to survive", err)
	default:
	}
	waitAppliedOnce(t, e, checker, effects, "drill-kills", topic, rows)
	if v := testenv.Metric(t, reg, "outbox_publish_errors_total"); v < 1 {
		t.Errorf("outbox_publish_errors_total = %v: the kills went unnoticed", v)
	}
}
