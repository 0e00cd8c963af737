package ratelimit_test

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/ratelimit"
)

// mutexMapLimiter is the reference the benchmarks compare against: the
// obvious fixed-window limiter, one lock around one map, no key cap.
type mutexMapLimiter struct {
	mu     sync.Mutex
	limit  int
	window time.Duration
	now    func() time.Time
	m      map[string]*mutexMapEntry
}

type mutexMapEntry struct {
	start int64
	count int
}

func (l *mutexMapLimiter) Allow(key string) bool {
	start := l.now().Truncate(l.window).UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[key]
	if !ok {
		e = &mutexMapEntry{start: start}
		l.m[key] = e
	} else if e.start != start {
		e.start, e.count = start, 0
	}
	if e.count >= l.limit {
		return false
	}
	e.count++
	return true
}

type allowFunc func(key string) bool

// implementations returns the limiter under test and the reference, both
// with a fixed clock (so the numbers measure the data structure, not
// time.Now) and a limit high enough that every request is counted.
func implementations(b *testing.B, maxKeys int) []struct {
	name  string
	allow allowFunc
} {
	b.Helper()
	now := func() time.Time { return noon }
	l, err := ratelimit.New(ratelimit.Config{Limit: math.MaxInt32, MaxKeys: maxKeys, Now: now})
	if err != nil {
		b.Fatal(err)
	}
	ref := &mutexMapLimiter{limit: math.MaxInt32, window: time.Minute, now: now, m: map[string]*mutexMapEntry{}}
	return []struct {
		name  string
		allow allowFunc
	}{
		{"sharded", func(k string) bool { return l.Allow(k).Allowed }},
		{"mutexmap", ref.Allow},
	}
}

func ipKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("ip:10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)
	}
	return keys
}

func BenchmarkAllowSingleKey(b *testing.B) {
	for _, impl := range implementations(b, 0) {
		b.Run(impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				impl.allow("ip:203.0.113.5")
			}
		})
	}
	b.Run("one-shard", func(b *testing.B) {
		l, err := ratelimit.New(ratelimit.Config{Limit: math.MaxInt32, Shards: 1, Now: func() time.Time { return noon }})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			l.Allow("ip:203.0.113.5")
		}
	})
	b.Run("sharded-realclock", func(b *testing.B) {
		l, err := ratelimit.New(ratelimit.Config{Limit: math.MaxInt32})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			l.Allow("ip:203.0.113.5")
		}
	})
}

func BenchmarkAllowManyKeys(b *testing.B) {
	cases := []struct {
		name    string
		keys    int
		maxKeys int
	}{
		// 10k live keys, all under the cap: lookups of existing keys.
		{"10k-keys", 10_000, 0},
		// 1M distinct keys against the default 100k cap: every request
		// inserts, and the sharded limiter evicts; the reference just grows.
		{"1M-distinct", 1_000_000, 0},
	}
	for _, c := range cases {
		keys := ipKeys(c.keys)
		b.Run(c.name, func(b *testing.B) {
			for _, impl := range implementations(b, c.maxKeys) {
				b.Run(impl.name, func(b *testing.B) {
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						impl.allow(keys[i%len(keys)])
						i++
					}
				})
			}
		})
	}
}

func BenchmarkAllowParallel(b *testing.B) {
	cases := []struct {
		name string
		keys int
	}{
		{"4-keys", 4},        // heavy contention on a few hot buckets
		{"10k-keys", 10_000}, // many clients spread over the shards
	}
	for _, c := range cases {
		keys := ipKeys(c.keys)
		b.Run(c.name, func(b *testing.B) {
			for _, impl := range implementations(b, 0) {
				b.Run(impl.name, func(b *testing.B) {
					b.ReportAllocs()
					var next atomic.Int64
					b.RunParallel(func(pb *testing.PB) {
						// Each goroutine walks the keys from its own offset.
						i := int(next.Add(1)) * 7919
						for pb.Next() {
							impl.allow(keys[i%len(keys)])
							i++
						}
					})
				})
			}
		})
	}
}

// Guards the benchmark fixture itself: the reference must count like the
// limiter so the comparison is fair.
func TestReferenceLimiterCountsLikeTheLimiter(t *testing.T) {
	clock := newFakeClock(noon)
	ref := &mutexMapLimiter{limit: 3, window: time.Minute, now: clock.Now, m: map[string]*mutexMapEntry{}}
	l := newLimiter(t, ratelimit.Config{Limit: 3, Now: clock.Now})
	for i := range 10 {
		if i == 6 {
			clock.Set(noon.Add(time.Minute))
		}
		k := "k" + strconv.Itoa(i%2)
		if got, want := ref.Allow(k), l.Allow(k).Allowed; got != want {
			t.Fatalf("request %d: reference %v, limiter %v", i, got, want)
		}
	}
}
