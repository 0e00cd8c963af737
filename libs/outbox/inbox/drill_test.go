package inbox_test

import (
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/kafkakit/embedded"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/outbox/inbox"
	"github.com/svc-dev/svc/libs/outbox/internal/testenv"
)

// Drill: the broker goes away for a few seconds while the service keeps
// writing outbox rows, then comes back on the same address and data. The
// consumer's Run never returns, and every event, written before, during and
// after the outage, is applied exactly once.
func TestDrillBrokerOutageLosesAndDuplicatesNothing(t *testing.T) {
	t.Parallel()
	const (
		drillTopic = "test.drill.v1"
		group      = "drill"
		outage     = 3 * time.Second
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr, dir := ln.Addr().String(), t.TempDir()
	_ = ln.Close()
	brokers := []string{addr}
	startBroker := func() func() {
		t.Helper()
		stop, err := embedded.Start(addr, embedded.Options{DataDir: dir})
		if err != nil {
			t.Fatalf("start broker on %s: %v", addr, err)
		}
		return stop
	}
	stopBroker := startBroker()
	defer func() { stopBroker() }()

	e := testenv.New(t)
	ctx := testenv.Ctx(t)
	if err := kafkakit.EnsureTopics(ctx, brokers, []kafkakit.TopicSpec{{Name: drillTopic, Partitions: 4}}); err != nil {
		t.Fatal(err)
	}
	w := kafkakit.NewWriter(brokers)
	t.Cleanup(func() { _ = w.Close() })
	relay, err := outbox.NewRelay(e.Pool, w, outbox.RelayConfig{
		Schema: testenv.Schema, PollInterval: 50 * time.Millisecond, ErrorBackoff: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Go(t, relay.Run)

	reg := prometheus.NewRegistry()
	h := &effectHandler{}
	reader := kafkakit.NewReader(brokers, group, drillTopic)
	t.Cleanup(func() { _ = reader.Close() })
	c, err := inbox.NewConsumer(e.Pool, reader, inbox.ConsumerConfig{
		Name: group, Registerer: reg, Handler: h.handle, Backoff: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopConsumer, done := testenv.Go(t, c.Run)
	applied := func() int { return e.Count(t, `SELECT count(*) FROM inbox WHERE consumer = $1`, group) }
	running := func() {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("consumer Run returned %v while the service should keep running", err)
		default:
		}
	}

	written := 0
	enqueue := func(n int) {
		for range n {
			written++
			e.Enqueue(t, drillTopic, testenv.Envelope("test.effect", int64(written%5), int64(written)))
		}
	}
	enqueue(10)
	testenv.Eventually(t, 30*time.Second, "events before the outage applied", func() bool { return applied() == written })

	began := time.Now()
	stopBroker()
	// Outbox rows keep coming while the broker is away.
	for tick := time.NewTicker(100 * time.Millisecond); time.Since(began) < outage; <-tick.C {
		enqueue(1)
		running()
	}
	stopBroker = startBroker()
	enqueue(10)
	testenv.Eventually(t, 90*time.Second, "every event applied after the broker returned", func() bool {
		running()
		return applied() == written
	})
	t.Logf("%d events, outage %s, all applied %s after the broker returned", written, outage, time.Since(began)-outage)
	if n := e.Count(t, `SELECT count(*) FROM effects`); n != written {
		t.Fatalf("effects = %d, want %d (one per event)", n, written)
	}
	if n := e.Count(t, `SELECT count(*) FROM (SELECT event_id FROM effects GROUP BY event_id HAVING count(*) > 1) d`); n != 0 {
		t.Fatalf("%d events applied more than once", n)
	}
	if n := e.Count(t, `SELECT count(*) FROM dead_letters`); n != 0 {
		t.Fatalf("dead letters = %d, want 0", n)
	}
	if got := h.calls.Load(); got != int64(written) {
		t.Fatalf("handler calls = %d, want %d", got, written)
	}
	running()
	if err := stopConsumer(); err != nil {
		t.Fatalf("Run returned %v on cancellation, want nil", err)
	}
}
