package ratelimit_test

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/ratelimit"
)

// fakeClock is the injected clock: tests move time, never sleep.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// noon is a window start: 12:00:00 UTC.
var noon = time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)

func newLimiter(t testing.TB, cfg ratelimit.Config) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     ratelimit.Config
		wantErr bool
	}{
		{"defaults", ratelimit.Config{Limit: 60}, false},
		{"zero limit", ratelimit.Config{}, true},
		{"negative limit", ratelimit.Config{Limit: -1}, true},
		{"limit beyond int32", ratelimit.Config{Limit: 1 << 31}, true},
		{"negative window", ratelimit.Config{Limit: 1, Window: -time.Second}, true},
		{"negative max keys", ratelimit.Config{Limit: 1, MaxKeys: -1}, true},
		{"negative shards", ratelimit.Config{Limit: 1, Shards: -1}, true},
		{"max keys below shard count", ratelimit.Config{Limit: 1, MaxKeys: 3}, false},
		{"odd shard count", ratelimit.Config{Limit: 1, Shards: 7}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ratelimit.New(tt.cfg)
			if tt.wantErr {
				if err == nil {
					t.Fatal("want error, got nil")
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if l.Limit() != tt.cfg.Limit {
				t.Errorf("Limit() = %d", l.Limit())
			}
		})
	}
}

func TestAllowCountsExactlyAtTheBoundary(t *testing.T) {
	tests := []struct {
		name  string
		limit int
	}{
		{"click 60 per IP", 60},
		{"lead 30 per IP", 30},
		{"sale and refund 120 per key", 120},
		{"limit of one", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock(noon.Add(45 * time.Second))
			l := newLimiter(t, ratelimit.Config{Limit: tt.limit, Now: clock.Now})
			for i := 1; i <= tt.limit; i++ {
				d := l.Allow("ip:203.0.113.5")
				if !d.Allowed || d.Remaining != tt.limit-i || d.Limit != tt.limit {
					t.Fatalf("request %d: %+v, want allowed with remaining %d", i, d, tt.limit-i)
				}
				if d.RetryAfter != 0 {
					t.Fatalf("request %d: RetryAfter = %v on an allowed request", i, d.RetryAfter)
				}
			}
			d := l.Allow("ip:203.0.113.5")
			if d.Allowed || d.Remaining != 0 {
				t.Fatalf("request %d: %+v, want refused with remaining 0", tt.limit+1, d)
			}
			if want := noon.Add(time.Minute); !d.Reset.Equal(want) {
				t.Errorf("Reset = %v, want %v", d.Reset, want)
			}
			if d.RetryAfter != 15*time.Second {
				t.Errorf("RetryAfter = %v, want 15s", d.RetryAfter)
			}
		})
	}
}

func TestWindowsAreAlignedToTheClockAndResetOnTheMinute(t *testing.T) {
	clock := newFakeClock(noon.Add(30 * time.Second))
	l := newLimiter(t, ratelimit.Config{Limit: 2, Now: clock.Now})
	steps := []struct {
		name    string
		at      time.Duration // offset from noon
		allowed bool
		reset   time.Duration
	}{
		{"first in window", 30 * time.Second, true, time.Minute},
		{"second in window", 40 * time.Second, true, time.Minute},
		{"third refused", 50 * time.Second, false, time.Minute},
		{"last nanosecond of window still refused", time.Minute - 1, false, time.Minute},
		{"next window starts fresh", time.Minute, true, 2 * time.Minute},
		{"count is per window not sliding", time.Minute + time.Second, true, 2 * time.Minute},
		{"refused again in new window", time.Minute + 2*time.Second, false, 2 * time.Minute},
		{"skipping windows is fine", 10 * time.Minute, true, 11 * time.Minute},
	}
	for _, st := range steps {
		clock.Set(noon.Add(st.at))
		d := l.Allow("k")
		if d.Allowed != st.allowed || !d.Reset.Equal(noon.Add(st.reset)) {
			t.Fatalf("%s: %+v, want allowed=%v reset=%v", st.name, d, st.allowed, noon.Add(st.reset))
		}
	}
}

func TestKeysAreCountedSeparately(t *testing.T) {
	clock := newFakeClock(noon)
	l := newLimiter(t, ratelimit.Config{Limit: 1, Now: clock.Now})
	if !l.Allow("ip:a").Allowed || !l.Allow("ip:b").Allowed {
		t.Fatal("first request of each key refused")
	}
	if l.Allow("ip:a").Allowed {
		t.Error("second request of key a allowed")
	}
}

func TestEvictionDropsTheOldestKeyWhichRestartsItsCount(t *testing.T) {
	clock := newFakeClock(noon)
	l := newLimiter(t, ratelimit.Config{Limit: 1, MaxKeys: 3, Shards: 1, Now: clock.Now})
	for _, k := range []string{"a", "b", "c"} {
		if !l.Allow(k).Allowed {
			t.Fatalf("first request of %s refused", k)
		}
	}
	if l.Allow("b").Allowed {
		t.Fatal("b allowed twice before any eviction")
	}
	// A fourth key evicts a, the oldest; b and c keep their counts.
	if !l.Allow("d").Allowed {
		t.Fatal("d refused")
	}
	if got := l.Len(); got != 3 {
		t.Errorf("Len = %d, want 3", got)
	}
	if !l.Allow("a").Allowed {
		t.Error("evicted key a did not restart its count")
	}
	// Re-inserting a evicted b, the next oldest.
	if !l.Allow("b").Allowed {
		t.Error("evicted key b did not restart its count")
	}
	if l.Allow("d").Allowed {
		t.Error("d lost its count although it was not the oldest")
	}
}

func TestSweepDropsPastWindows(t *testing.T) {
	clock := newFakeClock(noon)
	l := newLimiter(t, ratelimit.Config{Limit: 5, Now: clock.Now})
	for i := range 5000 {
		l.Allow(strconv.Itoa(i))
	}
	if got := l.Len(); got != 5000 {
		t.Fatalf("Len = %d, want 5000", got)
	}
	l.Sweep()
	if got := l.Len(); got != 5000 {
		t.Fatalf("Len after sweep within the window = %d, want 5000", got)
	}
	clock.Set(noon.Add(time.Minute))
	l.Sweep()
	if got := l.Len(); got != 0 {
		t.Errorf("Len after sweep in the next window = %d, want 0", got)
	}
}

func TestClockSteppingBackStartsAFreshWindow(t *testing.T) {
	clock := newFakeClock(noon.Add(time.Minute))
	l := newLimiter(t, ratelimit.Config{Limit: 1, Now: clock.Now})
	l.Allow("k")
	clock.Set(noon)
	d := l.Allow("k")
	if !d.Allowed || !d.Reset.Equal(noon.Add(time.Minute)) {
		t.Errorf("after the clock stepped back: %+v", d)
	}
}

func TestConcurrentAllowsNeverExceedTheLimit(t *testing.T) {
	const (
		limit      = 100
		keys       = 8
		goroutines = 16
		perG       = 200 // 3200 requests over 8 keys: 400 per key, 4x the limit
	)
	clock := newFakeClock(noon)
	l := newLimiter(t, ratelimit.Config{Limit: limit, Now: clock.Now})
	var mu sync.Mutex
	allowed := make(map[string]int)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			local := make(map[string]int)
			for i := range perG {
				k := "k" + strconv.Itoa((g+i)%keys)
				if l.Allow(k).Allowed {
					local[k]++
				}
			}
			mu.Lock()
			for k, n := range local {
				allowed[k] += n
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	for i := range keys {
		k := "k" + strconv.Itoa(i)
		if allowed[k] != limit {
			t.Errorf("key %s: %d allowed, want exactly %d", k, allowed[k], limit)
		}
	}
}

// One million distinct client IPs inside one window must not grow the
// process past a fixed bound: the live key count stays at most MaxKeys and
// the heap, measured after GC, stays under heapBound. Without the cap the
// same run holds 1M keys and grows the heap by about 94 MiB (measured).
func TestMillionDistinctKeysStayWithinMemoryBound(t *testing.T) {
	const (
		distinct  = 1_000_000
		maxKeys   = ratelimit.DefaultMaxKeys
		heapBound = 32 << 20
		checkEach = 100_000
	)
	clock := newFakeClock(noon.Add(10 * time.Second))
	base := heapAfterGC()
	l := newLimiter(t, ratelimit.Config{Limit: 60, MaxKeys: maxKeys, Now: clock.Now})
	peak := uint64(0)
	for i := range distinct {
		// 10.x.y.z style keys, as ByIP produces them.
		key := fmt.Sprintf("ip:10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)
		if !l.Allow(key).Allowed {
			t.Fatalf("first request of distinct key %s refused", key)
		}
		if (i+1)%checkEach == 0 {
			if n := l.Len(); n > maxKeys {
				t.Fatalf("after %d keys: Len = %d > MaxKeys %d", i+1, n, maxKeys)
			}
			if h := heapAfterGC(); h > base {
				peak = max(peak, h-base)
			}
		}
	}
	if n := l.Len(); n > maxKeys || n < maxKeys*9/10 {
		t.Errorf("Len = %d, want between 90%% of MaxKeys and MaxKeys %d", n, maxKeys)
	}
	t.Logf("live keys %d, peak heap growth %.1f MiB (bound %d MiB)", l.Len(), float64(peak)/(1<<20), heapBound>>20)
	if peak > heapBound {
		t.Errorf("heap grew by %d bytes, bound %d", peak, heapBound)
	}
	runtime.KeepAlive(l)
}

func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
