package server_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/pg/pgtest"
)

// clickStorm sends n clicks from workers concurrent clients (each its own
// address, so no client meets the rate limit) and returns the click ids of
// the 200 answers and how many answers were something else (always 5xx:
// a 4xx here would be a wrong answer to a good click).
func (s *stack) clickStorm(code string, n, workers int) (ok []string, failed int) {
	s.t.Helper()
	var (
		mu   sync.Mutex
		next atomic.Int64
		wg   sync.WaitGroup
	)
	body := jsonBody(map[string]any{"affiliate_url": "https://brand.example/?aff=" + code})
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ip := fmt.Sprintf("198.51.100.%d", w+1)
			for next.Add(1) <= int64(n) {
				r := s.call("POST", "/api/v1/track/click", body, "X-Forwarded-For", ip)
				mu.Lock()
				switch {
				case r.status == 200:
					ok = append(ok, r.body["click_id"].(string))
				case r.status >= 500:
					failed++
				default:
					s.t.Errorf("click answered %d: %s", r.status, r.raw)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ok, failed
}

// wantEachClickOnce checks that every answered click is stored once, with
// one event in the outbox, and that nothing else was stored.
func (s *stack) wantEachClickOnce(ok []string) {
	s.t.Helper()
	for _, id := range ok {
		if n := s.count(`SELECT count(*) FROM affiliate_click_events WHERE click_id = $1`, id); n != 1 {
			s.t.Fatalf("click %s stored %d times", id, n)
		}
	}
	if n := s.count(`SELECT count(*) FROM affiliate_click_events`); n != len(ok) {
		s.t.Fatalf("%d click events stored for %d clicks answered 200", n, len(ok))
	}
	if n := s.count(`SELECT count(*) FROM outbox WHERE event_type = 'tracking.click.recorded'`); n != len(ok) {
		s.t.Fatalf("%d click events in the outbox for %d clicks answered 200", n, len(ok))
	}
}

// Fault: the connection drops after the server committed a group of clicks
// but before the click writer heard so. The writer must find that the
// group committed, answer every click 200 and store nothing twice (it used
// to retry the group click by click, storing each again).
func TestDrillClickGroupCommitAnswerLost(t *testing.T) {
	t.Parallel()
	proxy, dsn := pgtest.StartProxy(t, pgtest.NewDatabase(t))
	s := startStack(t, map[string]string{
		"DATABASE_URL":           dsn,
		"TRACK_CLICK_RATE_LIMIT": "100000",
		// One writer, so concurrent clicks queue into groups.
		"CLICK_WRITERS": "1",
	})
	f := s.fixture()
	proxy.DropAfterCommit("affiliate_click_events")
	ok, failed := s.clickStorm(f.codeA, 40, 8)
	if proxy.Dropped() != 1 {
		t.Fatalf("the proxy cut %d connections after a click commit, want 1", proxy.Dropped())
	}
	if failed != 0 {
		t.Fatalf("%d clicks failed; a committed group must be answered 200", failed)
	}
	if len(ok) != 40 {
		t.Fatalf("%d clicks answered 200, want 40", len(ok))
	}
	s.wantEachClickOnce(ok)
}

// Drill: Postgres connections are killed (pg_terminate_backend) again and
// again while clicks arrive. A click may fail (5xx: its transaction was cut
// short), but every click answered 200 is stored exactly once, and nothing
// is stored for the others.
func TestDrillClickWriterConnectionsKilled(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	s := startStack(t, map[string]string{"DATABASE_URL": dsn, "TRACK_CLICK_RATE_LIMIT": "100000"})
	f := s.fixture()
	killer, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close(context.Background())

	const clicks = 400
	stop := make(chan struct{})
	var kills atomic.Int64
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		// Kill whenever another batch of clicks has been stored, so the kills
		// land while groups are being written, whatever the machine's speed.
		last := -1
		for {
			select {
			case <-stop:
				return
			default:
			}
			var stored int
			if err := killer.QueryRow(context.Background(), `SELECT count(*) FROM tracking.affiliate_click_events`).Scan(&stored); err != nil {
				t.Errorf("count clicks: %v", err)
				return
			}
			if stored/40 != last/40 || last < 0 {
				last = stored
				var n int64
				if err := killer.QueryRow(context.Background(), `
					SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
					WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
					t.Errorf("terminate backends: %v", err)
					return
				}
				kills.Add(n)
			}
			time.Sleep(5 * time.Millisecond) // pacing of the killer's own polling, not a wait for a condition
		}
	}()
	ok, failed := s.clickStorm(f.codeA, clicks, 8)
	close(stop)
	<-killed
	if kills.Load() == 0 {
		t.Fatal("no connection was killed: the drill proved nothing")
	}
	t.Logf("%d clicks answered 200, %d failed, %d backends killed", len(ok), failed, kills.Load())
	if len(ok)+failed != clicks {
		t.Fatalf("%d answers for %d clicks", len(ok)+failed, clicks)
	}
	// The kills also hit idle connections of the pools; drop them rather
	// than let the first query below meet one.
	s.pool.Reset()
	if len(ok) < clicks/2 {
		t.Fatalf("only %d of %d clicks succeeded while connections were killed", len(ok), clicks)
	}
	s.wantEachClickOnce(ok)
	// The service is still up and serving.
	if r := s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": "https://brand.example/?aff=" + f.codeA})); r.status != 200 {
		t.Fatalf("click after the drill: %d %s", r.status, r.raw)
	}
}
