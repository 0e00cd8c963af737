package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svc-dev/svc/libs/outbox/internal/metrics"
	"github.com/svc-dev/svc/libs/outbox/internal/wait"
	"github.com/svc-dev/svc/libs/pg"
)

// Sweeper defaults.
const (
	// DefaultRetention is how long an inbox row is kept. Redeliveries of a
	// consumer that commits its offsets (rebalances, restarts, relay
	// re-publishes) arrive within minutes; a week is far beyond that.
	DefaultRetention = 7 * 24 * time.Hour
	// DefaultSweepInterval is the pause between two sweeps.
	DefaultSweepInterval = time.Minute
	// DefaultSweepBatch is the most rows one DELETE removes.
	DefaultSweepBatch = 5000
)

// SweeperConfig configures a Sweeper. Every field is optional.
type SweeperConfig struct {
	// Schema, when set, qualifies the inbox table; otherwise it is found
	// through the pool's search_path (pg.Options.Schema).
	Schema string
	// Retention is how long a row is kept after its event was applied
	// (default DefaultRetention). An event that comes back after that is
	// applied again: see the README for when that can happen.
	Retention time.Duration
	// Interval is the pause between sweeps (default DefaultSweepInterval).
	Interval time.Duration
	// BatchSize is the most rows deleted per statement (default
	// DefaultSweepBatch).
	BatchSize int
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// Registerer receives inbox_swept_total; nil means not exported.
	Registerer prometheus.Registerer
	// Now is the clock the retention cutoff is taken from (default
	// time.Now).
	Now func() time.Time
}

// Sweeper deletes inbox rows older than its retention, for every consumer of
// the schema. Run it in every instance of the service: concurrent sweepers
// take disjoint rows and never wait for each other.
type Sweeper struct {
	pool  *pgxpool.Pool
	cfg   SweeperConfig
	log   *slog.Logger
	query string
	swept prometheus.Counter
}

// NewSweeper validates cfg and registers inbox_swept_total.
func NewSweeper(pool *pgxpool.Pool, cfg SweeperConfig) (*Sweeper, error) {
	if pool == nil {
		return nil, errors.New("inbox sweeper: pool is required")
	}
	table := "inbox"
	if cfg.Schema != "" {
		if err := pg.ValidSchema(cfg.Schema); err != nil {
			return nil, fmt.Errorf("inbox sweeper: %w", err)
		}
		table = pgx.Identifier{cfg.Schema, "inbox"}.Sanitize()
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultSweepInterval
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultSweepBatch
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	swept, err := metrics.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "inbox_swept_total", Help: "Inbox rows deleted after retention.",
	}))
	if err != nil {
		return nil, fmt.Errorf("inbox sweeper: register metrics: %w", err)
	}
	return &Sweeper{
		pool: pool,
		cfg:  cfg,
		log:  logger.With("component", "inbox_sweeper"),
		// ctid = ANY(ARRAY(...)) makes the plan a TID scan over the rows the
		// subquery picked through inbox_applied_at_idx; "(consumer,
		// event_id) IN (...)" was planned as a hash join over a sequential
		// scan of the whole table. SKIP LOCKED lets the sweepers of several
		// instances split the work instead of queueing behind each other.
		query: `DELETE FROM ` + table + ` WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM ` + table + ` WHERE applied_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED))`,
		swept: swept,
	}, nil
}

// Run sweeps at once and then every Interval until ctx is cancelled, and
// returns nil. A failed sweep is logged and tried again at the next
// interval: a late sweep only costs table size.
func (s *Sweeper) Run(ctx context.Context) error {
	for {
		n, err := s.Sweep(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			s.log.WarnContext(ctx, "inbox sweep failed", "swept", n, "err", err)
		} else if n > 0 {
			s.log.DebugContext(ctx, "inbox swept", "swept", n)
		}
		if !wait.Sleep(ctx, s.cfg.Interval) {
			return nil
		}
	}
}

// Sweep deletes every row applied before Now() - Retention, in statements of
// at most BatchSize rows, each its own short transaction so no lock is held
// for long and the work done before a failure stays done. It returns how
// many rows it deleted.
func (s *Sweeper) Sweep(ctx context.Context) (int64, error) {
	cutoff := s.cfg.Now().Add(-s.cfg.Retention)
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, s.query, cutoff, s.cfg.BatchSize)
		if err != nil {
			return total, fmt.Errorf("sweep inbox rows applied before %s: %w", cutoff.Format(time.RFC3339), err)
		}
		n := tag.RowsAffected()
		total += n
		s.swept.Add(float64(n))
		// A short batch means no more unlocked rows are due; rows another
		// sweeper holds are its to delete.
		if n < int64(s.cfg.BatchSize) {
			return total, nil
		}
	}
}
