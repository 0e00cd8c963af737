package catalogsync_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/pg"
)

// The cache serves repeated reads from memory only while its listener is
// connected, drops everything when a replica change commits (not when it
// rolls back), evicts the least recently used entry at its size, expires
// entries on its clock, and never stores a failed load.
func TestCache(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := setup(t)
	var now atomic.Int64
	now.Store(time.Unix(1700000000, 0).UnixNano())
	c, err := catalogsync.NewCache[string, int](pool, catalogsync.CacheConfig{Schema: "replica", Size: 2, TTL: time.Minute,
		Now: func() time.Time { return time.Unix(0, now.Load()) }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var loads atomic.Int64
	get := func(t *testing.T, k string) int {
		t.Helper()
		v, err := c.Get(ctx, k, func(context.Context) (int, error) { return int(loads.Add(1)), nil })
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	waitFor := func(t *testing.T, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// Before the listener connects, every read loads.
	if a, b := get(t, "a"), get(t, "a"); a == b {
		t.Fatalf("cached without a listener: %d %d", a, b)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	waitFor(t, "the listener", c.Listening)

	first := get(t, "a")
	if again := get(t, "a"); again != first {
		t.Fatalf("not cached: %d then %d", first, again)
	}

	t.Run("a rolled-back change keeps the entries; a committed one drops them", func(t *testing.T) {
		rollback := errors.New("rollback")
		if err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
			if err := catalogsync.Notify(ctx, tx); err != nil {
				return err
			}
			return rollback
		}); !errors.Is(err, rollback) {
			t.Fatal(err)
		}
		if got := get(t, "a"); got != first {
			t.Fatalf("a rolled-back change flushed: %d, want %d", got, first)
		}
		if err := pg.InTx(ctx, pool, func(tx pgx.Tx) error { return catalogsync.Notify(ctx, tx) }); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the flush", func() bool { return c.Len() == 0 })
		if got := get(t, "a"); got == first {
			t.Fatal("still cached after a committed change")
		}
	})

	t.Run("least recently used evicted at the size; expiry on the clock", func(t *testing.T) {
		a := get(t, "a")
		b := get(t, "b")
		_ = get(t, "a") // a is now more recent than b
		_ = get(t, "c") // evicts b
		if got := get(t, "a"); got != a {
			t.Fatalf("a evicted: %d, want %d", got, a)
		}
		if got := get(t, "b"); got == b {
			t.Fatal("b not evicted")
		}
		a = get(t, "a")
		now.Add(int64(2 * time.Minute))
		if got := get(t, "a"); got == a {
			t.Fatal("not expired after the TTL")
		}
	})

	t.Run("a failed load is not stored", func(t *testing.T) {
		boom := errors.New("boom")
		if _, err := c.Get(ctx, "z", func(context.Context) (int, error) { return 0, boom }); !errors.Is(err, boom) {
			t.Fatalf("err %v", err)
		}
		if got := get(t, "z"); got == 0 {
			t.Fatal("the failed load was stored")
		}
	})

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if c.Listening() {
		t.Fatal("still listening after Run ended")
	}
}
