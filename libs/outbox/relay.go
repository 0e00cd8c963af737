package outbox

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
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
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// Registerer receives the relay metrics; nil means not exported.
	Registerer prometheus.Registerer
	// Now is the clock for sent_at, lag and retention (default time.Now).
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

	// cursor is the highest id published. Marked rows leave entries in the
	// unsent index until vacuum, so a scan from the start of that index gets
	// slower with every event sent; scans start near the cursor instead,
	// lookback ids before it to pick up rows of transactions that were still
	// open at the last scan, and a full scan every fullScanEvery picks up
	// anything older. Only the relay goroutine touches these.
	cursor   int64
	lastFull time.Time
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
	scanLookback  = 10_000
	fullScanEvery = 5 * time.Second
)

// scanFloor is the id above which the next batch is read.
func (r *Relay) scanFloor() int64 {
	now := r.cfg.Now()
	if r.cursor <= scanLookback || now.Sub(r.lastFull) >= fullScanEvery {
		r.lastFull = now
		return 0
	}
	return r.cursor - scanLookback
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
// standby), LISTENs for Enqueue's notifications and publishes.
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

	var lastStats, lastSweep time.Time
	for {
		n, err := r.publishBatch(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, ok := errors.AsType[*afterPublishError](err); ok {
			return err
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

// readParked fills parked with the first parked row of each topic and key.
func (r *Relay) readParked(ctx context.Context, tx pgx.Tx, parked map[[2]string]int64) error {
	rows, err := tx.Query(ctx, `
		SELECT topic, key, min(id) FROM `+r.table+`
		WHERE parked_at IS NOT NULL AND sent_at IS NULL
		GROUP BY topic, key`)
	if err != nil {
		return fmt.Errorf("read parked outbox keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k  [2]string
			id int64
		)
		if err := rows.Scan(&k[0], &k[1], &id); err != nil {
			return fmt.Errorf("scan parked outbox key: %w", err)
		}
		parked[k] = id
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read parked outbox keys: %w", err)
	}
	return nil
}

// parking is a row to park, with why.
type parking struct {
	id     int64
	reason string
}

// publishBatch publishes the oldest unsent, unparked rows in one Kafka write
// and marks them sent, in one transaction whose row locks also keep a second
// relay (should two ever believe they hold the lock) off the same rows. A
// failure after the write leaves the rows unsent: they are published again
// later, never lost. A row the broker refuses for good is parked, and so is
// every later row of its topic and key (see publish).
func (r *Relay) publishBatch(ctx context.Context) (int, error) {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin outbox batch: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // no-op after commit

	// The first parked row of each topic and key: later rows of those keys
	// are held behind it. Usually none; a small partial index answers it.
	// Only this relay parks rows, so a stale answer (an Unpark committing
	// meanwhile) can only hold a row too many, which releaseHeld undoes.
	parked := map[[2]string]int64{}
	if !r.noneParked {
		if err := r.readParked(ctx, tx, parked); err != nil {
			return 0, err
		}
	}

	rows, err := tx.Query(ctx, `
		SELECT id, event_id::text, topic, key, event_type, payload, headers, created_at
		FROM `+r.table+`
		WHERE sent_at IS NULL AND parked_at IS NULL AND id > $2
		ORDER BY id
		LIMIT $1
		FOR UPDATE`, r.cfg.BatchSize, r.scanFloor())
	if err != nil {
		return 0, fmt.Errorf("read outbox batch: %w", err)
	}
	var batch []outboxRow
	for rows.Next() {
		var (
			row                            outboxRow
			eventID, topic, key, eventType string
			payload                        []byte
			headers                        map[string]string
		)
		if err := rows.Scan(&row.id, &eventID, &topic, &key, &eventType, &payload, &headers, &row.created); err != nil {
			rows.Close()
			return 0, fmt.Errorf("scan outbox row: %w", err)
		}
		if pid, ok := parked[[2]string{topic, key}]; ok && pid < row.id {
			row.heldBy = pid
		}
		r.cursor = max(r.cursor, row.id)
		row.msg = kafka.Message{
			Topic:   topic,
			Key:     []byte(key),
			Value:   payload,
			Headers: messageHeaders(headers, eventID, eventType),
		}
		batch = append(batch, row)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read outbox batch: %w", err)
	}
	if len(batch) == 0 {
		return 0, nil
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
	if len(ids) > 0 {
		mark := `UPDATE ` + r.table + ` SET sent_at = $1 WHERE id = ANY($2)`
		args := []any{now, ids}
		if r.cfg.DeleteSent {
			mark, args = `DELETE FROM `+r.table+` WHERE id = ANY($1)`, []any{ids}
		}
		if _, err := tx.Exec(ctx, mark, args...); err != nil {
			return 0, fmt.Errorf("mark %d outbox events sent: %w", len(ids), err)
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
			return 0, fmt.Errorf("park %d outbox events: %w", len(parks), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit outbox batch: %w", err)
	}
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
	if pubErr != nil {
		return 0, pubErr
	}
	return len(batch), nil
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
