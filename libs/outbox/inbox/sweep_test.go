package inbox_test

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/outbox/inbox"
	"github.com/svc-dev/svc/libs/outbox/internal/testenv"
)

// insertApplied adds n inbox rows for consumer applied at the given time.
func insertApplied(t *testing.T, e *testenv.Env, consumer string, at time.Time, n int) {
	t.Helper()
	for range n {
		if _, err := e.Pool.Exec(testenv.Ctx(t), `INSERT INTO inbox (consumer, event_id, applied_at) VALUES ($1, $2, $3)`,
			consumer, outbox.NewEventID(), at); err != nil {
			t.Fatal(err)
		}
	}
}

func newSweeper(t *testing.T, e *testenv.Env, cfg inbox.SweeperConfig) *inbox.Sweeper {
	t.Helper()
	s, err := inbox.NewSweeper(e.Pool, cfg)
	if err != nil {
		t.Fatalf("NewSweeper: %v", err)
	}
	return s
}

func TestSweepDeletesRowsPastRetentionInBatches(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	now := time.Date(2030, 1, 8, 0, 0, 0, 0, time.UTC)
	retention := 7 * 24 * time.Hour
	cutoff := now.Add(-retention)
	// 23 rows due over two consumers: with batches of 5 a single pass has to
	// go round five times.
	insertApplied(t, e, "a", cutoff.Add(-time.Hour), 13)
	insertApplied(t, e, "b", cutoff.Add(-30*24*time.Hour), 10)
	insertApplied(t, e, "a", cutoff, 2) // exactly at the cutoff: kept
	insertApplied(t, e, "b", cutoff.Add(time.Minute), 3)
	insertApplied(t, e, "a", now, 4)

	reg := prometheus.NewRegistry()
	s := newSweeper(t, e, inbox.SweeperConfig{
		Schema: testenv.Schema, Retention: retention, BatchSize: 5, Registerer: reg,
		Now: func() time.Time { return now },
	})
	n, err := s.Sweep(testenv.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if n != 23 {
		t.Fatalf("swept %d rows, want 23", n)
	}
	if left := e.Count(t, `SELECT count(*) FROM inbox WHERE applied_at < $1`, cutoff); left != 0 {
		t.Fatalf("%d rows past retention left", left)
	}
	if kept := e.Count(t, `SELECT count(*) FROM inbox WHERE applied_at >= $1`, cutoff); kept != 9 {
		t.Fatalf("kept %d rows within retention, want 9", kept)
	}
	if v := testenv.Metric(t, reg, "inbox_swept_total"); v != 23 {
		t.Fatalf("inbox_swept_total = %v, want 23", v)
	}
	n, err = s.Sweep(testenv.Ctx(t))
	if err != nil || n != 0 {
		t.Fatalf("second sweep: %d rows, %v; want 0, nil", n, err)
	}
}

func TestConcurrentSweepersSplitTheWork(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	now := time.Date(2030, 1, 8, 0, 0, 0, 0, time.UTC)
	insertApplied(t, e, "a", now.Add(-8*24*time.Hour), 400)
	reg := prometheus.NewRegistry()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int64
	)
	for range 4 {
		s := newSweeper(t, e, inbox.SweeperConfig{BatchSize: 7, Registerer: reg, Now: func() time.Time { return now }})
		wg.Go(func() {
			n, err := s.Sweep(testenv.Ctx(t))
			if err != nil {
				t.Errorf("sweep: %v", err)
			}
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if total != 400 {
		t.Fatalf("sweepers deleted %d rows together, want each of the 400 once", total)
	}
	if left := e.Count(t, `SELECT count(*) FROM inbox`); left != 0 {
		t.Fatalf("%d rows left", left)
	}
	if v := testenv.Metric(t, reg, "inbox_swept_total"); v != 400 {
		t.Fatalf("inbox_swept_total = %v, want 400 (sweepers share the counter)", v)
	}
}

func TestRedeliveryWithinRetentionIsStillSkippedAfterASweep(t *testing.T) {
	t.Parallel()
	f := newFixture(t, topic)
	env := testenv.Envelope("test.effect", 1, 1)
	f.produce(t, message(t, env))
	stop := f.start(t, "late", nil)
	testenv.Eventually(t, 30*time.Second, "first delivery applied", func() bool { return f.handled(t, "late") == 1 })

	// applied_at comes from the database clock; put the sweeper's clock an
	// hour short of the row's expiry.
	clock := testenv.NewClock(time.Now().Add(inbox.DefaultRetention - time.Hour))
	s := newSweeper(t, f.e, inbox.SweeperConfig{Schema: testenv.Schema, Now: clock.Now})
	if n, err := s.Sweep(testenv.Ctx(t)); err != nil || n != 0 {
		t.Fatalf("sweep within retention: %d rows, %v; want 0, nil", n, err)
	}
	f.produce(t, message(t, env))
	testenv.Eventually(t, 30*time.Second, "redelivery handled", func() bool { return f.handled(t, "late") == 2 })
	if v := testenv.Metric(t, f.reg, "consumer_applied_total", "consumer", "late", "outcome", inbox.OutcomeDuplicate); v != 1 {
		t.Fatalf("duplicates = %v, want 1", v)
	}
	if n := f.e.Count(t, `SELECT count(*) FROM effects WHERE event_id = $1`, env.Id); n != 1 {
		t.Fatalf("effect rows = %d, want 1", n)
	}

	// Past retention the row goes, and the same event would apply again:
	// the window is the whole protection.
	clock.Advance(2 * time.Hour)
	if n, err := s.Sweep(testenv.Ctx(t)); err != nil || n != 1 {
		t.Fatalf("sweep past retention: %d rows, %v; want 1, nil", n, err)
	}
	f.produce(t, message(t, env))
	testenv.Eventually(t, 30*time.Second, "third delivery handled", func() bool { return f.handled(t, "late") == 3 })
	if n := f.e.Count(t, `SELECT count(*) FROM effects WHERE event_id = $1`, env.Id); n != 2 {
		t.Fatalf("effect rows = %d, want 2 once the inbox row is gone", n)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestSweeperRunSweepsOnItsInterval(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	clock := testenv.NewClock(time.Date(2030, 1, 8, 0, 0, 0, 0, time.UTC))
	insertApplied(t, e, "a", clock.Now().Add(-2*time.Hour), 3)
	insertApplied(t, e, "a", clock.Now().Add(-time.Minute), 2)
	s := newSweeper(t, e, inbox.SweeperConfig{Retention: time.Hour, Interval: 20 * time.Millisecond, Now: clock.Now})
	stop, done := testenv.Go(t, s.Run)

	testenv.Eventually(t, 30*time.Second, "due rows swept at start", func() bool {
		return e.Count(t, `SELECT count(*) FROM inbox`) == 2
	})
	// The rest become due only now, so only a later round can delete them.
	clock.Advance(time.Hour)
	testenv.Eventually(t, 30*time.Second, "rows swept by a later round", func() bool {
		return e.Count(t, `SELECT count(*) FROM inbox`) == 0
	})
	select {
	case err := <-done:
		t.Fatalf("Run returned early: %v", err)
	default:
	}
	if err := stop(); err != nil {
		t.Fatalf("Run on cancel = %v, want nil", err)
	}
}

func TestNewSweeperValidatesConfig(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	t.Run("nil pool", func(t *testing.T) {
		if _, err := inbox.NewSweeper(nil, inbox.SweeperConfig{}); err == nil {
			t.Fatal("accepted")
		}
	})
	t.Run("invalid schema", func(t *testing.T) {
		if _, err := inbox.NewSweeper(e.Pool, inbox.SweeperConfig{Schema: "Bad"}); err == nil {
			t.Fatal("accepted")
		}
	})
	t.Run("two sweepers share one registry", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		for range 2 {
			if _, err := inbox.NewSweeper(e.Pool, inbox.SweeperConfig{Registerer: reg}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestMigrationIndexesAppliedAt(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	n := e.Count(t, `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_namespace s ON s.oid = c.relnamespace
		WHERE s.nspname = $1 AND c.relname = 'inbox_applied_at_idx' AND i.indisvalid`, testenv.Schema)
	if n != 1 {
		t.Fatalf("valid inbox_applied_at_idx indexes = %d, want 1", n)
	}
}
