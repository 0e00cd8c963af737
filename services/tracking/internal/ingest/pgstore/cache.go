package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/services/tracking/internal/ingest"
	"github.com/svc-dev/svc/services/tracking/internal/replica"
)

// catalogCache memoises the replica reads of the click path (links,
// programs, browser origins). The replica applier NOTIFYs
// "<schema>_catalog" in the transaction that changes the replica; every pod
// LISTENs and drops its whole cache on a notification, so a change is seen
// as soon as it commits, well before accounts' sync barrier can answer (the
// acknowledgement still has to travel through the outbox, Kafka and
// accounts). The cache is bypassed whenever the listener is not connected,
// entries expire after ttl as a last resort, and a generation counter keeps
// a read that raced a flush from being stored.
type catalogCache struct {
	pool    *pgxpool.Pool
	channel string
	ttl     time.Duration
	max     int
	now     func() time.Time
	logger  *slog.Logger

	listening atomic.Bool
	mu        sync.RWMutex
	gen       uint64
	entries   map[cacheKey]cacheEntry
}

type cacheKey struct {
	kind string // "link", "program", "origin"
	code string
	id   int64
}

type cacheEntry struct {
	at    time.Time
	found bool
	link  ingest.Link
	prog  ingest.Program
}

func newCatalogCache(pool *pgxpool.Pool, schema string, now func() time.Time, logger *slog.Logger) *catalogCache {
	return &catalogCache{
		pool: pool, channel: replica.Channel(schema), ttl: 30 * time.Second, max: 50_000, now: now, logger: logger,
		entries: map[cacheKey]cacheEntry{},
	}
}

// get returns a cached entry, or loads and stores it.
func (c *catalogCache) get(ctx context.Context, k cacheKey, load func(context.Context) (cacheEntry, error)) (cacheEntry, error) {
	if !c.listening.Load() {
		return load(ctx)
	}
	now := c.now()
	c.mu.RLock()
	e, ok := c.entries[k]
	gen := c.gen
	c.mu.RUnlock()
	if ok && now.Sub(e.at) < c.ttl {
		return e, nil
	}
	e, err := load(ctx)
	if err != nil {
		return e, err
	}
	e.at = now
	c.mu.Lock()
	if c.gen == gen && c.listening.Load() {
		if len(c.entries) >= c.max {
			// Bounded memory: a flood of unknown codes empties the cache
			// rather than growing it.
			c.entries = map[cacheKey]cacheEntry{}
		}
		c.entries[k] = e
	}
	c.mu.Unlock()
	return e, nil
}

func (c *catalogCache) flush() {
	c.mu.Lock()
	c.gen++
	c.entries = map[cacheKey]cacheEntry{}
	c.mu.Unlock()
}

// run keeps a LISTEN connection open, flushing on every notification and
// whenever the connection is lost, until ctx ends.
func (c *catalogCache) run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := c.listen(ctx)
		c.listening.Store(false)
		c.flush()
		if ctx.Err() != nil {
			return nil
		}
		c.logger.WarnContext(ctx, "catalog cache listener lost; reading the replica directly until it reconnects", "err", err)
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

func (c *catalogCache) listen(ctx context.Context) error {
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
