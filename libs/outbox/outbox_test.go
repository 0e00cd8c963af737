package outbox_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/outbox/inbox"
	"github.com/svc-dev/svc/libs/outbox/internal/testenv"
	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

const topic = "test.things.v1"

// Enqueue reads the process's propagator, as services install it in main.
func TestMain(m *testing.M) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	os.Exit(m.Run())
}

type relayOpts struct {
	reg          *prometheus.Registry
	now          func() time.Time
	poll         time.Duration
	batch        int
	afterPublish func([]int64) error
	writer       *kafka.Writer
	retention    time.Duration
	deleteSent   bool
	parkMissing  time.Duration
	errorBackoff time.Duration
}

func startRelay(t *testing.T, e *testenv.Env, o relayOpts) (stop func() error, done <-chan error) {
	t.Helper()
	if o.reg == nil {
		o.reg = prometheus.NewRegistry()
	}
	if o.poll == 0 {
		o.poll = 50 * time.Millisecond
	}
	if o.errorBackoff == 0 {
		o.errorBackoff = 20 * time.Millisecond
	}
	w := o.writer
	if w == nil {
		w = kafkakit.NewWriter(e.Brokers)
		t.Cleanup(func() { _ = w.Close() })
	}
	r, err := outbox.NewRelay(e.Pool, w, outbox.RelayConfig{
		Schema:            testenv.Schema,
		BatchSize:         o.batch,
		PollInterval:      o.poll,
		LockRetryInterval: 20 * time.Millisecond,
		ErrorBackoff:      o.errorBackoff,
		Retention:         o.retention,
		SweepInterval:     time.Minute,
		Registerer:        o.reg,
		Now:               o.now,
		AfterPublish:      o.afterPublish,
		DeleteSent:        o.deleteSent,

		ParkMissingTopicAfter: o.parkMissing,
	})
	if err != nil {
		t.Fatalf("NewRelay: %v", err)
	}
	return testenv.Go(t, r.Run)
}

func unsent(t *testing.T, e *testenv.Env) int {
	return e.Count(t, `SELECT count(*) FROM outbox WHERE sent_at IS NULL`)
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	ctx := testenv.Ctx(t)
	t.Run("is idempotent", func(t *testing.T) {
		if err := outbox.Migrate(ctx, e.DSN, testenv.Schema, nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("creates the tables and its own version table in the schema", func(t *testing.T) {
		n := e.Count(t, `SELECT count(*) FROM pg_tables WHERE schemaname = 'svc' AND tablename IN ('outbox', 'inbox', 'dead_letters', 'bus_db_version')`)
		if n != 4 {
			t.Fatalf("found %d of 4 tables", n)
		}
		if n := e.Count(t, `SELECT count(*) FROM pg_tables WHERE tablename = 'goose_db_version'`); n != 0 {
			t.Fatal("the outbox used the service's version table")
		}
	})
}

func TestEnqueue(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	ctx := testenv.Ctx(t)
	if _, err := e.Pool.Exec(ctx, `CREATE TABLE orders (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	errDomain := errors.New("domain failure")

	tests := []struct {
		name      string
		orderID   int
		fail      error
		wantOrder int
		wantEvent int
	}{
		{name: "domain write and event commit together", orderID: 1, wantOrder: 1, wantEvent: 1},
		{name: "rollback keeps neither the domain row nor the event", orderID: 2, fail: errDomain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := &eventsv1.Envelope{Type: "test.order.created", ProgramId: 42}
			err := pg.InTx(ctx, e.Pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO orders VALUES ($1)`, tt.orderID); err != nil {
					return err
				}
				if _, err := outbox.Enqueue(ctx, tx, topic, env); err != nil {
					return err
				}
				return tt.fail
			})
			if !errors.Is(err, tt.fail) {
				t.Fatalf("InTx: %v", err)
			}
			if !outbox.ValidUUID(env.Id) {
				t.Fatalf("Enqueue left id %q", env.Id)
			}
			if n := e.Count(t, `SELECT count(*) FROM orders WHERE id = $1`, tt.orderID); n != tt.wantOrder {
				t.Errorf("orders = %d, want %d", n, tt.wantOrder)
			}
			if n := e.Count(t, `SELECT count(*) FROM outbox WHERE event_id = $1 AND key = '42' AND topic = $2 AND event_type = 'test.order.created' AND sent_at IS NULL`, env.Id, topic); n != tt.wantEvent {
				t.Errorf("outbox rows = %d, want %d", n, tt.wantEvent)
			}
		})
	}

	t.Run("stores the caller's trace context", func(t *testing.T) {
		tid, _ := trace.TraceIDFromHex("0102030405060708090a0b0c0d0e0f10")
		sid, _ := trace.SpanIDFromHex("0102030405060708")
		tctx := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
		var got string
		err := pg.InTx(tctx, e.Pool, func(tx pgx.Tx) error {
			id, err := outbox.Enqueue(tctx, tx, topic, &eventsv1.Envelope{Type: "test.traced"})
			if err != nil {
				return err
			}
			return tx.QueryRow(tctx, `SELECT headers->>'traceparent' FROM outbox WHERE id = $1`, id).Scan(&got)
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := "00-" + tid.String() + "-" + sid.String() + "-01"; got != want {
			t.Fatalf("traceparent = %q, want %q", got, want)
		}
	})

	t.Run("notifies the schema's relay channel on commit only", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, e.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `LISTEN svc_outbox`); err != nil {
			t.Fatal(err)
		}
		_ = pg.InTx(ctx, e.Pool, func(tx pgx.Tx) error {
			if _, err := outbox.Enqueue(ctx, tx, topic, &eventsv1.Envelope{Type: "test.rolled.back"}); err != nil {
				return err
			}
			return errDomain
		})
		e.Enqueue(t, topic, &eventsv1.Envelope{Type: "test.committed"})
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := conn.WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		if n.Channel != "svc_outbox" {
			t.Fatalf("channel = %q", n.Channel)
		}
	})

	t.Run("rejects invalid input", func(t *testing.T) {
		cases := []struct {
			name  string
			topic string
			env   *eventsv1.Envelope
		}{
			{"empty topic", "", &eventsv1.Envelope{Type: "x"}},
			{"nil envelope", topic, nil},
			{"empty type", topic, &eventsv1.Envelope{}},
			{"id not a uuid", topic, &eventsv1.Envelope{Type: "x", Id: "abc"}},
		}
		for _, c := range cases {
			err := pg.InTx(ctx, e.Pool, func(tx pgx.Tx) error {
				_, err := outbox.Enqueue(ctx, tx, c.topic, c.env)
				return err
			})
			if err == nil {
				t.Errorf("%s: accepted", c.name)
			}
		}
	})
}

func TestNewRelayValidatesConfig(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	tests := []struct {
		name   string
		writer *kafka.Writer
		schema string
	}{
		{name: "writer with a fixed topic", writer: kafkakit.NewWriter(e.Brokers, kafkakit.WithTopic("x")), schema: "svc"},
		{name: "invalid schema", writer: kafkakit.NewWriter(e.Brokers), schema: "Bad-Schema"},
		{name: "missing schema", writer: kafkakit.NewWriter(e.Brokers)},
		{name: "missing writer", schema: "svc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := outbox.NewRelay(e.Pool, tt.writer, outbox.RelayConfig{Schema: tt.schema}); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestRelayPublishesCommittedEventsOnly(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	ctx := testenv.Ctx(t)
	reg := prometheus.NewRegistry()
	startRelay(t, e, relayOpts{reg: reg})

	_ = pg.InTx(ctx, e.Pool, func(tx pgx.Tx) error {
		if _, err := outbox.Enqueue(ctx, tx, topic, testenv.Envelope("test.rolled.back", 1, 1)); err != nil {
			return err
		}
		return errors.New("abort")
	})
	marker := testenv.Envelope("test.marker", 1, 2)
	e.Enqueue(t, topic, marker)
	testenv.Eventually(t, 30*time.Second, "marker published", func() bool { return unsent(t, e) == 0 })

	if n := e.TopicSize(t, topic); n != 1 {
		t.Fatalf("topic holds %d records, want only the marker", n)
	}
	r := kafkakit.NewReader(e.Brokers, "check", topic)
	defer r.Close()
	m, err := r.FetchMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := testenv.Decode(t, m)
	if got.Id != marker.Id || string(m.Key) != "1" || testenv.Header(m, outbox.HeaderEventID) != marker.Id || testenv.Header(m, outbox.HeaderEventType) != "test.marker" {
		t.Fatalf("published %v key=%s headers=%v, want the marker keyed 1 with event headers", got, m.Key, m.Headers)
	}
	// The counters move just after the marking commit that unsent sees.
	testenv.Eventually(t, 10*time.Second, "the marker counted and its lag observed", func() bool {
		return testenv.Metric(t, reg, "outbox_published_total") >= 1 && testenv.Metric(t, reg, "outbox_relay_lag_seconds") >= 1
	})
	if v := testenv.Metric(t, reg, "outbox_published_total"); v != 1 {
		t.Errorf("outbox_published_total = %v, want 1", v)
	}
	testenv.Eventually(t, 10*time.Second, "backlog gauge 0 and relay active", func() bool {
		return testenv.Metric(t, reg, "outbox_backlog") == 0 && testenv.Metric(t, reg, "outbox_relay_active") == 1
	})
	if v := testenv.Metric(t, reg, "outbox_relay_lag_seconds"); v != 1 {
		t.Errorf("outbox_relay_lag_seconds observations = %v, want 1", v)
	}
}

func TestRelayPreservesOrderPerKey(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	ctx := testenv.Ctx(t)
	const programs, perProgram = 5, 60
	// Enqueued before the relay starts and drained in batches of 7, so order
	// must hold across many batches and partitions.
	for s := 1; s <= perProgram; s++ {
		for p := 1; p <= programs; p++ {
			e.Enqueue(t, topic, testenv.Envelope("test.seq", int64(p), int64(s)))
		}
	}
	startRelay(t, e, relayOpts{batch: 7})

	r := kafkakit.NewReader(e.Brokers, "order-check", topic)
	defer r.Close()
	last := map[int64]int64{}
	for range programs * perProgram {
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
	testenv.Eventually(t, 10*time.Second, "all rows marked", func() bool { return unsent(t, e) == 0 })
	if n := e.TopicSize(t, topic); n != programs*perProgram {
		t.Fatalf("topic holds %d records, want %d", n, programs*perProgram)
	}
}

func TestRelayWakesOnNotification(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	reg := prometheus.NewRegistry()
	// With an hour between polls only NOTIFY can bring the event out.
	startRelay(t, e, relayOpts{reg: reg, poll: time.Hour})
	testenv.Eventually(t, 10*time.Second, "relay active", func() bool { return testenv.Metric(t, reg, "outbox_relay_active") == 1 })
	for i := range 3 {
		e.Enqueue(t, topic, testenv.Envelope("test.notified", 1, int64(i+1)))
		testenv.Eventually(t, 10*time.Second, "event published", func() bool { return unsent(t, e) == 0 })
	}
}

func TestRelayCrashBetweenPublishAndMarkRepublishesButAppliesOnce(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	ctx := testenv.Ctx(t)
	env := testenv.Envelope("test.effect", 7, 1)
	e.Enqueue(t, topic, env)

	errCrash := errors.New("simulated crash")
	_, done := startRelay(t, e, relayOpts{afterPublish: func([]int64) error { return errCrash }})
	select {
	case err := <-done:
		if !errors.Is(err, errCrash) {
			t.Fatalf("Run = %v, want the AfterPublish error", err)
		}
	case <-ctx.Done():
		t.Fatal("relay did not stop on the AfterPublish error")
	}
	if n := e.TopicSize(t, topic); n != 1 {
		t.Fatalf("after the crash the topic holds %d records, want 1", n)
	}
	if n := unsent(t, e); n != 1 {
		t.Fatalf("after the crash %d rows are unsent, want 1", n)
	}

	startRelay(t, e, relayOpts{})
	testenv.Eventually(t, 30*time.Second, "row marked by the restarted relay", func() bool { return unsent(t, e) == 0 })
	if n := e.TopicSize(t, topic); n != 2 {
		t.Fatalf("topic holds %d records, want 2 (published twice)", n)
	}

	reg := prometheus.NewRegistry()
	reader := kafkakit.NewReader(e.Brokers, "effects", topic)
	t.Cleanup(func() { _ = reader.Close() })
	c, err := inbox.NewConsumer(e.Pool, reader, inbox.ConsumerConfig{
		Name:       "effects",
		Registerer: reg,
		Handler: func(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
			_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1, $2, $3)`, env.Id, env.ProgramId, env.Seq)
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Go(t, c.Run)
	testenv.Eventually(t, 30*time.Second, "both copies consumed", func() bool {
		return testenv.Metric(t, reg, "consumer_applied_total", "consumer", "effects") == 2
	})
	if n := e.Count(t, `SELECT count(*) FROM effects WHERE event_id = $1`, env.Id); n != 1 {
		t.Fatalf("effect applied %d times, want 1", n)
	}
	if v := testenv.Metric(t, reg, "consumer_applied_total", "outcome", inbox.OutcomeDuplicate); v != 1 {
		t.Fatalf("duplicates = %v, want 1", v)
	}
}

func TestTwoRelaysOnOneSchemaOnlyOnePublishes(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	stops := make([]func() error, 2)
	for i := range regs {
		stops[i], _ = startRelay(t, e, relayOpts{reg: regs[i]})
	}
	activeOf := func(i int) float64 { return testenv.Metric(t, regs[i], "outbox_relay_active") }
	published := func(i int) float64 { return testenv.Metric(t, regs[i], "outbox_published_total") }

	testenv.Eventually(t, 10*time.Second, "one relay active", func() bool { return activeOf(0)+activeOf(1) == 1 })
	leader := 0
	if activeOf(1) == 1 {
		leader = 1
	}
	standby := 1 - leader

	const first = 40
	for i := range first {
		e.Enqueue(t, topic, testenv.Envelope("test.pair", int64(i%3), int64(i)))
	}
	testenv.Eventually(t, 30*time.Second, "first events published", func() bool { return unsent(t, e) == 0 })
	// The counter moves just after the marking commit that unsent sees.
	testenv.Eventually(t, 10*time.Second, "the first events counted", func() bool { return published(leader)+published(standby) >= first })
	if published(standby) != 0 || published(leader) != first {
		t.Fatalf("published leader=%v standby=%v, want %d and 0", published(leader), published(standby), first)
	}
	if activeOf(0)+activeOf(1) != 1 {
		t.Fatal("both relays active")
	}

	// The leader stops (its connection closes, releasing the lock): the
	// standby takes over.
	if err := stops[leader](); err != nil {
		t.Fatalf("leader Run: %v", err)
	}
	testenv.Eventually(t, 10*time.Second, "standby takes over", func() bool { return activeOf(standby) == 1 })
	const second = 10
	for i := range second {
		e.Enqueue(t, topic, testenv.Envelope("test.pair", 1, int64(first+i)))
	}
	testenv.Eventually(t, 30*time.Second, "second events published", func() bool { return unsent(t, e) == 0 })
	testenv.Eventually(t, 10*time.Second, "the second events counted", func() bool { return published(standby) >= second })
	if published(standby) != second {
		t.Fatalf("new leader published %v, want %d", published(standby), second)
	}
	if n := e.TopicSize(t, topic); n != first+second {
		t.Fatalf("topic holds %d, want %d", n, first+second)
	}
}

func TestRelaySweepsSentRowsAfterRetention(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	clock := testenv.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	reg := prometheus.NewRegistry()
	startRelay(t, e, relayOpts{reg: reg, now: clock.Now, poll: 20 * time.Millisecond, retention: time.Hour})

	old := e.Enqueue(t, topic, testenv.Envelope("test.old", 1, 1))
	testenv.Eventually(t, 30*time.Second, "old row sent", func() bool { return unsent(t, e) == 0 })

	clock.Advance(90 * time.Minute) // old row is now past retention
	recent := e.Enqueue(t, topic, testenv.Envelope("test.recent", 1, 2))
	testenv.Eventually(t, 30*time.Second, "recent row sent", func() bool { return unsent(t, e) == 0 })
	clock.Advance(2 * time.Minute) // a sweep is due
	testenv.Eventually(t, 30*time.Second, "old row swept", func() bool {
		return e.Count(t, `SELECT count(*) FROM outbox WHERE id = $1`, old) == 0
	})
	if n := e.Count(t, `SELECT count(*) FROM outbox WHERE id = $1`, recent); n != 1 {
		t.Fatal("row within retention was swept")
	}
	// The counter moves just after the DELETE that the count above sees.
	testenv.Eventually(t, 10*time.Second, "the sweep counted", func() bool { return testenv.Metric(t, reg, "outbox_swept_total") >= 1 })
	if v := testenv.Metric(t, reg, "outbox_swept_total"); v != 1 {
		t.Fatalf("outbox_swept_total = %v, want 1", v)
	}
}

func TestRelayRetriesFailedPublishes(t *testing.T) {
	t.Parallel()
	const missing = "test.created.later.v1"
	e := testenv.New(t)
	reg := prometheus.NewRegistry()
	w := kafkakit.NewWriter(e.Brokers)
	w.MaxAttempts = 1
	// Refresh metadata quickly so the new topic is seen without waiting
	// for the default 6 s TTL.
	w.Transport = &kafka.Transport{MetadataTTL: 50 * time.Millisecond}
	t.Cleanup(func() { _ = w.Close() })
	startRelay(t, e, relayOpts{reg: reg, writer: w})
	e.Enqueue(t, missing, testenv.Envelope("test.retry", 1, 1))

	testenv.Eventually(t, 30*time.Second, "publish errors counted", func() bool {
		return testenv.Metric(t, reg, "outbox_publish_errors_total") >= 1
	})
	if n := unsent(t, e); n != 1 {
		t.Fatalf("unsent = %d, want the row kept", n)
	}
	if err := kafkakit.EnsureTopics(testenv.Ctx(t), e.Brokers, []kafkakit.TopicSpec{{Name: missing, Partitions: 1}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "published once the topic exists", func() bool { return unsent(t, e) == 0 })
	if n := e.TopicSize(t, missing); n != 1 {
		t.Fatalf("topic holds %d, want 1", n)
	}
}

// A relay whose batches keep failing still refreshes the backlog gauges
// (the alerts on a stuck relay read them), and once the backlog query fails
// too the oldest row's age keeps growing from the last row it saw.
func TestRelayRefreshesBacklogGaugesWhileBatchesFail(t *testing.T) {
	t.Parallel()
	const missing = "test.never.created.v1"
	e := testenv.New(t)
	reg := prometheus.NewRegistry()
	clock := testenv.NewClock(time.Now())
	w := kafkakit.NewWriter(e.Brokers)
	w.MaxAttempts = 1
	t.Cleanup(func() { _ = w.Close() })
	startRelay(t, e, relayOpts{reg: reg, writer: w, now: clock.Now})
	e.Enqueue(t, missing, testenv.Envelope("test.stuck", 1, 1))
	e.Enqueue(t, missing, testenv.Envelope("test.stuck", 1, 2))

	testenv.Eventually(t, 30*time.Second, "publish errors counted", func() bool {
		return testenv.Metric(t, reg, "outbox_publish_errors_total") >= 1
	})
	clock.Advance(2 * time.Minute) // a refresh is due
	testenv.Eventually(t, 30*time.Second, "backlog 2 and oldest row about 2m old while batches fail", func() bool {
		return testenv.Metric(t, reg, "outbox_backlog") == 2 && testenv.Metric(t, reg, "outbox_oldest_unsent_age_seconds") >= 110
	})

	// The relay loses its table: batches and the backlog query both fail.
	if _, err := e.Pool.Exec(testenv.Ctx(t), `ALTER TABLE outbox RENAME TO outbox_gone`); err != nil {
		t.Fatal(err)
	}
	errs := testenv.Metric(t, reg, "outbox_publish_errors_total")
	testenv.Eventually(t, 30*time.Second, "more failed batches", func() bool {
		return testenv.Metric(t, reg, "outbox_publish_errors_total") > errs
	})
	clock.Advance(10 * time.Minute)
	testenv.Eventually(t, 30*time.Second, "oldest row ages to about 12m without the query", func() bool {
		return testenv.Metric(t, reg, "outbox_oldest_unsent_age_seconds") >= 710
	})
	if v := testenv.Metric(t, reg, "outbox_backlog"); v != 2 {
		t.Fatalf("outbox_backlog = %v, want the last known 2", v)
	}
}

// A relay that stops being the active one clears its backlog gauges, so the
// max over pods reads the new holder's, not a stale backlog.
func TestRelayClearsBacklogGaugesWhenItStops(t *testing.T) {
	t.Parallel()
	const missing = "test.never.created.v1"
	e := testenv.New(t)
	reg := prometheus.NewRegistry()
	clock := testenv.NewClock(time.Now())
	w := kafkakit.NewWriter(e.Brokers)
	w.MaxAttempts = 1
	t.Cleanup(func() { _ = w.Close() })
	stop, _ := startRelay(t, e, relayOpts{reg: reg, writer: w, now: clock.Now})
	e.Enqueue(t, missing, testenv.Envelope("test.stuck", 1, 1))
	testenv.Eventually(t, 30*time.Second, "publish errors counted", func() bool {
		return testenv.Metric(t, reg, "outbox_publish_errors_total") >= 1
	})
	clock.Advance(time.Minute)
	testenv.Eventually(t, 30*time.Second, "backlog reported", func() bool {
		return testenv.Metric(t, reg, "outbox_backlog") == 1 && testenv.Metric(t, reg, "outbox_oldest_unsent_age_seconds") > 0
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"outbox_relay_active", "outbox_backlog", "outbox_oldest_unsent_age_seconds"} {
		if v := testenv.Metric(t, reg, name); v != 0 {
			t.Errorf("%s = %v after the relay stopped, want 0", name, v)
		}
	}
}

func TestTraceContextFlowsFromEnqueueToHandler(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	ctx := testenv.Ctx(t)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	pctx, span := tp.Tracer("test").Start(ctx, "producer")
	want := span.SpanContext().TraceID()
	err := pg.InTx(pctx, e.Pool, func(tx pgx.Tx) error {
		_, err := outbox.Enqueue(pctx, tx, topic, testenv.Envelope("test.traced", 3, 1))
		return err
	})
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	startRelay(t, e, relayOpts{})

	got := make(chan trace.SpanContext, 1)
	reader := kafkakit.NewReader(e.Brokers, "traced", topic)
	t.Cleanup(func() { _ = reader.Close() })
	c, err := inbox.NewConsumer(e.Pool, reader, inbox.ConsumerConfig{
		Name:           "traced",
		TracerProvider: tp,
		Handler: func(ctx context.Context, _ pgx.Tx, _ *eventsv1.Envelope) error {
			got <- trace.SpanContextFromContext(ctx)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Go(t, c.Run)
	select {
	case sc := <-got:
		if sc.TraceID() != want {
			t.Fatalf("handler trace %s, want producer trace %s", sc.TraceID(), want)
		}
		if sc.IsRemote() {
			t.Fatal("handler context carries the remote parent, not a consumer span")
		}
	case <-ctx.Done():
		t.Fatal("handler never called")
	}
}

func TestRelayLockPassesOnWhenTheHoldersConnectionDies(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	for _, reg := range regs {
		startRelay(t, e, relayOpts{reg: reg})
	}
	active := func() float64 {
		return testenv.Metric(t, regs[0], "outbox_relay_active") + testenv.Metric(t, regs[1], "outbox_relay_active")
	}
	testenv.Eventually(t, 10*time.Second, "one relay active", func() bool { return active() == 1 })

	// Kill the lock holder's backend, as when its pod dies: the lock is
	// released, and one relay (either) must hold it again and publish.
	var killed bool
	err := e.Pool.QueryRow(testenv.Ctx(t), `
		SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed)
	if err != nil || !killed {
		t.Fatalf("terminate lock holder: %v (killed=%v)", err, killed)
	}
	e.Enqueue(t, topic, testenv.Envelope("test.after.kill", 1, 1))
	testenv.Eventually(t, 30*time.Second, "event published after the kill", func() bool { return unsent(t, e) == 0 })
	testenv.Eventually(t, 10*time.Second, "exactly one relay active again", func() bool { return active() == 1 })
}

func TestEnqueueManyKeepsOrder(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := testenv.Ctx(t)
	var envs []*eventsv1.Envelope
	for i := 0; i < 5; i++ {
		envs = append(envs, &eventsv1.Envelope{Type: "test.many", ProgramId: int64(i % 2), Seq: int64(i)})
	}
	if err := pg.InTx(ctx, env.Pool, func(tx pgx.Tx) error { return outbox.EnqueueMany(ctx, tx, "t.many", envs) }); err != nil {
		t.Fatal(err)
	}
	rows, err := env.Pool.Query(ctx, `SELECT event_id::text, key FROM outbox WHERE topic = 't.many' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var id, key string
		if err := rows.Scan(&id, &key); err != nil {
			t.Fatal(err)
		}
		if id != envs[i].Id || key != strconv.Itoa(i%2) {
			t.Fatalf("row %d: %s %s, want %s %d", i, id, key, envs[i].Id, i%2)
		}
		i++
	}
	if i != 5 {
		t.Fatalf("%d rows", i)
	}
	if err := pg.InTx(ctx, env.Pool, func(tx pgx.Tx) error {
		return outbox.EnqueueMany(ctx, tx, "t.many", []*eventsv1.Envelope{{}})
	}); err == nil {
		t.Fatal("an envelope without a type must be refused")
	}
}

func TestRelayDeleteSentRemovesPublishedRows(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	startRelay(t, e, relayOpts{deleteSent: true})
	for i := 0; i < 3; i++ {
		e.Enqueue(t, topic, testenv.Envelope("test.deleted", 1, int64(i)))
	}
	testenv.Eventually(t, 30*time.Second, "all three published and gone", func() bool {
		return e.Count(t, `SELECT count(*) FROM outbox`) == 0
	})
	if n := e.TopicSize(t, topic); n != 3 {
		t.Fatalf("topic holds %d records, want 3", n)
	}
}

// A row whose transaction commits after later rows were published (a lower
// id behind the relay's cursor) is still published.
func TestRelayPublishesALateCommittingLowerID(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	ctx := testenv.Ctx(t)
	startRelay(t, e, relayOpts{})
	held, err := e.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx)
	late := testenv.Envelope("test.late", 1, 1)
	if _, err := outbox.Enqueue(ctx, held, topic, late); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 4; i++ {
		e.Enqueue(t, topic, testenv.Envelope("test.early", 1, int64(i)))
	}
	testenv.Eventually(t, 30*time.Second, "the later rows published", func() bool { return e.TopicSize(t, topic) == 3 })
	if err := held.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the late row published too", func() bool { return unsent(t, e) == 0 && e.TopicSize(t, topic) == 4 })
}
