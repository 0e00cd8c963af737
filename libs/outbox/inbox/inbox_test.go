package inbox_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/outbox/inbox"
	"github.com/svc-dev/svc/libs/outbox/internal/testenv"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

const topic = "test.inbox.v1"

// effectHandler records each applied event in the effects table, failing
// for event types listed in fail, and counts its calls.
type effectHandler struct {
	calls     atomic.Int64
	failTimes map[string]int64 // type -> calls that fail (-1: always)
	failed    atomic.Int64
}

func (h *effectHandler) handle(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	h.calls.Add(1)
	if _, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1, $2, $3)`, env.Id, env.ProgramId, env.Seq); err != nil {
		return err
	}
	if n, ok := h.failTimes[env.Type]; ok && (n < 0 || h.failed.Load() < n) {
		h.failed.Add(1)
		return errors.New("handler refuses " + env.Type)
	}
	return nil
}

type fixture struct {
	e   *testenv.Env
	reg *prometheus.Registry
	h   *effectHandler
	w   *kafka.Writer
}

func newFixture(t *testing.T, topics ...string) *fixture {
	t.Helper()
	e := testenv.New(t, topics...)
	w := kafkakit.NewWriter(e.Brokers)
	t.Cleanup(func() { _ = w.Close() })
	return &fixture{e: e, reg: prometheus.NewRegistry(), h: &effectHandler{}, w: w}
}

func (f *fixture) start(t *testing.T, group string, mod func(*inbox.ConsumerConfig)) (stop func() error) {
	t.Helper()
	reader := kafkakit.NewReader(f.e.Brokers, group, topic)
	cfg := inbox.ConsumerConfig{
		Name:        group,
		Registerer:  f.reg,
		Handler:     f.h.handle,
		MaxAttempts: 3,
		Backoff:     time.Millisecond,
		MaxBackoff:  5 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := inbox.NewConsumer(f.e.Pool, reader, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopRun, _ := testenv.Go(t, c.Run)
	return func() error {
		err := stopRun()
		_ = reader.Close()
		return err
	}
}

func (f *fixture) produce(t *testing.T, msgs ...kafka.Message) {
	t.Helper()
	for i := range msgs {
		msgs[i].Topic = topic
	}
	if err := f.w.WriteMessages(testenv.Ctx(t), msgs...); err != nil {
		t.Fatal(err)
	}
}

func message(t *testing.T, env *eventsv1.Envelope) kafka.Message {
	t.Helper()
	b, err := proto.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return kafka.Message{Key: []byte(strconv.FormatInt(env.ProgramId, 10)), Value: b}
}

// effects are n "test.effect" envelopes of program 1 (ids 1..n) and their
// messages.
func effects(t *testing.T, n int) ([]*eventsv1.Envelope, []kafka.Message) {
	t.Helper()
	envs := make([]*eventsv1.Envelope, 0, n)
	msgs := make([]kafka.Message, 0, n)
	for i := range n {
		env := testenv.Envelope("test.effect", 1, int64(i+1))
		envs = append(envs, env)
		msgs = append(msgs, message(t, env))
	}
	return envs, msgs
}

func (f *fixture) handled(t *testing.T, consumer string) float64 {
	return testenv.Metric(t, f.reg, "consumer_applied_total", "consumer", consumer)
}

func TestRedeliveredMessagesAreNoOps(t *testing.T) {
	t.Parallel()
	f := newFixture(t, topic)
	env := testenv.Envelope("test.effect", 1, 1)
	// Same event three times, as after rebalances or a relay re-publish.
	f.produce(t, message(t, env), message(t, env), message(t, env))
	f.start(t, "noop", nil)

	testenv.Eventually(t, 30*time.Second, "three deliveries handled", func() bool { return f.handled(t, "noop") == 3 })
	if n := f.e.Count(t, `SELECT count(*) FROM effects WHERE event_id = $1`, env.Id); n != 1 {
		t.Fatalf("effect rows = %d, want 1", n)
	}
	if got := f.h.calls.Load(); got != 1 {
		t.Fatalf("handler calls = %d, want 1", got)
	}
	tests := []struct {
		outcome string
		want    float64
	}{{inbox.OutcomeApplied, 1}, {inbox.OutcomeDuplicate, 2}, {inbox.OutcomeDeadLettered, 0}}
	for _, tt := range tests {
		if v := testenv.Metric(t, f.reg, "consumer_applied_total", "consumer", "noop", "outcome", tt.outcome); v != tt.want {
			t.Errorf("outcome %s = %v, want %v", tt.outcome, v, tt.want)
		}
	}
}

func TestPoisonMessageGoesToDeadLetterAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	dlqTopic := topic + inbox.DeadLetterSuffix
	f := newFixture(t, topic, dlqTopic)
	f.h.failTimes = map[string]int64{"test.poison": -1}
	poison := testenv.Envelope("test.poison", 1, 1)
	good := testenv.Envelope("test.good", 1, 2) // same key: queued behind the poison
	f.produce(t, message(t, poison), message(t, good))
	f.start(t, "poison", func(c *inbox.ConsumerConfig) { c.DeadLetter = f.w })

	testenv.Eventually(t, 30*time.Second, "good event applied after the poison", func() bool {
		return testenv.Metric(t, f.reg, "consumer_applied_total", "consumer", "poison", "outcome", inbox.OutcomeApplied) == 1
	})
	if got := f.h.calls.Load(); got != 3+1 {
		t.Fatalf("handler calls = %d, want 3 for the poison (MaxAttempts) + 1", got)
	}
	if n := f.e.Count(t, `SELECT count(*) FROM effects WHERE event_id = $1`, poison.Id); n != 0 {
		t.Fatal("the failing handler's writes were committed")
	}
	if n := f.e.Count(t, `SELECT count(*) FROM inbox WHERE event_id = $1`, poison.Id); n != 0 {
		t.Fatal("the dead-lettered event is in the inbox (a replay would be skipped)")
	}
	if n := f.e.Count(t, `SELECT count(*) FROM dead_letters WHERE consumer = 'poison' AND event_id = $1 AND attempts = 3 AND error LIKE '%refuses%'`, poison.Id); n != 1 {
		t.Fatalf("dead_letters rows = %d, want 1", n)
	}
	for name, want := range map[string]float64{"consumer_dead_lettered_total": 1, "consumer_apply_errors_total": 3} {
		if v := testenv.Metric(t, f.reg, name, "consumer", "poison"); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}

	r := kafkakit.NewReader(f.e.Brokers, "dlq-check", dlqTopic)
	defer r.Close()
	m, err := r.FetchMessage(testenv.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := testenv.Decode(t, m); got.Id != poison.Id {
		t.Fatalf("dlq holds %s, want %s", got.Id, poison.Id)
	}
	if testenv.Header(m, "dlq_consumer") != "poison" || testenv.Header(m, "dlq_attempts") != "3" || testenv.Header(m, "dlq_error") == "" {
		t.Fatalf("dlq headers = %v", m.Headers)
	}
}

func TestUndecodableMessageIsDeadLetteredImmediately(t *testing.T) {
	t.Parallel()
	f := newFixture(t, topic)
	bad := []kafka.Message{
		{Key: []byte("1"), Value: []byte{0xff, 0xff, 0xff}},                              // not protobuf
		message(t, &eventsv1.Envelope{Id: "not-a-uuid", Type: "test.bad", ProgramId: 1}), // unusable id
	}
	good := testenv.Envelope("test.good", 1, 1)
	f.produce(t, append(bad, message(t, good))...)
	f.start(t, "undecodable", nil) // no DLQ writer: the table alone keeps them

	testenv.Eventually(t, 30*time.Second, "all three handled", func() bool { return f.handled(t, "undecodable") == 3 })
	if got := f.h.calls.Load(); got != 1 {
		t.Fatalf("handler calls = %d, want 1 (only the good event)", got)
	}
	if n := f.e.Count(t, `SELECT count(*) FROM dead_letters WHERE consumer = 'undecodable' AND attempts = 0 AND error LIKE 'undecodable%'`); n != 2 {
		t.Fatalf("dead_letters rows = %d, want 2", n)
	}
}

func TestHandlerFailureRollsBackAndRetries(t *testing.T) {
	t.Parallel()
	f := newFixture(t, topic)
	f.h.failTimes = map[string]int64{"test.flaky": 2} // fails twice, then succeeds
	env := testenv.Envelope("test.flaky", 1, 1)
	f.produce(t, message(t, env))
	f.start(t, "flaky", nil)

	testenv.Eventually(t, 30*time.Second, "flaky event applied", func() bool {
		return testenv.Metric(t, f.reg, "consumer_applied_total", "consumer", "flaky", "outcome", inbox.OutcomeApplied) == 1
	})
	if n := f.e.Count(t, `SELECT count(*) FROM effects WHERE event_id = $1`, env.Id); n != 1 {
		t.Fatalf("effect rows = %d, want 1 (failed attempts rolled back)", n)
	}
	if got := f.h.calls.Load(); got != 3 {
		t.Fatalf("handler calls = %d, want 3", got)
	}
}

func TestOffsetsCommittedAfterApplySurviveRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, topic)
	var first []kafka.Message
	for i := range 10 {
		first = append(first, message(t, testenv.Envelope("test.effect", int64(i%3), int64(i))))
	}
	f.produce(t, first...)
	stop := f.start(t, "restart", nil)
	testenv.Eventually(t, 30*time.Second, "first batch handled", func() bool { return f.handled(t, "restart") == 10 })
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v on shutdown, want nil", err)
	}

	marker := testenv.Envelope("test.marker", 1, 99)
	f.produce(t, message(t, marker))
	f.start(t, "restart", nil)
	testenv.Eventually(t, 30*time.Second, "marker handled", func() bool { return f.handled(t, "restart") >= 11 })
	if v := f.handled(t, "restart"); v != 11 {
		t.Fatalf("handled %v messages in total, want 11 (committed ones not redelivered)", v)
	}
	if n := f.e.Count(t, `SELECT count(*) FROM effects`); n != 11 {
		t.Fatalf("effects = %d, want 11", n)
	}
}

func TestNewConsumerValidatesConfig(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	reader := kafkakit.NewReader(f.e.Brokers, "g", topic)
	t.Cleanup(func() { _ = reader.Close() })
	h := func(context.Context, pgx.Tx, *eventsv1.Envelope) error { return nil }
	tests := []struct {
		name string
		cfg  inbox.ConsumerConfig
	}{
		{name: "missing name", cfg: inbox.ConsumerConfig{Handler: h}},
		{name: "missing handler", cfg: inbox.ConsumerConfig{Name: "x"}},
		{name: "dead-letter writer with fixed topic", cfg: inbox.ConsumerConfig{Name: "x", Handler: h, DeadLetter: kafkakit.NewWriter(f.e.Brokers, kafkakit.WithTopic("t"))}},
		{name: "invalid schema", cfg: inbox.ConsumerConfig{Name: "x", Handler: h, Schema: "Bad"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := inbox.NewConsumer(f.e.Pool, reader, tt.cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	t.Run("two consumers share one registry", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		for _, name := range []string{"a", "b"} {
			if _, err := inbox.NewConsumer(f.e.Pool, reader, inbox.ConsumerConfig{Name: name, Handler: h, Registerer: reg, Schema: testenv.Schema}); err != nil {
				t.Fatalf("consumer %s: %v", name, err)
			}
		}
	})
}

func TestSkippedEventsNeedNoTransaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t, topic)
	keep := testenv.Envelope("test.keep", 1, 1)
	skip1 := testenv.Envelope("test.skip", 1, 2)
	skip2 := testenv.Envelope("test.skip", 1, 3)
	f.produce(t, message(t, skip1), message(t, keep), message(t, skip2))
	f.start(t, "skipper", func(c *inbox.ConsumerConfig) {
		c.Skip = func(env *eventsv1.Envelope) bool { return env.GetType() == "test.skip" }
	})
	testenv.Eventually(t, 30*time.Second, "all three settled", func() bool { return f.handled(t, "skipper") == 3 })
	if got := f.h.calls.Load(); got != 1 {
		t.Fatalf("handler calls = %d, want 1", got)
	}
	if n := f.e.Count(t, `SELECT count(*) FROM inbox WHERE consumer = 'skipper'`); n != 1 {
		t.Fatalf("inbox rows = %d, want only the kept event", n)
	}
	if v := testenv.Metric(t, f.reg, "consumer_applied_total", "consumer", "skipper", "outcome", inbox.OutcomeSkipped); v != 2 {
		t.Fatalf("skipped = %v, want 2", v)
	}
}

// BatchSize: events already fetched are applied in one transaction, each
// once (a repeat inside the batch and a redelivery alike are duplicates);
// a batch with a failing event is rolled back and its events applied one
// by one, the poison dead-lettered after MaxAttempts and the rest applied.
func TestBatchAppliesEachEventOnceAndFallsBackOnFailure(t *testing.T) {
	t.Parallel()
	dlqTopic := topic + inbox.DeadLetterSuffix
	f := newFixture(t, topic, dlqTopic)
	f.h.failTimes = map[string]int64{"test.poison": -1}
	envs, msgs := effects(t, 50)
	msgs = append(msgs, message(t, envs[3])) // a repeat
	poison := testenv.Envelope("test.poison", 1, 100)
	msgs = append(msgs, message(t, poison))
	for i := range 20 {
		env := testenv.Envelope("test.effect", 1, int64(200+i))
		envs = append(envs, env)
		msgs = append(msgs, message(t, env))
	}
	f.produce(t, msgs...)
	f.start(t, "batch", func(c *inbox.ConsumerConfig) { c.BatchSize = 16; c.DeadLetter = f.w })

	testenv.Eventually(t, 30*time.Second, "every message settled", func() bool { return f.handled(t, "batch") == float64(len(msgs)) })
	if n := f.e.Count(t, `SELECT count(*) FROM effects`); n != len(envs) {
		t.Fatalf("effect rows = %d, want %d (each event once, the poison's rolled back)", n, len(envs))
	}
	if n := f.e.Count(t, `SELECT count(*) FROM inbox WHERE consumer = 'batch'`); n != len(envs) {
		t.Fatalf("inbox rows = %d, want %d", n, len(envs))
	}
	for outcome, want := range map[string]float64{inbox.OutcomeApplied: float64(len(envs)), inbox.OutcomeDuplicate: 1, inbox.OutcomeDeadLettered: 1} {
		if v := testenv.Metric(t, f.reg, "consumer_applied_total", "consumer", "batch", "outcome", outcome); v != want {
			t.Errorf("outcome %s = %v, want %v", outcome, v, want)
		}
	}
	if n := f.e.Count(t, `SELECT count(*) FROM dead_letters WHERE consumer = 'batch' AND event_id = $1 AND attempts = 3`, poison.Id); n != 1 {
		t.Fatalf("the poison's dead letter rows = %d, want 1", n)
	}
	// One by one, the handler runs once per event and 3 times for the
	// poison; more calls are the rolled-back batch's, so batches ran.
	if calls := f.h.calls.Load(); calls <= int64(len(envs)+3) {
		t.Fatalf("handler calls = %d: no batch was applied (and rolled back)", calls)
	}
}

// BatchHandler gets a batch's events new to the inbox, in order, in one
// call; when it fails, the batch is applied one by one with Handler.
func TestBatchHandlerGetsTheNewEventsOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, topic)
	envs, msgs := effects(t, 30)
	msgs = append(msgs, message(t, envs[0])) // a repeat
	f.produce(t, msgs...)
	var calls, batched atomic.Int64
	var failOnce atomic.Bool
	failOnce.Store(true)
	f.start(t, "batch-handler", func(c *inbox.ConsumerConfig) {
		c.BatchSize = 8
		c.BatchHandler = func(ctx context.Context, tx pgx.Tx, envs []*eventsv1.Envelope) error {
			calls.Add(1)
			for _, env := range envs {
				if _, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1, $2, $3)`, env.Id, env.ProgramId, env.Seq); err != nil {
					return err
				}
			}
			if failOnce.CompareAndSwap(true, false) {
				return errors.New("the first batch fails")
			}
			batched.Add(int64(len(envs)))
			return nil
		}
	})
	testenv.Eventually(t, 30*time.Second, "every message settled", func() bool { return f.handled(t, "batch-handler") == float64(len(msgs)) })
	if n := f.e.Count(t, `SELECT count(*) FROM effects`); n != len(envs) {
		t.Fatalf("effect rows = %d, want %d", n, len(envs))
	}
	// The failed batch's events went through Handler, one by one.
	if got, oneByOne := batched.Load(), f.h.calls.Load(); got+oneByOne != int64(len(envs)) || oneByOne == 0 || calls.Load() < 2 {
		t.Fatalf("batched %d + one by one %d events in %d batch calls, want %d in all, some of each", got, oneByOne, calls.Load(), len(envs))
	}
}
