package catalogsync

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ChannelSuffix names the Postgres NOTIFY channel "<schema>_catalog": a
// service's catalog consumer notifies it in the transaction that changes
// its replica (Notify), and every pod's Cache on that schema LISTENs on it
// and drops its entries.
const ChannelSuffix = "_catalog"

// Channel is the notification channel of the replica in schema.
func Channel(schema string) string { return schema + ChannelSuffix }

// Notify queues the replica's change notification in tx (the consumer's
// inbox transaction): Postgres delivers it only if tx commits.
func Notify(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SELECT pg_notify(current_schema() || $1, '')`, ChannelSuffix); err != nil {
		return fmt.Errorf("notify catalog change: %w", err)
	}
	return nil
}

// Cache memoises reads of a catalog replica (keys, links, programs) on a
// hot path. The replica's consumer NOTIFYs Channel(schema) in the
// transaction that changes the replica; every pod LISTENs and drops the
// whole cache on a notification, so a change (a revoked key, a disabled
// link) is seen as soon as it commits, well before accounts' sync barrier
// can answer (its acknowledgement still travels through the outbox, Kafka
// and accounts). The cache is bypassed whenever the listener is not
// connected, entries expire after the TTL as a last resort, a generation
// counter keeps a read that raced a flush from being stored, and at its
// size the least recently used entry is evicted (a flood of unknown keys
// or codes cannot empty it of the hot ones).
type Cache[K comparable, V any] struct {
	pool    *pgxpool.Pool
	channel string
	logger  *slog.Logger

	ttl       time.Duration
	now       func() time.Time
	listening atomic.Bool
	mu        sync.Mutex // orders a store against a flush
	gen       atomic.Uint64
	lru       *lru.Cache[K, cached[V]]
}

// cached is a value and when it was loaded. (The library's expirable LRU
// starts a goroutine per cache that never ends; the TTL is checked on Get
// instead.)
type cached[V any] struct {
	v  V
	at time.Time
}

// CacheConfig sizes a Cache.
type CacheConfig struct {
	// Schema is the service's schema: it names the channel.
	Schema string
	// Size bounds the entries (default 50,000); TTL is the last resort
	// for a notification lost with its connection (default 30 s).
	Size int
	TTL  time.Duration
	// Now is the clock of the TTL (default time.Now).
	Now func() time.Time
}

// NewCache returns a cache over pool's replica in cfg.Schema; Run must be
// running for it to cache anything.
func NewCache[K comparable, V any](pool *pgxpool.Pool, cfg CacheConfig, logger *slog.Logger) (*Cache[K, V], error) {
	if cfg.Size <= 0 {
		cfg.Size = 50_000
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	l, err := lru.New[K, cached[V]](cfg.Size)
	if err != nil {
		return nil, fmt.Errorf("catalog cache: %w", err)
	}
	return &Cache[K, V]{pool: pool, channel: Channel(cfg.Schema), logger: logger, ttl: cfg.TTL, now: cfg.Now, lru: l}, nil
}

// Get returns k's cached value, or loads and stores it. load's errors are
// never stored.
func (c *Cache[K, V]) Get(ctx context.Context, k K, load func(context.Context) (V, error)) (V, error) {
	if !c.listening.Load() {
		return load(ctx)
	}
	now := c.now()
	if e, ok := c.lru.Get(k); ok && now.Sub(e.at) < c.ttl {
		return e.v, nil
	}
	gen := c.gen.Load()
	v, err := load(ctx)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if c.gen.Load() == gen && c.listening.Load() {
		c.lru.Add(k, cached[V]{v: v, at: now})
	}
	c.mu.Unlock()
	return v, nil
}

// Len is the number of entries (tests, metrics).
func (c *Cache[K, V]) Len() int { return c.lru.Len() }

// Listening reports whether the cache is in use (its listener connected).
func (c *Cache[K, V]) Listening() bool { return c.listening.Load() }

func (c *Cache[K, V]) flush() {
	c.mu.Lock()
	c.gen.Add(1)
	c.lru.Purge()
	c.mu.Unlock()
}

// Run keeps a LISTEN connection open, flushing on every notification and
// whenever the connection is lost, until ctx ends.
func (c *Cache[K, V]) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := c.listen(ctx)
		c.listening.Store(false)
		c.flush()
		if ctx.Err() != nil {
			return nil
		}
		c.logger.WarnContext(ctx, "catalog cache listener lost; reading the replica directly until it reconnects", "channel", c.channel, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
	return nil
}

func (c *Cache[K, V]) listen(ctx context.Context) error {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire listener connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{c.channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen %s: %w", c.channel, err)
	}
	defer func() {
		// The connection goes back to the pool: stop listening on it.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "UNLISTEN *")
	}()
	c.flush()
	c.listening.Store(true)
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			return err
		}
		c.flush()
	}
}
