// Package ratelimit is an in-memory, per-instance request limiter with fixed
// windows aligned to the clock (a one-minute window runs from :00 to :00),
// exact counts within a window, and a hard cap on the number of keys held.
package ratelimit

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"strings"
	"sync"
	"time"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultWindow  = time.Minute
	DefaultMaxKeys = 100_000
	DefaultShards  = 64
)

// bigShardEntries: a shard that held more keys than this in the last window
// gets fresh maps instead of cleared ones, so memory taken by a burst is
// returned once the burst is over (a cleared Go map keeps its size).
const bigShardEntries = 1024

// Config configures a Limiter.
type Config struct {
	// Limit is the number of requests allowed per key per window (>= 1).
	Limit int
	// Window is the window length; windows start at multiples of it since
	// the Unix epoch, so one-minute windows start on the minute. Default 1m.
	Window time.Duration
	// MaxKeys caps the keys held at once. When a shard is full, its oldest
	// key is evicted and would start counting again from zero. Default
	// 100,000. The cap is split evenly across shards, so eviction can begin
	// slightly before MaxKeys keys are live when keys hash unevenly.
	MaxKeys int
	// Shards is the number of independently locked partitions, rounded down
	// to a power of two and to at most MaxKeys. Default 64.
	Shards int
	// Now is the clock; default time.Now. Tests inject a fake one.
	Now func() time.Time
}

// Decision is the outcome of one Allow call.
type Decision struct {
	Allowed bool
	// Limit is the window's allowance, Remaining what is left after this
	// request (0 when refused).
	Limit     int
	Remaining int
	// Reset is the end of the current window.
	Reset time.Time
	// RetryAfter is the time until Reset when refused, 0 when allowed.
	RetryAfter time.Duration
}

// Limiter counts requests per key. It is safe for concurrent use.
type Limiter struct {
	limit    int32
	window   time.Duration
	now      func() time.Time
	seed     maphash.Seed
	mask     uint64
	perShard int
	shards   []shard
}

// shard holds the keys of one partition for the current window only. Keys
// live in slots, a ring filled in insertion order, so the oldest key is
// always at head and eviction is O(1) with no per-key allocation beyond the
// map entry.
type shard struct {
	mu    sync.Mutex
	start int64 // window start (Unix ns) the entries belong to
	index map[string]int32
	slots []slot
	head  int
	n     int
	// Keeps neighbouring shards' locks off one cache line.
	_ [64]byte
}

type slot struct {
	key   string
	count int32
}

// New validates cfg, applies defaults and returns a Limiter.
func New(cfg Config) (*Limiter, error) {
	if cfg.Limit < 1 || cfg.Limit > math.MaxInt32 {
		return nil, fmt.Errorf("ratelimit: limit %d out of range [1, %d]", cfg.Limit, math.MaxInt32)
	}
	if cfg.Window < 0 || cfg.MaxKeys < 0 || cfg.Shards < 0 {
		return nil, errors.New("ratelimit: window, max keys and shards must not be negative")
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.MaxKeys == 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.Shards == 0 {
		cfg.Shards = DefaultShards
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	shards := min(cfg.Shards, cfg.MaxKeys)
	shards = 1 << (bits.Len(uint(shards)) - 1) // round down to a power of two
	l := &Limiter{
		limit:    int32(cfg.Limit),
		window:   cfg.Window,
		now:      cfg.Now,
		seed:     maphash.MakeSeed(),
		mask:     uint64(shards - 1),
		perShard: cfg.MaxKeys / shards,
		shards:   make([]shard, shards),
	}
	for i := range l.shards {
		l.shards[i].index = make(map[string]int32)
	}
	return l, nil
}

// Limit returns the per-window allowance.
func (l *Limiter) Limit() int { return int(l.limit) }

// Allow counts one request for key and reports whether it is within the
// limit. Refused requests are not counted, so Remaining never goes negative
// and a burst of refusals does not extend anything.
func (l *Limiter) Allow(key string) Decision {
	now := l.now()
	startNs := l.windowStart(now)
	resetNs := startNs + int64(l.window)

	s := &l.shards[0]
	if l.mask != 0 { // one shard needs no hash
		s = &l.shards[maphash.String(l.seed, key)&l.mask]
	}
	s.mu.Lock()
	if s.start != startNs {
		s.resetTo(startNs)
	}
	i, ok := s.index[key]
	if !ok {
		i = s.insert(strings.Clone(key), l.perShard)
	}
	c := s.slots[i].count
	allowed := c < l.limit
	if allowed {
		c++
		s.slots[i].count = c
	}
	s.mu.Unlock()

	d := Decision{
		Allowed:   allowed,
		Limit:     int(l.limit),
		Remaining: int(l.limit - c),
		Reset:     time.Unix(0, resetNs),
	}
	if !allowed {
		d.RetryAfter = time.Duration(resetNs - now.UnixNano())
	}
	return d
}

// Peek reports what Allow would decide for key without counting anything
// or creating a bucket: Allowed when the key has requests left in the
// current window, Remaining what is left (not minus one), RetryAfter until
// the window ends when none is. FailedAuth checks with Peek before a key
// lookup and counts with Allow only once a lookup has failed.
func (l *Limiter) Peek(key string) Decision {
	now := l.now()
	startNs := l.windowStart(now)
	resetNs := startNs + int64(l.window)

	s := &l.shards[0]
	if l.mask != 0 {
		s = &l.shards[maphash.String(l.seed, key)&l.mask]
	}
	var c int32
	s.mu.Lock()
	if s.start == startNs {
		if i, ok := s.index[key]; ok {
			c = s.slots[i].count
		}
	}
	s.mu.Unlock()

	d := Decision{
		Allowed:   c < l.limit,
		Limit:     int(l.limit),
		Remaining: int(l.limit - c),
		Reset:     time.Unix(0, resetNs),
	}
	if !d.Allowed {
		d.RetryAfter = time.Duration(resetNs - now.UnixNano())
	}
	return d
}

// windowStart is the start (Unix ns) of the window holding t. Integer
// arithmetic instead of time.Truncate: it is on every request's path.
func (l *Limiter) windowStart(t time.Time) int64 {
	ns, w := t.UnixNano(), int64(l.window)
	rem := ns % w
	if rem < 0 { // floor for instants before 1970
		rem += w
	}
	return ns - rem
}

// resetTo drops the previous window's entries: with fixed windows they are
// all dead. Any change of window resets, including a clock stepping back.
func (s *shard) resetTo(startNs int64) {
	if s.n > bigShardEntries {
		s.index = make(map[string]int32)
		s.slots = nil
	} else {
		clear(s.index)
		clear(s.slots)
		s.slots = s.slots[:0]
	}
	s.start, s.head, s.n = startNs, 0, 0
}

// insert places key in the next ring slot, evicting the oldest key first
// when the shard is at capacity, and returns the slot index.
func (s *shard) insert(key string, capacity int) int32 {
	if s.n == capacity {
		delete(s.index, s.slots[s.head].key)
		s.slots[s.head] = slot{}
		s.head = (s.head + 1) % capacity
		s.n--
	}
	p := (s.head + s.n) % capacity
	if p == len(s.slots) {
		s.slots = append(s.slots, slot{})
	}
	s.slots[p] = slot{key: key}
	s.index[key] = int32(p)
	s.n++
	return int32(p)
}

// Len returns the number of keys held, all windows included; it never
// exceeds MaxKeys.
func (l *Limiter) Len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += s.n
		s.mu.Unlock()
	}
	return n
}

// Sweep drops entries of past windows in shards no request has touched since
// (active shards reset themselves). Calling it is optional: memory is capped
// either way; a periodic Sweep returns an idle limiter's memory sooner.
func (l *Limiter) Sweep() {
	startNs := l.windowStart(l.now())
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		if s.start != startNs && s.n > 0 {
			s.resetTo(startNs)
		}
		s.mu.Unlock()
	}
}
