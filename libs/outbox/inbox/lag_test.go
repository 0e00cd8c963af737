package inbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"github.com/svc-dev/svc/libs/outbox/inbox"
	"github.com/svc-dev/svc/libs/outbox/internal/testenv"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// consumer_lag is refreshed on its own timer: while the handler is stuck on
// the first message, the messages written behind it show as lag although
// none is handled; once they are, it falls to 0 with nothing more arriving;
// and when Run returns it is 0, the partitions being another member's now.
func TestConsumerLagIsRefreshedWhileNoMessageIsHandled(t *testing.T) {
	t.Parallel()
	const (
		group  = "lag"
		behind = 150 // more than kafka-go's queue of 100 fetched ahead
	)
	f := newFixture(t, topic)
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	stop := f.start(t, group, func(c *inbox.ConsumerConfig) {
		c.Handler = func(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
			if env.Seq <= 0 {
				select {
				case entered <- struct{}{}:
				default:
				}
				wake := release
				if env.Seq < 0 {
					wake = nil // stuck until Run stops
				}
				select {
				case <-wake:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return f.h.handle(ctx, tx, env)
		}
	})
	lag := func() float64 { return testenv.Metric(t, f.reg, "consumer_lag", "consumer", group) }

	// One key: every message is on the stuck message's partition.
	f.produce(t, message(t, testenv.Envelope("test.effect", 1, 0)))
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the first message never reached the handler")
	}
	msgs := make([]kafka.Message, behind)
	for i := range msgs {
		msgs[i] = message(t, testenv.Envelope("test.effect", 1, int64(i+1)))
	}
	f.produce(t, msgs...)
	testenv.Eventually(t, 30*time.Second, "lag of the messages behind the stuck one", func() bool { return lag() == behind })
	if n := f.handled(t, group); n != 0 {
		t.Fatalf("handled %v messages while the handler was stuck", n)
	}

	close(release)
	testenv.Eventually(t, 30*time.Second, "every message handled", func() bool { return f.handled(t, group) == behind+1 })
	testenv.Eventually(t, 30*time.Second, "lag back to 0 with nothing more arriving", func() bool { return lag() == 0 })

	// Stuck again, then stopped: the gauge must not keep the stuck lag.
	f.produce(t, message(t, testenv.Envelope("test.effect", 1, -1)), message(t, testenv.Envelope("test.effect", 1, 1000)))
	testenv.Eventually(t, 30*time.Second, "lag of the one message behind the stuck one", func() bool { return lag() == 1 })
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v on cancellation, want nil", err)
	}
	if v := lag(); v != 0 {
		t.Fatalf("consumer_lag after Run returned = %v, want 0", v)
	}
}
