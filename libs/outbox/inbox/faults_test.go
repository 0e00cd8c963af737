package inbox_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/outbox/inbox"
	"github.com/svc-dev/svc/libs/outbox/internal/testenv"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// A handler failing on a transient database error more often than
// MaxAttempts allows is retried until it succeeds: the event is applied once,
// not dead-lettered.
func TestTransientDatabaseErrorsAreRetriedNotDeadLettered(t *testing.T) {
	t.Parallel()
	codes := []string{"57014", "55P03", "25006", "53300", "40001"}
	for _, code := range codes {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, topic)
			const failures = 6 // MaxAttempts is 3
			var calls atomic.Int64
			env := testenv.Envelope("test.transient", 1, 1)
			f.produce(t, message(t, env))
			group := "transient" + code
			f.start(t, group, func(c *inbox.ConsumerConfig) {
				c.Handler = func(ctx context.Context, tx pgx.Tx, e *eventsv1.Envelope) error {
					if _, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1, $2, $3)`, e.Id, e.ProgramId, e.Seq); err != nil {
						return err
					}
					if calls.Add(1) <= failures {
						return &pgconn.PgError{Code: code, Message: "injected"}
					}
					return nil
				}
			})
			testenv.Eventually(t, 30*time.Second, "event applied", func() bool {
				return testenv.Metric(t, f.reg, "consumer_applied_total", "consumer", group, "outcome", inbox.OutcomeApplied) == 1
			})
			if got := calls.Load(); got != failures+1 {
				t.Fatalf("handler calls = %d, want %d", got, failures+1)
			}
			if n := f.e.Count(t, `SELECT count(*) FROM effects WHERE event_id = $1`, env.Id); n != 1 {
				t.Fatalf("effect rows = %d, want 1", n)
			}
			if n := f.e.Count(t, `SELECT count(*) FROM dead_letters`); n != 0 {
				t.Fatalf("dead letters = %d, want 0", n)
			}
		})
	}
}

// A transient error that lasts longer than TransientRetryFor is the event's
// after all: it is dead-lettered, and the partition moves on.
func TestTransientErrorPastItsBudgetIsDeadLettered(t *testing.T) {
	t.Parallel()
	f := newFixture(t, topic)
	stuck := testenv.Envelope("test.stuck", 1, 1)
	good := testenv.Envelope("test.good", 1, 2)
	f.produce(t, message(t, stuck), message(t, good))
	f.start(t, "budget", func(c *inbox.ConsumerConfig) {
		c.TransientRetryFor = 100 * time.Millisecond
		c.Handler = func(ctx context.Context, tx pgx.Tx, e *eventsv1.Envelope) error {
			if e.Type == "test.stuck" {
				return &pgconn.PgError{Code: "57014", Message: "canceling statement due to statement timeout"}
			}
			return f.h.handle(ctx, tx, e)
		}
	})
	testenv.Eventually(t, 30*time.Second, "good event applied after the stuck one", func() bool {
		return testenv.Metric(t, f.reg, "consumer_applied_total", "consumer", "budget", "outcome", inbox.OutcomeApplied) == 1
	})
	if n := f.e.Count(t, `SELECT count(*) FROM dead_letters WHERE event_id = $1 AND error LIKE 'transient error for %57014%'`, stuck.Id); n != 1 {
		t.Fatalf("dead letters of the stuck event = %d, want 1", n)
	}
}

// With no broker to reach, FetchMessage fails (kafka-go gives up a group
// join after three attempts): Run counts, backs off and goes on; only
// cancellation ends it.
func TestFetchErrorsDoNotStopRun(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	reg := prometheus.NewRegistry()
	reader := kafkakit.NewReader([]string{dead}, "nobroker", topic, func(c *kafka.ReaderConfig) {
		c.JoinGroupBackoff = 10 * time.Millisecond // kafka-go's 5 s would make the test wait
	})
	t.Cleanup(func() { _ = reader.Close() })
	c, err := inbox.NewConsumer(e.Pool, reader, inbox.ConsumerConfig{
		Name: "nobroker", Registerer: reg, Backoff: time.Millisecond, FetchMaxBackoff: 20 * time.Millisecond,
		Handler: func(context.Context, pgx.Tx, *eventsv1.Envelope) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	stop, done := testenv.Go(t, c.Run)
	deadline := time.After(60 * time.Second)
	for testenv.Metric(t, reg, "inbox_fetch_errors_total", "consumer", "nobroker") < 2 {
		select {
		case err := <-done:
			t.Fatalf("Run returned %v with the broker away", err)
		case <-deadline:
			t.Fatal("no fetch error counted in 60s")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v on cancellation, want nil", err)
	}
}

// NewConsumerOpening builds the reader (which joins the group) only when
// Run starts, and closes it when Run returns.
func TestConsumerOpeningBuildsItsReaderWhenRunStarts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, topic)
	var opened atomic.Int64
	var reader *kafka.Reader
	c, err := inbox.NewConsumerOpening(f.e.Pool, func() *kafka.Reader {
		opened.Add(1)
		reader = kafkakit.NewReader(f.e.Brokers, "opening", topic)
		return reader
	}, inbox.ConsumerConfig{Name: "opening", Registerer: f.reg, Handler: f.h.handle})
	if err != nil {
		t.Fatal(err)
	}
	if n := opened.Load(); n != 0 {
		t.Fatalf("reader built %d times before Run", n)
	}
	if _, err := inbox.NewConsumerOpening(f.e.Pool, nil, inbox.ConsumerConfig{Name: "x", Handler: f.h.handle}); err == nil {
		t.Fatal("nil open accepted")
	}
	env := testenv.Envelope("test.effect", 1, 1)
	f.produce(t, message(t, env))
	stop, _ := testenv.Go(t, c.Run)
	testenv.Eventually(t, 30*time.Second, "event applied", func() bool { return f.handled(t, "opening") == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := opened.Load(); n != 1 {
		t.Fatalf("reader built %d times, want 1", n)
	}
	if _, err := reader.FetchMessage(testenv.Ctx(t)); err == nil {
		t.Fatal("reader still open after Run returned")
	}
}
