package outbox

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/svc-dev/svc/libs/outbox/internal/metrics"
	"github.com/svc-dev/svc/libs/outbox/internal/wait"
	"github.com/svc-dev/svc/libs/pg"
)

// RelayConfig configures a Relay. Only Schema is required.
type RelayConfig struct {
	// Schema holds the outbox table (the service's schema).
	Schema string
	// BatchSize is the most rows published per Kafka write (default 1000).
	BatchSize int
	// PollInterval is how often the relay looks for rows without a
	// notification, a fallback for lost wake-ups (default 1 s).
	PollInterval time.Duration
	// StatsInterval is how often the backlog gauges are refreshed (a count
	// over the unsent rows); default the larger of PollInterval and 1s, so
	// a short poll interval does not turn a growing backlog into a growing
	// cost.
	StatsInterval time.Duration
	// LockRetryInterval is how often a standby relay retries the lock held by
	// another instance (default 1 s): the takeover delay after a holder dies.
	LockRetryInterval time.Duration
	// ErrorBackoff is the pause after a failed batch or a lost connection
	// (default 1 s).
	ErrorBackoff time.Duration
	// Retention is how long published rows are kept before the sweep deletes
	// them (default 72 h): enough to investigate a consumer incident.
	Retention time.Duration
	// SweepInterval is the time between sweeps (default 1 min).
	SweepInterval time.Duration
	// DeleteSent removes rows once published instead of marking them and
	// keeping them for Retention: for high-volume topics, where a kept row
	// costs a second row version and index entries per event and Kafka's own
	// retention is the record to investigate with.
	DeleteSent bool
	// ParkMissingTopicAfter is how long a row's topic may be reported
	// unknown before the row is parked (default 10 min): long enough for a
	// topic created late by the platform, short enough not to hold the
	// outbox for an hour. Other permanent errors (message too large, invalid
	// record) park at once; transient ones never do.
	ParkMissingTopicAfter time.Duration
	// GapTimeout is how long the relay waits for an id it read past (its
	// transaction was still open) before it stops holding back its scans for
	// it (default 5 min). Per-key order is kept for transactions shorter
	// than this; a row of a longer one is still published, at least once,
	// but possibly after later events of its key. Ids of rolled-back
	// transactions never show up, so each holds scans back this long: a
	// longer timeout costs scans over more index entries of sent rows.
	GapTimeout time.Duration
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// Registerer receives the relay metrics; nil means not exported.
	Registerer prometheus.Registerer
	// Now is the clock for sent_at, lag, retention and GapTimeout (default
	// time.Now).
	Now func() time.Time
	// AfterPublish, when set, is called after a batch was written to Kafka
	// and before its rows are marked sent. If it returns an error the batch
	// stays unmarked and Run returns that error: a test seam reproducing a
	// crash between publish and mark. Leave nil in services.
	AfterPublish func(ids []int64) error
}

// Relay publishes committed outbox rows of one schema to Kafka. Run it in
// every instance of the service: an advisory lock lets one publish while the
// others wait to take over.
type Relay struct {
	pool   *pgxpool.Pool
	writer *kafka.Writer
	cfg    RelayConfig
	log    *slog.Logger
	table  string // quoted "<schema>"."outbox"
	lockID int64
	notify string // channel "<schema>_outbox"
	m      relayMetrics

	// scan says where each batch starts reading (see scanState). Only the
	// relay goroutine touches it and the fields below; scan starts afresh
	// with each session.
	scan scanState
	// parkedSeen is the number of parked rows (held ones included) last
	// counted plus those parked since: fewer at the next count means rows
	// were unparked or discarded, below the scan's cursor.
	parkedSeen int64
	// gapsCapLogged: the warning that maxGaps was reached is logged once.
	gapsCapLogged bool
	// oldest is the created_at of the oldest unsent row at the last
	// successful backlog query (zero: none), for ageing the gauge when the
	// query fails.
	oldest time.Time
	// missingSince is when each row's topic was first reported unknown, for
	// ParkMissingTopicAfter; entries go when the row is published or parked.
	missingSince map[int64]time.Time
	// noneParked is true while the schema is known to have no parked rows:
	// the last backlog query counted none and this relay parked none since
	// (only the active relay parks rows). Batches then skip the parked-key
	// query. False at the start of each session.
	noneParked bool
}

const (
	// fullScanEvery is how often a batch reads from the first unsent row
	// whatever the gaps say: it picks up rows of expired gaps.
	fullScanEvery = 5 * time.Second
	// maxGaps bounds the ids a relay waits for (32 bytes each), so a storm
	// of rolled-back transactions cannot grow the set without limit; past
	// it the oldest are given up, as if expired.
	maxGaps = 100_000
)

// scanState decides where each batch starts reading. Marked rows leave
// entries in the unsent index until vacuum, so reading from the start of
// that index gets slower with every event sent; batches start just below
// the lowest id that may still turn into an unsent row instead, and that
// keeps per-key order: a row is never read after a later row of its key
// whose transaction began after it committed, because its id is lower and
// the scan starts below it. The ids waited for are:
//
//   - gaps: ids at or below the cursor (the highest id read) that no batch
//     has read, because their transactions were still open when a batch read
//     past them (or rolled back: such ids never show up). A gap is resolved
//     when its row is read and expires after GapTimeout.
//   - retry: rows read but neither published nor parked (a failed write).
//   - the session's start: ids below the first batch may belong to
//     transactions open at the time, which this relay cannot name. Until
//     every transaction open at the first batch has ended and a batch has
//     read from the start past them, or GapTimeout has passed, every batch
//     reads from the start.
//
// A batch also reads from the start every fullScanEvery, and after parked
// rows were released: that picks up expired gaps and unparked rows.
type scanState struct {
	started  bool
	cursor   int64
	gaps     []gap   // ascending by id, and so by since
	retry    []int64 // ascending
	lastFull time.Time
	fullDue  bool

	holdUntil time.Time // zero: not holding
	holdTop   int64     // the last id of the first batch
	holdXmax  string    // xid8: transactions below it were open or done at the first batch
	holdEnded bool      // they have all ended
}

// gap is an id read past, and when that was noticed.
type gap struct {
	id    int64
	since time.Time
}

// floor drops the gaps older than gapTimeout and returns the id above which
// the next batch reads, and how many gaps expired.
func (s *scanState) floor(now time.Time, gapTimeout time.Duration) (floor int64, expired int) {
	for expired < len(s.gaps) && now.Sub(s.gaps[expired].since) >= gapTimeout {
		expired++
	}
	s.gaps = slices.Delete(s.gaps, 0, expired)
	if !s.started || s.fullDue || s.holding(now) || now.Sub(s.lastFull) >= fullScanEvery {
		return 0, expired
	}
	floor = s.cursor
	if len(s.gaps) > 0 {
		floor = min(floor, s.gaps[0].id-1)
	}
	if len(s.retry) > 0 {
		floor = min(floor, s.retry[0]-1)
	}
	return floor, expired
}

func (s *scanState) holding(now time.Time) bool { return now.Before(s.holdUntil) }

// hold starts waiting for the transactions open at the session's first
// batch, whose last id was top; xmax bounds their transaction ids.
func (s *scanState) hold(until time.Time, top int64, xmax string) {
	s.holdUntil, s.holdTop, s.holdXmax, s.holdEnded = until, top, xmax, false
}

// record takes the outcome of a batch read above floor at now: read are the
// ids read (ascending), left those neither published nor parked, and full
// says the batch hit BatchSize (so it tells nothing of ids past its last).
// It returns how many of the oldest gaps were given up over maxGaps.
func (s *scanState) record(now time.Time, floor int64, read, left []int64, full bool) (dropped int) {
	if floor == 0 {
		s.lastFull, s.fullDue = now, false
		if s.holdEnded && (!full || read[len(read)-1] >= s.holdTop) {
			s.holdUntil, s.holdEnded = time.Time{}, false
		}
	}
	// A leftover this batch covered was read again (and is in left if it
	// failed again) or is gone.
	top := int64(math.MaxInt64)
	if full {
		top = read[len(read)-1]
	}
	retry := slices.Clone(left)
	for _, id := range s.retry {
		if id > top {
			retry = append(retry, id)
		}
	}
	s.retry = retry
	if len(read) == 0 {
		return 0
	}
	if len(s.gaps) > 0 {
		kept, j := s.gaps[:0], 0
		for _, g := range s.gaps {
			for j < len(read) && read[j] < g.id {
				j++
			}
			if j < len(read) && read[j] == g.id {
				continue // its transaction committed: resolved
			}
			kept = append(kept, g)
		}
		s.gaps = kept
	}
	last := read[len(read)-1]
	if !s.started {
		s.started, s.cursor = true, last
		return 0
	}
	if last <= s.cursor {
		return 0
	}
	lo := s.cursor + 1
	if last-s.cursor > maxGaps+int64(len(read)) {
		// A jump of the sequence: only the highest ids can be kept anyway.
		lo = last - maxGaps - int64(len(read))
		dropped = int(lo - s.cursor - 1)
	}
	i, _ := slices.BinarySearch(read, lo)
	next := lo
	for _, id := range read[i:] {
		for ; next < id; next++ {
			s.gaps = append(s.gaps, gap{id: next, since: now})
		}
		next = id + 1
	}
	s.cursor = last
	if over := len(s.gaps) - maxGaps; over > 0 {
		s.gaps = slices.Delete(s.gaps, 0, over)
		dropped += over
	}
	return dropped
}

type relayMetrics struct {
	backlog       prometheus.Gauge
	oldestAge     prometheus.Gauge
	lag           prometheus.Histogram
	published     prometheus.Counter
	errors        prometheus.Counter
	active        prometheus.Gauge
	swept         prometheus.Counter
	writeDuration prometheus.Histogram
	parked        prometheus.Gauge
	held          prometheus.Gauge
	parkedTotal   prometheus.Counter
}

// NewRelay validates cfg and registers the relay metrics. writer must not
// have a fixed Topic: every row names its own.
func NewRelay(pool *pgxpool.Pool, writer *kafka.Writer, cfg RelayConfig) (*Relay, error) {
	if pool == nil || writer == nil {
		return nil, errors.New("outbox relay: pool and writer are required")
	}
	if writer.Topic != "" {
		return nil, fmt.Errorf("outbox relay: writer has fixed topic %q; rows carry their own topics", writer.Topic)
	}
	if err := pg.ValidSchema(cfg.Schema); err != nil {
		return nil, fmt.Errorf("outbox relay: %w", err)
	}
	setDefault(&cfg.BatchSize, 1000)
	setDefault(&cfg.PollInterval, time.Second)
	setDefault(&cfg.StatsInterval, max(cfg.PollInterval, time.Second))
	setDefault(&cfg.LockRetryInterval, time.Second)
	setDefault(&cfg.ErrorBackoff, time.Second)
	setDefault(&cfg.Retention, 72*time.Hour)
	setDefault(&cfg.SweepInterval, time.Minute)
	setDefault(&cfg.ParkMissingTopicAfter, 10*time.Minute)
	setDefault(&cfg.GapTimeout, 5*time.Minute)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newRelayMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Relay{
		pool:   pool,
		writer: writer,
		cfg:    cfg,
		log:    logger.With("component", "outbox_relay", "schema", cfg.Schema),
		table:  pgx.Identifier{cfg.Schema, "outbox"}.Sanitize(),
		lockID: relayLockID(cfg.Schema),
		notify: cfg.Schema + "_outbox",
		m:      m,

		missingSince: map[int64]time.Time{},
	}, nil
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

func newRelayMetrics(reg prometheus.Registerer) (relayMetrics, error) {
	// RegisterInto keeps the already-registered twin when another relay of
	// this process registered first, so both update the same series.
	var err error
	m := relayMetrics{
		backlog: metrics.RegisterInto(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "outbox_backlog", Help: "Outbox rows not yet published (reported by the active relay).",
		}), &err),
		oldestAge: metrics.RegisterInto(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "outbox_oldest_unsent_age_seconds", Help: "Age of the oldest unpublished outbox row; 0 when there is none.",
		}), &err),
		lag: metrics.RegisterInto(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "outbox_relay_lag_seconds", Help: "Time from outbox insert to publication.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}), &err),
		published: metrics.RegisterInto(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outbox_published_total", Help: "Outbox rows published to Kafka and marked sent.",
		}), &err),
		errors: metrics.RegisterInto(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outbox_publish_errors_total", Help: "Failed outbox batches (read, publish or mark).",
		}), &err),
		active: metrics.RegisterInto(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "outbox_relay_active", Help: "1 while this instance holds the relay lock.",
		}), &err),
		swept: metrics.RegisterInto(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outbox_swept_total", Help: "Published outbox rows deleted after retention.",
		}), &err),
		writeDuration: metrics.RegisterInto(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "outbox_publish_duration_seconds", Help: "Duration of one batch write to Kafka.",
			Buckets: prometheus.DefBuckets,
		}), &err),
		parked: metrics.RegisterInto(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "outbox_parked", Help: "Outbox rows parked because the broker refuses them (reported by the active relay); replay with outbox.Unpark.",
		}), &err),
		held: metrics.RegisterInto(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "outbox_held", Help: "Outbox rows held behind a parked row of the same topic and key, to keep per-key order (reported by the active relay).",
		}), &err),
		parkedTotal: metrics.RegisterInto(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outbox_parked_total", Help: "Outbox rows parked because the broker refused them for good.",
		}), &err),
	}
	if err != nil {
		return m, fmt.Errorf("outbox relay: register metrics: %w", err)
	}
	return m, nil
}

// relayLockID derives the advisory-lock key that elects one relay per schema.
func relayLockID(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("outbox-relay:" + schema))
	return int64(h.Sum64())
}

// afterPublishError marks a failure reported by the AfterPublish seam: it
// ends Run instead of being retried.
type afterPublishError struct{ err error }

func (e *afterPublishError) Error() string { return "after publish: " + e.err.Error() }
func (e *afterPublishError) Unwrap() error { return e.err }

// Run publishes until ctx is cancelled, then returns nil. Database and Kafka
// failures are logged, counted and retried after ErrorBackoff; they never end
// Run. Only an AfterPublish failure does, with that error.
//
// Each session takes a dedicated connection out of the pool, waits for the
// schema's advisory lock on it (one active relay per schema; the lock is
// released when the connection closes, so a dead holder's lock passes to a
// standby), LISTENs for Enqueue's notifications and publishes. Every batch
// is read and marked on that same connection: a relay whose lock connection
// died (its backend terminated, the network cut) fails its next read or
// mark and ends the session instead of publishing beside the standby that
// took the lock over. The batch it had in flight stays unsent and the new
// holder publishes it again (at least once; the inboxes absorb the copy).
func (r *Relay) Run(ctx context.Context) error {
	for {
		err := r.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if ape, ok := errors.AsType[*afterPublishError](err); ok {
			return fmt.Errorf("outbox relay stopped: %w", ape)
		}
		r.log.WarnContext(ctx, "outbox relay session ended, retrying", "err", err)
		if !wait.Sleep(ctx, r.cfg.ErrorBackoff) {
			return nil
		}
	}
}

func (r *Relay) session(ctx context.Context) error {
	pc, err := r.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire relay connection: %w", err)
	}
	// Hijacked, the connection never returns to the pool holding our lock
	// and LISTEN; closing it releases both.
	conn := pc.Hijack()
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if err := r.acquireLock(ctx, conn); err != nil {
		return err
	}
	r.m.active.Set(1)
	r.noneParked = false
	// Another relay may have published while this one stood by, and the
	// gaps it knew of went with it: start from the beginning.
	r.scan = scanState{}
	r.parkedSeen = 0
	// The backlog gauges are the active relay's report: a pod that lost
	// the lock must not keep showing its last backlog, or the max over pods
	// would page for a relay that another pod has long since taken over.
	defer func() {
		r.m.active.Set(0)
		r.m.backlog.Set(0)
		r.m.oldestAge.Set(0)
		r.m.parked.Set(0)
		r.m.held.Set(0)
		r.oldest = time.Time{}
	}()
	r.log.InfoContext(ctx, "outbox relay active")
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{r.notify}.Sanitize()); err != nil {
		return fmt.Errorf("listen %s: %w", r.notify, err)
	}
	// The session's statements are each served by an index (the unsent and
	// parked rows' partial indexes, the key), but their plans are made once
	// per connection: made while the table was nearly empty they are
	// sequential scans, kept as it grows (a service that keeps its sent rows
	// read them all on every poll). Without sequential scans the planner
	// takes the index at any size; the connection is closed, never pooled.
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		return fmt.Errorf("relay session settings: %w", err)
	}

	var lastStats, lastSweep time.Time
	for {
		n, err := r.publishBatch(ctx, conn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, ok := errors.AsType[*afterPublishError](err); ok {
			return err
		}
		if err != nil && lockConnLost(conn) {
			// The lock may already be someone else's: not one more batch.
			r.m.errors.Inc()
			return fmt.Errorf("outbox batch on the lock connection: %w", err)
		}
		// The gauges are refreshed whatever the batch did: a relay failing
		// every batch is exactly when the backlog and the oldest row's age
		// must keep moving, or the alerts on them stay quiet. Under a steady
		// trickle this point is reached once per event, so the count query
		// is limited to one per StatsInterval.
		if lastStats.IsZero() || r.cfg.Now().Sub(lastStats) >= r.cfg.StatsInterval {
			r.releaseHeld(ctx)
			lastStats = r.refreshStats(ctx)
		}
		switch {
		case err != nil:
			r.m.errors.Inc()
			r.log.WarnContext(ctx, "outbox batch failed", "err", err)
			if !wait.Sleep(ctx, r.cfg.ErrorBackoff) {
				return ctx.Err()
			}
			continue
		case n == r.cfg.BatchSize:
			// More rows are probably waiting: go on without sleeping.
			continue
		}
		// Caught up.
		if now := r.cfg.Now(); now.Sub(lastSweep) >= r.cfg.SweepInterval {
			lastSweep = now
			r.sweep(ctx, now.Add(-r.cfg.Retention))
		}
		if err := r.waitForWork(ctx, conn); err != nil {
			return err
		}
	}
}

// acquireLock polls pg_try_advisory_lock rather than blocking in
// pg_advisory_lock, so a standby notices cancellation and a broken
// connection promptly.
func (r *Relay) acquireLock(ctx context.Context, conn *pgx.Conn) error {
	logged := false
	for {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, r.lockID).Scan(&ok); err != nil {
			return fmt.Errorf("try relay lock: %w", err)
		}
		if ok {
			return nil
		}
		if !logged {
			r.log.InfoContext(ctx, "outbox relay standing by: another instance holds the lock")
			logged = true
		}
		if !wait.Sleep(ctx, r.cfg.LockRetryInterval) {
			return ctx.Err()
		}
	}
}

// lockConnLost reports whether conn, and with it the relay lock, is gone
// or unusable after a failed batch. pgx closes a connection on any network
// or protocol failure; the error itself may as well be Kafka's.
func lockConnLost(conn *pgx.Conn) bool {
	return conn.IsClosed() || conn.PgConn().TxStatus() != 'I'
}

// waitForWork returns when a notification arrives or PollInterval passes. An
// error means the listening connection is gone (or ctx ended): the session
// must end, which also gives up the lock.
func (r *Relay) waitForWork(ctx context.Context, conn *pgx.Conn) error {
	waitCtx, cancel := context.WithTimeout(ctx, r.cfg.PollInterval)
	defer cancel()
	_, err := conn.WaitForNotification(waitCtx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case waitCtx.Err() != nil && !conn.IsClosed():
		// Poll interval elapsed; pgconn keeps the connection usable after a
		// deadline-induced timeout.
		return nil
	default:
		return fmt.Errorf("wait for outbox notification: %w", err)
	}
}

// outboxRow is one unsent row read by a batch.
type outboxRow struct {
	id      int64
	created time.Time
	heldBy  int64 // id of a parked row of the same topic and key before it (0: none)
	msg     kafka.Message
}

// readParked fills parked with the first parked row of each topic and key
// and returns how many rows are parked (held ones included).
func (r *Relay) readParked(ctx context.Context, conn *pgx.Conn, parked map[[2]string]int64) (int64, error) {
	rows, err := conn.Query(ctx, `
		SELECT topic, key, min(id), count(*) FROM `+r.table+`
		WHERE parked_at IS NOT NULL AND sent_at IS NULL
		GROUP BY topic, key`)
	if err != nil {
		return 0, fmt.Errorf("read parked outbox keys: %w", err)
	}
	defer rows.Close()
	var total int64
	for rows.Next() {
		var (
			k     [2]string
			id, n int64
		)
		if err := rows.Scan(&k[0], &k[1], &id, &n); err != nil {
			return 0, fmt.Errorf("scan parked outbox key: %w", err)
		}
		parked[k] = id
		total += n
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read parked outbox keys: %w", err)
	}
	return total, nil
}

// noteParked takes a new count of parked rows. Fewer than before means some
// were unparked or discarded (releasing the rows held behind them): their
// ids are below the cursor, so the next batch reads from the start.
func (r *Relay) noteParked(n int64) {
	if n < r.parkedSeen {
		r.scan.fullDue = true
	}
	r.parkedSeen = n
}

// parking is a row to park, with why.
type parking struct {
	id     int64
	reason string
}

// publishBatch publishes the oldest unsent, unparked rows in one Kafka write
// and marks them sent. Everything runs on conn, the connection holding the
// relay lock: the rows are read without a transaction (nothing is locked
// while Kafka is written to, which may take minutes with retries) and
// marked in a short transaction afterwards. The lock makes this relay the
// only one reading and marking rows; if the lock went with its connection,
// the read or the mark fails. A failure after the write leaves the rows
// unsent: they are published again later, never lost. A row the broker
// refuses for good is parked, and so is every later row of its topic and key
// (see publish).
func (r *Relay) publishBatch(ctx context.Context, conn *pgx.Conn) (int, error) {
	// The first parked row of each topic and key: later rows of those keys
	// are held behind it. Usually none; a small partial index answers it.
	// Only this relay parks rows, so a stale answer (an Unpark committing
	// meanwhile) can only hold a row too many, which releaseHeld undoes.
	parked := map[[2]string]int64{}
	if !r.noneParked {
		n, err := r.readParked(ctx, conn, parked)
		if err != nil {
			return 0, err
		}
		r.noteParked(n)
	}
	if err := r.checkHold(ctx, conn); err != nil {
		return 0, err
	}
	floor, expired := r.scan.floor(r.cfg.Now(), r.cfg.GapTimeout)
	if expired > 0 {
		r.log.DebugContext(ctx, "outbox relay stopped waiting for ids (rolled back, or open longer than the gap timeout)", "count", expired)
	}
	batch, err := r.readBatch(ctx, conn, floor, parked)
	if err != nil {
		return 0, err
	}
	// Gaps are stamped after the read: their transactions began before it.
	readAt := r.cfg.Now()
	full := len(batch) == r.cfg.BatchSize
	if len(batch) == 0 {
		r.scan.record(readAt, floor, nil, nil, false)
		return 0, nil
	}
	var holdXmax string
	if !r.scan.started {
		// Ids below the first batch were allocated before this relay looked;
		// those of transactions still open are unknown to it. They are
		// waited for as a whole: see scanState. (A transaction gets its xid
		// at its first write, microseconds after the outbox insert's nextval
		// when that insert is its first write: one caught in between is not
		// waited for.)
		if err := conn.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`).Scan(&holdXmax); err != nil {
			return 0, fmt.Errorf("read the transaction horizon: %w", err)
		}
	}

	sent, parks, pubErr := r.publish(ctx, batch)
	if len(sent) == 0 && len(parks) == 0 {
		return 0, pubErr
	}
	ids := make([]int64, len(sent))
	for i, row := range sent {
		ids[i] = row.id
	}
	if r.cfg.AfterPublish != nil && len(ids) > 0 {
		if err := r.cfg.AfterPublish(ids); err != nil {
			return 0, &afterPublishError{err: err}
		}
	}
	now := r.cfg.Now()
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return r.mark(ctx, tx, ids, parks, now) }); err != nil {
		return 0, err
	}
	r.parkedSeen += int64(len(parks))
	r.m.published.Add(float64(len(ids)))
	for _, row := range sent {
		r.m.lag.Observe(max(now.Sub(row.created).Seconds(), 0))
	}
	for _, p := range parks {
		delete(r.missingSince, p.id)
		if !strings.HasPrefix(p.reason, heldPrefix) {
			r.m.parkedTotal.Inc()
			r.log.ErrorContext(ctx, "outbox row parked: the broker refuses it; later rows of its key are held until outbox.Unpark", "outbox_id", p.id, "reason", p.reason)
		}
	}
	if len(ids) > 0 {
		r.log.DebugContext(ctx, "outbox batch published", "count", len(ids), "first_id", ids[0], "last_id", ids[len(ids)-1])
	}

	read := make([]int64, len(batch))
	done := make(map[int64]bool, len(sent)+len(parks))
	for _, row := range sent {
		done[row.id] = true
	}
	for _, p := range parks {
		done[p.id] = true
	}
	var left []int64
	for i, row := range batch {
		read[i] = row.id
		if !done[row.id] {
			left = append(left, row.id)
		}
	}
	started := r.scan.started
	if dropped := r.scan.record(readAt, floor, read, left, full); dropped > 0 && !r.gapsCapLogged {
		r.gapsCapLogged = true
		r.log.WarnContext(ctx, "outbox relay tracks too many unread ids; stopped waiting for the oldest", "dropped", dropped, "limit", maxGaps)
	}
	if !started {
		r.scan.hold(readAt.Add(r.cfg.GapTimeout), read[len(read)-1], holdXmax)
	}
	if pubErr != nil {
		return 0, pubErr
	}
	return len(batch), nil
}

// readBatch reads the first BatchSize unsent, unparked rows above floor, in
// id order, without locking them: only the lock holder reads and marks.
func (r *Relay) readBatch(ctx context.Context, conn *pgx.Conn, floor int64, parked map[[2]string]int64) ([]outboxRow, error) {
	rows, err := conn.Query(ctx, `
		SELECT id, event_id::text, topic, key, event_type, payload, headers, created_at
		FROM `+r.table+`
		WHERE sent_at IS NULL AND parked_at IS NULL AND id > $2
		ORDER BY id
		LIMIT $1`, r.cfg.BatchSize, floor)
	if err != nil {
		return nil, fmt.Errorf("read outbox batch: %w", err)
	}
	defer rows.Close()
	var batch []outboxRow
	for rows.Next() {
		var (
			row                            outboxRow
			eventID, topic, key, eventType string
			payload                        []byte
			headers                        map[string]string
		)
		if err := rows.Scan(&row.id, &eventID, &topic, &key, &eventType, &payload, &headers, &row.created); err != nil {
			return nil, fmt.Errorf("scan outbox row: %w", err)
		}
		if pid, ok := parked[[2]string{topic, key}]; ok && pid < row.id {
			row.heldBy = pid
		}
		row.msg = kafka.Message{
			Topic:   topic,
			Key:     []byte(key),
			Value:   payload,
			Headers: messageHeaders(headers, eventID, eventType),
		}
		batch = append(batch, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read outbox batch: %w", err)
	}
	return batch, nil
}

// mark records a published batch in tx: sent rows marked (or deleted with
// DeleteSent) and refused ones parked. A row already marked keeps its first
// sent_at.
func (r *Relay) mark(ctx context.Context, tx pgx.Tx, ids []int64, parks []parking, now time.Time) error {
	if len(ids) > 0 {
		mark := `UPDATE ` + r.table + ` SET sent_at = $1 WHERE id = ANY($2) AND sent_at IS NULL`
		args := []any{now, ids}
		if r.cfg.DeleteSent {
			mark, args = `DELETE FROM `+r.table+` WHERE id = ANY($1)`, []any{ids}
		}
		if _, err := tx.Exec(ctx, mark, args...); err != nil {
			return fmt.Errorf("mark %d outbox events sent: %w", len(ids), err)
		}
	}
	if len(parks) > 0 {
		r.noneParked = false
		pids := make([]int64, len(parks))
		reasons := make([]string, len(parks))
		for i, p := range parks {
			pids[i], reasons[i] = p.id, p.reason
		}
		if _, err := tx.Exec(ctx, `
			UPDATE `+r.table+` o SET parked_at = $1, park_reason = p.reason
			FROM unnest($2::bigint[], $3::text[]) AS p(id, reason)
			WHERE o.id = p.id`, now, pids, reasons); err != nil {
			return fmt.Errorf("park %d outbox events: %w", len(parks), err)
		}
	}
	return nil
}

// checkHold asks, while the session's start is held (see scanState),
// whether every transaction that was open at the first batch has ended.
func (r *Relay) checkHold(ctx context.Context, conn *pgx.Conn) error {
	if !r.scan.holding(r.cfg.Now()) || r.scan.holdEnded {
		return nil
	}
	var ended bool
	if err := conn.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot()) >= $1::text::xid8`, r.scan.holdXmax).Scan(&ended); err != nil {
		return fmt.Errorf("check the transaction horizon: %w", err)
	}
	r.scan.holdEnded = ended
	return nil
}

const heldPrefix = "held behind parked row "

// publish writes batch in one WriteMessages call. When that fails with an
// error that may be permanent, it writes the rows one at a time in id order
// to find the culprits: a row refused for good (or whose topic has been
// unknown for ParkMissingTopicAfter) is parked, and every later row of its
// topic and key is parked behind it, so per-key order holds; rows of other
// keys go on. A row whose topic is unknown but not for long yet is left
// unsent with the rest of its key for this pass. A transient error stops
// the pass: what was written is returned and the rest is retried later.
// Rows written by the failed whole-batch call are written again
// (at-least-once; inboxes absorb the duplicates).
func (r *Relay) publish(ctx context.Context, batch []outboxRow) (sent []outboxRow, parks []parking, err error) {
	var send []outboxRow
	for _, row := range batch {
		if row.heldBy != 0 {
			parks = append(parks, parking{id: row.id, reason: heldPrefix + strconv.FormatInt(row.heldBy, 10)})
		} else {
			send = append(send, row)
		}
	}
	if len(send) == 0 {
		return nil, parks, nil
	}
	msgs := make([]kafka.Message, len(send))
	for i, row := range send {
		msgs[i] = row.msg
	}
	start := r.cfg.Now()
	err = r.writer.WriteMessages(ctx, msgs...)
	r.m.writeDuration.Observe(r.cfg.Now().Sub(start).Seconds())
	if err == nil {
		return send, parks, nil
	}
	batchErr := fmt.Errorf("publish %d outbox events (ids %d..%d): %w", len(send), send[0].id, send[len(send)-1].id, err)
	if classifyPublish(err) == transient || ctx.Err() != nil {
		return nil, parks, batchErr
	}

	type topicKey struct{ topic, key string }
	stopped := map[topicKey]int64{} // key -> parked row id (0: waiting for its topic)
	var waitErr error
	for _, row := range send {
		k := topicKey{row.msg.Topic, string(row.msg.Key)}
		if pid, ok := stopped[k]; ok {
			if pid != 0 {
				parks = append(parks, parking{id: row.id, reason: heldPrefix + strconv.FormatInt(pid, 10)})
			}
			continue
		}
		err := r.writer.WriteMessages(ctx, row.msg)
		if err == nil {
			sent = append(sent, row)
			delete(r.missingSince, row.id)
			continue
		}
		if ctx.Err() != nil {
			return sent, parks, ctx.Err()
		}
		switch classifyPublish(err) {
		case permanent:
			parks = append(parks, parking{id: row.id, reason: err.Error()})
			stopped[k] = row.id
		case missingTopic:
			now := r.cfg.Now()
			first, ok := r.missingSince[row.id]
			if !ok {
				first = now
				r.missingSince[row.id] = now
			}
			if now.Sub(first) >= r.cfg.ParkMissingTopicAfter {
				parks = append(parks, parking{id: row.id, reason: fmt.Sprintf("topic unknown for %s: %v", now.Sub(first).Round(time.Second), err)})
				stopped[k] = row.id
				continue
			}
			stopped[k] = 0
			waitErr = fmt.Errorf("publish outbox event %d: %w", row.id, err)
		default:
			return sent, parks, fmt.Errorf("publish outbox event %d: %w", row.id, err)
		}
	}
	return sent, parks, waitErr
}

// messageHeaders turns the stored trace headers into Kafka headers (sorted,
// so identical rows give identical messages) and adds event_id and
// event_type, which consumers and tools read without decoding the payload.
func messageHeaders(stored map[string]string, eventID, eventType string) []kafka.Header {
	keys := make([]string, 0, len(stored))
	for k := range stored {
		if k != HeaderEventID && k != HeaderEventType {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := make([]kafka.Header, 0, len(keys)+2)
	for _, k := range keys {
		out = append(out, kafka.Header{Key: k, Value: []byte(stored[k])})
	}
	return append(out,
		kafka.Header{Key: HeaderEventID, Value: []byte(eventID)},
		kafka.Header{Key: HeaderEventType, Value: []byte(eventType)},
	)
}

// Kafka header names set by the relay on every message.
const (
	HeaderEventID   = "event_id"
	HeaderEventType = "event_type"
)

// releaseHeld unparks rows held behind a parked row that is parked no
// longer (replayed or discarded), so they flow again in id order. Unpark
// releases them itself; this catches a row held by a batch that read the
// parked row just before an Unpark or Discard committed, which would
// otherwise wait behind nothing. A failure is retried next time.
func (r *Relay) releaseHeld(ctx context.Context) {
	tag, err := r.pool.Exec(ctx, `
		UPDATE `+r.table+` o SET parked_at = NULL, park_reason = NULL
		WHERE o.parked_at IS NOT NULL AND o.sent_at IS NULL AND starts_with(o.park_reason, $1)
		  AND NOT EXISTS (
			SELECT 1 FROM `+r.table+` p
			WHERE p.parked_at IS NOT NULL AND p.sent_at IS NULL AND NOT starts_with(p.park_reason, $1)
			  AND p.topic = o.topic AND p.key = o.key AND p.id < o.id)`, heldPrefix)
	if err != nil {
		if ctx.Err() == nil {
			r.log.WarnContext(ctx, "outbox release of held rows failed", "err", err)
		}
		return
	}
	if n := tag.RowsAffected(); n > 0 {
		// Their ids are below the cursor.
		r.scan.fullDue = true
		r.log.InfoContext(ctx, "outbox rows held behind a released row flow again", "count", n)
	}
}

// refreshStats updates the backlog gauges. When the query fails (the
// database is unreachable, so nothing is being published either) the
// backlog keeps its last value and the oldest row's age keeps growing from
// the last oldest row seen: a relay cut off from Postgres still looks stuck.
func (r *Relay) refreshStats(ctx context.Context) time.Time {
	now := r.cfg.Now()
	var (
		n      int64
		oldest *time.Time
	)
	var parked, held int64
	err := r.pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE parked_at IS NULL), min(created_at) FILTER (WHERE parked_at IS NULL),
			count(*) FILTER (WHERE parked_at IS NOT NULL AND NOT starts_with(park_reason, $1)),
			count(*) FILTER (WHERE parked_at IS NOT NULL AND starts_with(park_reason, $1))
		FROM `+r.table+` WHERE sent_at IS NULL`, heldPrefix).Scan(&n, &oldest, &parked, &held)
	if err != nil {
		if ctx.Err() == nil {
			r.log.WarnContext(ctx, "outbox backlog query failed", "err", err)
		}
		if !r.oldest.IsZero() {
			r.m.oldestAge.Set(max(now.Sub(r.oldest).Seconds(), 0))
		}
		return now
	}
	r.m.backlog.Set(float64(n))
	r.m.parked.Set(float64(parked))
	r.noneParked = parked+held == 0
	r.noteParked(parked + held)
	r.m.held.Set(float64(held))
	age := 0.0
	r.oldest = time.Time{}
	if oldest != nil {
		r.oldest = *oldest
		age = max(now.Sub(*oldest).Seconds(), 0)
	}
	r.m.oldestAge.Set(age)
	return now
}

// sweep deletes rows published before cutoff, in chunks so no single
// statement holds many row locks or bloats one transaction.
func (r *Relay) sweep(ctx context.Context, cutoff time.Time) {
	const chunk = 5000
	for {
		tag, err := r.pool.Exec(ctx, `
			DELETE FROM `+r.table+`
			WHERE id IN (SELECT id FROM `+r.table+` WHERE sent_at < $1 LIMIT $2)`, cutoff, chunk)
		if err != nil {
			if ctx.Err() == nil {
				r.log.WarnContext(ctx, "outbox sweep failed", "err", err)
			}
			return
		}
		r.m.swept.Add(float64(tag.RowsAffected()))
		if tag.RowsAffected() < chunk {
			return
		}
	}
}
