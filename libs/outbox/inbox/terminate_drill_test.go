package inbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/outbox/inbox"
	"github.com/svc-dev/svc/libs/outbox/internal/testenv"
)

// Drill: while a consumer works through a backlog, every Postgres backend
// of its database but the drill's own is terminated, again each time
// another batch of effects appears: transactions die mid-flight, at
// COMMIT too (where the commit may have happened without its
// acknowledgement). Run never returns, nothing is dead-lettered, and every
// event is applied exactly once.
func TestDrillTerminatedConnectionsLoseAndDuplicateNothing(t *testing.T) {
	t.Parallel()
	const (
		drillTopic = "test.terminate.v1"
		group      = "terminate"
		events     = 2000
		killEvery  = 100 // effects between two rounds of terminations
	)
	e := testenv.New(t, drillTopic)
	ctx := testenv.Ctx(t)
	// The drill's own connection: it survives the terminations, as it
	// excludes itself, so it is the one to count with.
	cfg, err := pgx.ParseConfig(e.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = testenv.Schema
	drill, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drill.Close(context.Background()) })
	count := func(query string) int {
		t.Helper()
		var n int
		if err := drill.QueryRow(ctx, query).Scan(&n); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return n
	}

	w := kafkakit.NewWriter(e.Brokers, kafkakit.WithTopic(drillTopic))
	t.Cleanup(func() { _ = w.Close() })
	msgs := make([]kafka.Message, 0, events)
	for i := range events {
		msgs = append(msgs, message(t, testenv.Envelope("test.effect", int64(i%16), int64(i))))
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	h := &effectHandler{}
	reg := prometheus.NewRegistry()
	reader := kafkakit.NewReader(e.Brokers, group, drillTopic)
	t.Cleanup(func() { _ = reader.Close() })
	c, err := inbox.NewConsumer(e.Pool, reader, inbox.ConsumerConfig{
		Name: group, Registerer: reg, Handler: h.handle,
		// Few attempts and short pauses: an error wrongly taken for the
		// event's would dead-letter it quickly, and show.
		MaxAttempts: 2, Backoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopConsumer, done := testenv.Go(t, c.Run)
	running := func() {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("consumer Run returned %v while connections were being terminated", err)
		default:
		}
	}

	rounds, terminated := 0, 0
	for next := killEvery; next < events; next += killEvery {
		testenv.Eventually(t, 60*time.Second, "the next batch of effects", func() bool {
			running()
			return count(`SELECT count(*) FROM effects`) >= next
		})
		var n int
		if err := drill.QueryRow(ctx, `
			SELECT count(*) FROM (
				SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid()) k`).Scan(&n); err != nil {
			t.Fatalf("terminate backends: %v", err)
		}
		rounds++
		terminated += n
	}
	testenv.Eventually(t, 90*time.Second, "every event in the inbox", func() bool {
		running()
		return count(`SELECT count(*) FROM inbox WHERE consumer = 'terminate'`) == events
	})
	// A duplicate outcome is an event whose COMMIT went through but whose
	// acknowledgement was lost with the connection: the retry found its
	// inbox row.
	t.Logf("%d rounds terminated %d backends; %v failed attempts, %v duplicates", rounds, terminated,
		testenv.Metric(t, reg, "consumer_apply_errors_total", "consumer", group),
		testenv.Metric(t, reg, "consumer_applied_total", "consumer", group, "outcome", inbox.OutcomeDuplicate))
	if terminated < rounds {
		t.Fatalf("%d rounds terminated only %d backends: the drill hit nothing", rounds, terminated)
	}
	if n := count(`SELECT count(*) FROM effects`); n != events {
		t.Fatalf("effects = %d, want %d (one per event)", n, events)
	}
	if n := count(`SELECT count(DISTINCT event_id) FROM effects`); n != events {
		t.Fatalf("distinct events applied = %d, want %d", n, events)
	}
	if n := count(`SELECT count(*) FROM dead_letters`); n != 0 {
		t.Fatalf("dead letters = %d, want 0", n)
	}
	if v := testenv.Metric(t, reg, "consumer_dead_lettered_total", "consumer", group); v != 0 {
		t.Fatalf("consumer_dead_lettered_total = %v, want 0", v)
	}
	running()
	if err := stopConsumer(); err != nil {
		t.Fatalf("Run returned %v on cancellation, want nil", err)
	}
}
