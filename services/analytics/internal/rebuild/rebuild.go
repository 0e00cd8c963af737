// Package rebuild recomputes analytics' aggregates from the events kept on
// their topics (`analytics rebuild`): every event from the first retained
// offset is applied, by the live consumers' own functions, into a new
// generation of the aggregate tables in a schema beside the live one,
// while the live consumers keep running; then, holding the live tables
// against writes, the events that arrived meanwhile are applied too and
// the generations are swapped in one transaction. The live consumers
// resume on the new tables: an event they then apply that the rebuild
// applied already is counted once (the aggregates dedupe by the
// producer's own ids), so nothing is lost or counted twice.
package rebuild

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/analytics/internal/fx"
)

// Tables are the aggregates the event consumers write, in the order they
// are created and swapped. The catalog replica, the rates and the inbox
// are not rebuilt.
func Tables() []string {
	return []string{
		"activity_buckets", "money_buckets", "activity_days", "money_days", "customers", "counted", "test_events",
		"sources", "customer_sources", "source_buckets", "source_money", "partner_buckets", "partner_money", "unsourced_sales",
	}
}

// Apply applies one event inside a transaction (the consumers' functions).
type Apply func(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error

// Source is a topic and what applies its events; sources are read in
// order, each wholly before the next (tracking's customers before the
// ledger's sales that name them).
type Source struct {
	Topic string
	Apply Apply
}

// Config is a rebuild's inputs.
type Config struct {
	Pool    *pgxpool.Pool
	Schema  string // the live schema (analytics)
	Brokers []string
	Sources []Source
	Logger  *slog.Logger
	// Progress gets a line per phase (the command's stdout).
	Progress io.Writer
	// BatchSize is events per transaction (default 500).
	BatchSize int
	Now       func() time.Time
	// WritersLock is the advisory lock every transaction writing the live
	// figures holds shared from before its first write (the consumers'
	// aggregate.FiguresLock); the switch takes it exclusively first, so it
	// never waits for a table a waiting writer holds.
	WritersLock int64
	// AllowLoss switches even when the new generation counts fewer events
	// than the live one (the topics no longer hold all of history).
	AllowLoss bool
}

// Result is what a rebuild did.
type Result struct {
	Generation int64
	Events     int64 // events applied to the new generation
	Skipped    int64 // undecodable messages (the live consumer dead-letters them)
	Took       time.Duration
}

// ErrFewer: the retained events make fewer figures than the live ones;
// nothing was switched.
var ErrFewer = errors.New("the retained events count fewer events than the live figures")

// ErrRunning: another rebuild of the schema holds its lock.
var ErrRunning = errors.New("another rebuild of this schema is running")

// Run rebuilds the aggregates and swaps them in.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	start := cfg.Now()
	lockConn, err := cfg.Pool.Acquire(ctx)
	if err != nil {
		return Result{}, err
	}
	defer lockConn.Release()
	var locked bool
	if err := lockConn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtext($1))`, cfg.Schema+".rebuild").Scan(&locked); err != nil {
		return Result{}, err
	}
	if !locked {
		return Result{}, ErrRunning
	}
	defer func() {
		_, _ = lockConn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext($1))`, cfg.Schema+".rebuild")
	}()

	r := &run{cfg: cfg, next: cfg.Schema + "_rebuild", retired: cfg.Schema + "_retired"}
	var res Result
	if err := cfg.Pool.QueryRow(ctx, `INSERT INTO rebuilds (started_at, status) VALUES ($1, 'running') RETURNING id`, start).Scan(&res.Generation); err != nil {
		return Result{}, fmt.Errorf("record the rebuild: %w", err)
	}
	err = r.rebuild(ctx, &res)
	res.Took = cfg.Now().Sub(start)
	status, detail := "done", ""
	if err != nil {
		status, detail = "failed", err.Error()
		_, _ = cfg.Pool.Exec(context.WithoutCancel(ctx), `DROP SCHEMA IF EXISTS `+pgx.Identifier{r.next}.Sanitize()+` CASCADE`)
	}
	if _, uerr := cfg.Pool.Exec(context.WithoutCancel(ctx), `UPDATE rebuilds SET finished_at = $2, status = $3, events = $4, detail = $5 WHERE id = $1`,
		res.Generation, cfg.Now(), status, res.Events, detail); uerr != nil && err == nil {
		err = fmt.Errorf("record the rebuild's end: %w", uerr)
	}
	return res, err
}

type run struct {
	cfg           Config
	next, retired string
}

func (r *run) say(format string, args ...any) { fmt.Fprintf(r.cfg.Progress, format+"\n", args...) }

func (r *run) rebuild(ctx context.Context, res *Result) error {
	if err := r.createGeneration(ctx); err != nil {
		return fmt.Errorf("create the new generation: %w", err)
	}
	r.say("new generation %d in schema %s", res.Generation, r.next)
	// Pass 1: everything retained, up to the ends the topics have now.
	from := map[string]map[int]int64{}
	for _, src := range r.cfg.Sources {
		ends, err := r.ends(ctx, src.Topic)
		if err != nil {
			return err
		}
		starts := map[int]int64{}
		for p, e := range ends {
			starts[p] = e.first
		}
		n, skipped, err := r.replay(ctx, nil, src, starts, ends)
		if err != nil {
			return err
		}
		res.Events, res.Skipped = res.Events+n, res.Skipped+skipped
		r.say("%s: %d events applied", src.Topic, n)
		from[src.Topic] = endOffsets(ends)
	}
	// Pass 2, still beside the live consumers: what arrived during pass 1.
	for _, src := range r.cfg.Sources {
		ends, err := r.ends(ctx, src.Topic)
		if err != nil {
			return err
		}
		n, skipped, err := r.replay(ctx, nil, src, from[src.Topic], ends)
		if err != nil {
			return err
		}
		res.Events, res.Skipped = res.Events+n, res.Skipped+skipped
		from[src.Topic] = endOffsets(ends)
	}
	// The switch: the writers held off, the live tables locked, the last
	// events applied, the generations swapped, in one transaction. Should
	// Postgres still abort it for a deadlock or a lock timeout, it is tried
	// again.
	for attempt := 1; ; attempt++ {
		events := res.Events
		err := r.switchOver(ctx, res, from)
		var pgErr *pgconn.PgError
		if err == nil || attempt == 5 || !errors.As(err, &pgErr) || (pgErr.Code != "40P01" && pgErr.Code != "55P03") {
			return err
		}
		res.Events = events
		r.say("switch attempt %d: %v; again", attempt, err)
	}
}

func (r *run) switchOver(ctx context.Context, res *Result, from map[string]map[int]int64) error {
	return pgx.BeginFunc(ctx, r.cfg.Pool, func(tx pgx.Tx) error {
		live := make([]string, 0, len(Tables()))
		for _, t := range Tables() {
			live = append(live, pgx.Identifier{r.cfg.Schema, t}.Sanitize())
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, r.cfg.WritersLock); err != nil {
			return fmt.Errorf("hold the writers: %w", err)
		}
		// No writer is inside now; readers (the routes) finish their
		// queries and wait for the switch.
		if _, err := tx.Exec(ctx, `LOCK TABLE `+strings.Join(live, ", ")+` IN ACCESS EXCLUSIVE MODE`); err != nil {
			return fmt.Errorf("hold the live tables: %w", err)
		}
		var tail int64
		for _, src := range r.cfg.Sources {
			ends, err := r.ends(ctx, src.Topic)
			if err != nil {
				return err
			}
			n, skipped, err := r.replay(ctx, tx, src, from[src.Topic], ends)
			if err != nil {
				return err
			}
			tail += n
			res.Events, res.Skipped = res.Events+n, res.Skipped+skipped
		}
		// A topic trimmed by retention (or a broker that lost its data)
		// would make a generation with less history than the live one:
		// switching to it would erase figures.
		var liveN, nextN int64
		if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+pgx.Identifier{r.cfg.Schema, "counted"}.Sanitize()+`)
				+ (SELECT count(*) FROM `+pgx.Identifier{r.cfg.Schema, "customers"}.Sanitize()+`),
			(SELECT count(*) FROM `+pgx.Identifier{r.next, "counted"}.Sanitize()+`)
				+ (SELECT count(*) FROM `+pgx.Identifier{r.next, "customers"}.Sanitize()+`)`).Scan(&liveN, &nextN); err != nil {
			return fmt.Errorf("compare the generations: %w", err)
		}
		if nextN < liveN && !r.cfg.AllowLoss {
			return fmt.Errorf("%w (%d events and customers rebuilt, %d live): the topics no longer hold all of history (retention, a lost broker); the live figures are kept; --allow-loss switches anyway", ErrFewer, nextN, liveN)
		}
		// Rates imported while the generation was built converted none of
		// its amounts already written (an import holds the writers'
		// lock, which this transaction holds now).
		if _, err := fx.RefreshDollars(ctx, tx, r.next); err != nil {
			return err
		}
		if err := r.swap(ctx, tx); err != nil {
			return fmt.Errorf("swap the generations: %w", err)
		}
		r.say("switched to generation %d (%d events applied while holding the live tables)", res.Generation, tail)
		return nil
	})
}

// createGeneration makes the new generation's empty tables, shaped like
// the live ones (columns, defaults, constraints, indexes).
func (r *run) createGeneration(ctx context.Context) error {
	next := pgx.Identifier{r.next}.Sanitize()
	stmts := []string{`DROP SCHEMA IF EXISTS ` + next + ` CASCADE`, `CREATE SCHEMA ` + next}
	for _, t := range Tables() {
		stmts = append(stmts, `CREATE TABLE `+pgx.Identifier{r.next, t}.Sanitize()+` (LIKE `+pgx.Identifier{r.cfg.Schema, t}.Sanitize()+` INCLUDING ALL)`)
	}
	// sources.id's sequence belongs to the live table (and goes when it
	// is dropped): the new table gets its own, past every live id so an id
	// never names two sources.
	seq := pgx.Identifier{r.next, "sources_id_seq"}.Sanitize()
	stmts = append(stmts,
		`CREATE SEQUENCE `+seq+` OWNED BY `+pgx.Identifier{r.next, "sources", "id"}.Sanitize(),
		`ALTER TABLE `+pgx.Identifier{r.next, "sources"}.Sanitize()+` ALTER COLUMN id SET DEFAULT nextval('`+seq+`')`,
		`SELECT setval('`+seq+`', GREATEST((SELECT last_value FROM `+pgx.Identifier{r.cfg.Schema, "sources_id_seq"}.Sanitize()+`), 1))`,
	)
	for _, s := range stmts {
		if _, err := r.cfg.Pool.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// swap moves the live tables out and the new ones in, then drops the old.
func (r *run) swap(ctx context.Context, tx pgx.Tx) error {
	retired := pgx.Identifier{r.retired}.Sanitize()
	stmts := []string{`DROP SCHEMA IF EXISTS ` + retired + ` CASCADE`, `CREATE SCHEMA ` + retired}
	for _, t := range Tables() {
		stmts = append(stmts, `ALTER TABLE `+pgx.Identifier{r.cfg.Schema, t}.Sanitize()+` SET SCHEMA `+retired)
	}
	for _, t := range Tables() {
		stmts = append(stmts, `ALTER TABLE `+pgx.Identifier{r.next, t}.Sanitize()+` SET SCHEMA `+pgx.Identifier{r.cfg.Schema}.Sanitize())
	}
	stmts = append(stmts, `DROP SCHEMA `+retired+` CASCADE`, `DROP SCHEMA `+pgx.Identifier{r.next}.Sanitize())
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

type partitionEnd struct{ first, end int64 } // end: the offset after the last message

func endOffsets(ends map[int]partitionEnd) map[int]int64 {
	out := make(map[int]int64, len(ends))
	for p, e := range ends {
		out[p] = e.end
	}
	return out
}

// ends reads each partition's first retained offset and its end.
func (r *run) ends(ctx context.Context, topic string) (map[int]partitionEnd, error) {
	client := &kafka.Client{Addr: kafka.TCP(r.cfg.Brokers...), Timeout: 30 * time.Second}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil {
		return nil, fmt.Errorf("metadata of %s: %v", topic, md.Topics)
	}
	var reqs []kafka.OffsetRequest
	for _, p := range md.Topics[0].Partitions {
		reqs = append(reqs, kafka.FirstOffsetOf(p.ID), kafka.LastOffsetOf(p.ID))
	}
	offs, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("offsets of %s: %w", topic, err)
	}
	out := map[int]partitionEnd{}
	for _, po := range offs.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("offsets of %s/%d: %w", topic, po.Partition, po.Error)
		}
		out[po.Partition] = partitionEnd{first: po.FirstOffset, end: po.LastOffset}
	}
	return out, nil
}

// replay applies each partition's messages in [from, end) to the new
// generation, in batches of transactions (or all in tx when given).
func (r *run) replay(ctx context.Context, tx pgx.Tx, src Source, from map[int]int64, ends map[int]partitionEnd) (applied, skipped int64, err error) {
	for p, e := range ends {
		start, ok := from[p]
		if !ok || start < e.first {
			start = e.first // a new partition, or one trimmed since
		}
		if start >= e.end {
			continue
		}
		n, s, err := r.replayPartition(ctx, tx, src, p, start, e.end)
		applied, skipped = applied+n, skipped+s
		if err != nil {
			return applied, skipped, err
		}
	}
	return applied, skipped, nil
}

func (r *run) replayPartition(ctx context.Context, tx pgx.Tx, src Source, partition int, from, end int64) (applied, skipped int64, err error) {
	reader := kafka.NewReader(kafka.ReaderConfig{Brokers: r.cfg.Brokers, Topic: src.Topic, Partition: partition,
		MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 250 * time.Millisecond})
	defer reader.Close()
	if err := reader.SetOffset(from); err != nil {
		return 0, 0, err
	}
	batch := make([]*eventsv1.Envelope, 0, r.cfg.BatchSize)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		apply := func(tx pgx.Tx) error {
			// The new generation first: the consumers' unqualified tables
			// are its; the rates and the replica stay the live schema's.
			if _, err := tx.Exec(ctx, `SELECT set_config('search_path', $1, true)`,
				pgx.Identifier{r.next}.Sanitize()+", "+pgx.Identifier{r.cfg.Schema}.Sanitize()); err != nil {
				return err
			}
			for _, env := range batch {
				if err := src.Apply(ctx, tx, env); err != nil {
					return fmt.Errorf("%s event %s (%s): %w", src.Topic, env.GetId(), env.GetType(), err)
				}
			}
			return nil
		}
		var err error
		if tx != nil {
			err = pgx.BeginFunc(ctx, tx, apply) // a savepoint in the switch
		} else {
			err = pgx.BeginFunc(ctx, r.cfg.Pool, apply)
		}
		applied += int64(len(batch))
		batch = batch[:0]
		return err
	}
	for offset := from; offset < end; {
		msg, err := reader.FetchMessage(ctx)
		if err != nil {
			return applied, skipped, fmt.Errorf("read %s/%d at %d: %w", src.Topic, partition, offset, err)
		}
		offset = msg.Offset + 1
		if msg.Offset >= end {
			break
		}
		env := &eventsv1.Envelope{}
		if err := proto.Unmarshal(msg.Value, env); err != nil {
			skipped++
			continue
		}
		batch = append(batch, env)
		if len(batch) >= r.cfg.BatchSize {
			if err := flush(); err != nil {
				return applied, skipped, err
			}
		}
	}
	return applied, skipped, flush()
}
