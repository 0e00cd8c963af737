// Package inbox applies Kafka events exactly once in effect: each event is
// recorded in the service's inbox table in the same transaction as its
// handler's writes, so a redelivered event (rebalance, restart, relay
// re-publish) is a no-op. The tables come from outbox.Migrate.
package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/outbox/internal/metrics"
	"github.com/svc-dev/svc/libs/outbox/internal/wait"
	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// Handler applies one event inside tx. Returning an error rolls tx back
// (inbox row included) and the event is retried.
type Handler func(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error

// ConsumerConfig configures a Consumer. Name and Handler are required.
type ConsumerConfig struct {
	// Name identifies the consumer in the inbox key, metrics and logs; keep
	// it stable (renaming it re-applies every event still in Kafka).
	Name string
	// Schema, when set, qualifies the inbox tables; otherwise they are
	// found through the pool's search_path (pg.Options.Schema).
	Schema  string
	Handler Handler
	// Skip, when set, picks events this consumer has no use for (say, all
	// but test events). They are acknowledged without a transaction: no
	// inbox row, no handler call, and their offsets are committed in bulk.
	// Skipping must depend on the event alone, so a redelivered event is
	// skipped again.
	Skip func(env *eventsv1.Envelope) bool
	// BatchSize, above 1, applies up to that many events already fetched
	// in one transaction (each still deduplicated by its inbox row) and
	// commits their offsets together: for a consumer of many small events
	// whose handler is safe to share a transaction with its neighbours.
	// When any of them fails, the batch is rolled back and its events are
	// applied one by one, with the usual retries and dead-lettering. 0 or
	// 1: one transaction per event.
	BatchSize int
	// BatchHandler, when set, applies a batch's events that are new to the
	// inbox in one call (in their order), in place of Handler for each: a
	// handler that can fold many events into few writes. A batch it fails
	// is applied one by one with Handler.
	BatchHandler func(ctx context.Context, tx pgx.Tx, envs []*eventsv1.Envelope) error
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// Registerer receives the consumer metrics; nil means not exported.
	Registerer prometheus.Registerer
	// MaxAttempts is how many times a failing handler is tried before the
	// message is dead-lettered (default 5).
	MaxAttempts int
	// Backoff is the pause after the first failure, doubled after each
	// further one up to MaxBackoff (defaults 100 ms and 10 s).
	Backoff    time.Duration
	MaxBackoff time.Duration
	// TransientRetryFor is how long one event is retried, with the same
	// backoff and without counting attempts, while it fails on a transient
	// database error (pg.IsTransient: a statement or lock timeout, a
	// read-only transaction during a failover, too many connections, a
	// serialization failure; default 5 minutes). An event still failing so
	// after that is dead-lettered. A lost connection (pg.IsConnectionError)
	// is retried without limit: the database, not the event, is down, and
	// dead-lettering would fail as well.
	TransientRetryFor time.Duration
	// FetchMaxBackoff caps the pause between failed fetches or offset
	// commits (the broker unreachable, a rebalance); the pause starts at
	// Backoff and doubles (default 5 s). Such failures never stop Run.
	FetchMaxBackoff time.Duration
	// DeadLetter, when set, receives dead-lettered messages on topic
	// "<topic>.dlq" (create it with kafkakit.EnsureTopics); it must not have
	// a fixed Topic. Dead letters are always recorded in the dead_letters
	// table as well.
	DeadLetter *kafka.Writer
	// TracerProvider and Propagator default to the otel globals.
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
}

// Outcomes counted by consumer_applied_total.
const (
	OutcomeApplied      = "applied"
	OutcomeDuplicate    = "duplicate"
	OutcomeDeadLettered = "dead_lettered"
	OutcomeSkipped      = "skipped"
)

// Defaults of ConsumerConfig.
const (
	DefaultTransientRetryFor = 5 * time.Minute
	DefaultFetchMaxBackoff   = 5 * time.Second
)

// kafkaErrorLogEvery bounds how often a consumer logs failed fetches or
// commits while the broker is away: the first failure at once, then one
// line per period with the count of those not logged.
const kafkaErrorLogEvery = 30 * time.Second

// DeadLetterSuffix is appended to a topic to name its dead-letter topic.
const DeadLetterSuffix = ".dlq"

// Consumer reads one kafka.Reader and applies each event through the inbox.
type Consumer struct {
	pool   *pgxpool.Pool
	reader *kafka.Reader
	open   func() *kafka.Reader // builds reader when Run starts (NewConsumerOpening)
	cfg    ConsumerConfig
	log    *slog.Logger
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	inbox  string
	dead   string
	m      consumerMetrics
}

type consumerMetrics struct {
	applied      *prometheus.CounterVec
	errors       *prometheus.CounterVec
	lag          *prometheus.GaugeVec
	deadLettered *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	fetchErrors  *prometheus.CounterVec
	commitErrors *prometheus.CounterVec
}

// NewConsumer validates cfg and registers the consumer metrics. The caller
// owns reader (and closes it after Run returns).
func NewConsumer(pool *pgxpool.Pool, reader *kafka.Reader, cfg ConsumerConfig) (*Consumer, error) {
	if reader == nil {
		return nil, errors.New("inbox consumer: pool and reader are required")
	}
	return newConsumer(pool, reader, nil, cfg)
}

// NewConsumerOpening is NewConsumer for a reader built only when Run
// starts, by open, and closed by Run when it returns. A kafka-go group
// reader joins its group as soon as it is built, and a group that joined
// before its topic existed can keep an empty assignment for ever; a
// service that creates its topics in the background (the broker was away
// at start) builds the consumer at once, so its configuration is checked
// then, and runs it once the topics exist.
func NewConsumerOpening(pool *pgxpool.Pool, open func() *kafka.Reader, cfg ConsumerConfig) (*Consumer, error) {
	if open == nil {
		return nil, errors.New("inbox consumer: pool and reader are required")
	}
	return newConsumer(pool, nil, open, cfg)
}

func newConsumer(pool *pgxpool.Pool, reader *kafka.Reader, open func() *kafka.Reader, cfg ConsumerConfig) (*Consumer, error) {
	if pool == nil {
		return nil, errors.New("inbox consumer: pool and reader are required")
	}
	if cfg.Name == "" || cfg.Handler == nil {
		return nil, errors.New("inbox consumer: Name and Handler are required")
	}
	if cfg.DeadLetter != nil && cfg.DeadLetter.Topic != "" {
		return nil, fmt.Errorf("inbox consumer %s: dead-letter writer has fixed topic %q", cfg.Name, cfg.DeadLetter.Topic)
	}
	inboxTable, deadTable := "inbox", "dead_letters"
	if cfg.Schema != "" {
		if err := pg.ValidSchema(cfg.Schema); err != nil {
			return nil, fmt.Errorf("inbox consumer %s: %w", cfg.Name, err)
		}
		inboxTable = pgx.Identifier{cfg.Schema, "inbox"}.Sanitize()
		deadTable = pgx.Identifier{cfg.Schema, "dead_letters"}.Sanitize()
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	if cfg.TransientRetryFor <= 0 {
		cfg.TransientRetryFor = DefaultTransientRetryFor
	}
	if cfg.FetchMaxBackoff <= 0 {
		cfg.FetchMaxBackoff = DefaultFetchMaxBackoff
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	prop := cfg.Propagator
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	m, err := newConsumerMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Consumer{
		pool:   pool,
		reader: reader,
		open:   open,
		cfg:    cfg,
		log:    logger.With("component", "inbox_consumer", "consumer", cfg.Name),
		tracer: tp.Tracer("github.com/svc-dev/svc/libs/outbox/inbox"),
		prop:   prop,
		inbox:  inboxTable,
		dead:   deadTable,
		m:      m,
	}, nil
}

func newConsumerMetrics(reg prometheus.Registerer) (consumerMetrics, error) {
	var err error
	m := consumerMetrics{
		applied: metrics.RegisterInto(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "consumer_applied_total", Help: "Kafka messages handled, by outcome (applied, duplicate, dead_lettered).",
		}, []string{"consumer", "outcome"}), &err),
		errors: metrics.RegisterInto(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "consumer_apply_errors_total", Help: "Failed attempts to apply a message (each retry counts).",
		}, []string{"consumer"}), &err),
		lag: metrics.RegisterInto(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "consumer_lag", Help: "Messages after the last one fetched up to the partition end, summed over this consumer's partitions; 0 once Run returns.",
		}, []string{"consumer"}), &err),
		deadLettered: metrics.RegisterInto(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "consumer_dead_lettered_total", Help: "Messages given up on and dead-lettered.",
		}, []string{"consumer"}), &err),
		duration: metrics.RegisterInto(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "consumer_apply_duration_seconds", Help: "Duration of one successful apply transaction.",
			Buckets: prometheus.DefBuckets,
		}, []string{"consumer"}), &err),
		fetchErrors: metrics.RegisterInto(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inbox_fetch_errors_total", Help: "Failed Kafka fetches (broker unreachable, group errors); the consumer backs off and fetches again.",
		}, []string{"consumer"}), &err),
		commitErrors: metrics.RegisterInto(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inbox_commit_errors_total", Help: "Failed Kafka offset commits; the messages are redelivered and absorbed by the inbox.",
		}, []string{"consumer"}), &err),
	}
	if err != nil {
		return m, fmt.Errorf("inbox consumer: register metrics: %w", err)
	}
	return m, nil
}

// Run fetches, applies and commits messages until ctx is cancelled, then
// returns nil; it returns nothing else. A failed fetch or offset commit (the
// broker away, a rebalance) is counted (inbox_fetch_errors_total,
// inbox_commit_errors_total), logged at most every 30 s, and followed by a
// pause that doubles from Backoff up to FetchMaxBackoff; then Run goes on. Per message: decode the Envelope (undecodable: dead-letter at
// once), start a consumer span from the trace headers, then in one
// transaction insert the inbox row and, if it is new, call Handler; commit;
// only then commit the Kafka offset. A handler that keeps failing is retried
// with backoff MaxAttempts times, then dead-lettered, and the offset is
// committed so the partition moves on. Meanwhile consumer_lag is refreshed
// every second from the broker's end offsets, so it keeps growing while a
// message is stuck; Run calls reader.Stats() (which resets kafka-go's
// counters) for rebalances, so nothing else should.
func (c *Consumer) Run(ctx context.Context) error {
	if c.open != nil {
		c.reader = c.open()
		defer func() {
			if err := c.reader.Close(); err != nil {
				c.log.WarnContext(ctx, "close reader", "err", err)
			}
		}()
	}
	lag := &lagTracker{}
	stopLag := c.watchLag(ctx, lag)
	defer stopLag()
	fetchLog, commitLog := &everyLog{every: kafkaErrorLogEvery}, &everyLog{every: kafkaErrorLogEvery}
	backoff := c.cfg.Backoff
	pause := func() bool {
		ok := wait.Sleep(ctx, backoff)
		backoff = min(backoff*2, c.cfg.FetchMaxBackoff)
		return ok
	}
	commitFailed := func(what string, n int, err error) {
		c.m.commitErrors.WithLabelValues(c.cfg.Name).Inc()
		if held, ok := commitLog.allow(time.Now()); ok {
			// A rebalance can invalidate the commit, or the broker is away;
			// the messages are then redelivered and deduplicated by the inbox.
			c.log.WarnContext(ctx, what, "messages", n, "not_logged", held, "err", err)
		}
	}
	// Offsets of skipped events wait here and are committed with the next
	// applied event, or every skipCommitEvery of them.
	var skipped []kafka.Message
	commitSkipped := func() {
		if len(skipped) == 0 {
			return
		}
		commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if err := c.reader.CommitMessages(commitCtx, skipped...); err != nil {
			commitFailed("commit skipped offsets failed", len(skipped), err)
		}
		cancel()
		skipped = skipped[:0]
	}
	defer commitSkipped()
	// one settles a message alone; true when Run must return.
	one := func(msg kafka.Message) bool {
		lag.fetched(msg)
		env, decodeErr := decode(msg)
		if decodeErr == nil && c.cfg.Skip != nil && c.cfg.Skip(env) {
			c.m.applied.WithLabelValues(c.cfg.Name, OutcomeSkipped).Inc()
			if skipped = append(skipped, msg); len(skipped) >= skipCommitEvery {
				commitSkipped()
			}
			lag.settled()
			return false
		}
		commitSkipped()
		err := c.handle(ctx, msg, env, decodeErr)
		lag.settled()
		if err != nil {
			// Only cancellation gets here; the offset stays uncommitted and
			// the message comes back after restart, where the inbox
			// absorbs it if it was applied.
			return true
		}
		// The transaction is committed: record the offset even if shutdown
		// has begun, or the next start redoes work (harmlessly, but slowly).
		return !c.commit(ctx, []kafka.Message{msg}, commitFailed, pause)
	}
	for {
		msg, err := c.reader.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// kafka-go gives up a group join after MaxAttempts and returns
			// the dial error here; its reader keeps trying behind it, so
			// fetching again is the whole cure.
			c.m.fetchErrors.WithLabelValues(c.cfg.Name).Inc()
			if held, ok := fetchLog.allow(time.Now()); ok {
				c.log.WarnContext(ctx, "fetch failed, retrying", "not_logged", held, "backoff", backoff, "err", err)
			}
			if !pause() {
				return nil
			}
			continue
		}
		backoff = c.cfg.Backoff
		batch := []kafka.Message{msg}
		for len(batch) < c.cfg.BatchSize {
			more, ok := c.fetchBuffered(ctx)
			if !ok {
				break
			}
			batch = append(batch, more)
		}
		if len(batch) > 1 {
			done, stop := c.applyBatch(ctx, batch, lag)
			if stop {
				return nil
			}
			if done {
				commitSkipped()
				if !c.commit(ctx, batch, commitFailed, pause) {
					return nil
				}
				continue
			}
		}
		for _, m := range batch {
			if one(m) {
				return nil
			}
		}
	}
}

// commit records the offsets of settled messages; false when Run must
// return (ctx ended while pausing after a failed commit).
func (c *Consumer) commit(ctx context.Context, msgs []kafka.Message, failed func(string, int, error), pause func() bool) bool {
	commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	err := c.reader.CommitMessages(commitCtx, msgs...)
	cancel()
	if err != nil {
		failed("commit offset failed", len(msgs), err)
		return pause()
	}
	return true
}

// batchFetchWait is how long a batch waits for one more message already
// on its way; the reader's queue usually has it at once.
const batchFetchWait = 2 * time.Millisecond

// fetchBuffered returns a message the reader has ready, without waiting
// more than batchFetchWait (a fetch cut short by its context takes no
// message from the reader).
func (c *Consumer) fetchBuffered(ctx context.Context) (kafka.Message, bool) {
	fctx, cancel := context.WithTimeout(ctx, batchFetchWait)
	defer cancel()
	msg, err := c.reader.FetchMessage(fctx)
	return msg, err == nil
}

// applyBatch applies batch in one transaction. done: applied (or every
// event a duplicate), its offsets to commit. Not done (a message to skip
// or undecodable, or any failure): nothing was applied, and Run settles
// the messages one by one. stop: ctx ended.
func (c *Consumer) applyBatch(ctx context.Context, batch []kafka.Message, lag *lagTracker) (done, stop bool) {
	envs := make([]*eventsv1.Envelope, len(batch))
	for i, m := range batch {
		env, err := decode(m)
		if err != nil || (c.cfg.Skip != nil && c.cfg.Skip(env)) {
			return false, false
		}
		envs[i] = env
	}
	ctx, span := c.tracer.Start(ctx, batch[0].Topic+" process batch",
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", batch[0].Topic),
			attribute.String("messaging.consumer.group.name", c.cfg.Name),
			attribute.Int("messaging.batch.message_count", len(batch)),
		))
	defer span.End()
	for _, m := range batch {
		lag.fetched(m)
	}
	defer lag.settled()
	start := time.Now()
	applied := make([]bool, len(envs))
	ids := make([]string, len(envs))
	for i, env := range envs {
		ids[i] = env.GetId()
	}
	err := pg.InTx(ctx, c.pool, func(tx pgx.Tx) error {
		// Every inbox row in one statement; the ids it returns are the
		// events not applied before (a repeated id within the batch once).
		// The ids go as text[], cast in SQL (see outbox.QueueMany).
		rows, err := tx.Query(ctx, `INSERT INTO `+c.inbox+` (consumer, event_id) SELECT $1, unnest($2::text[])::uuid ON CONFLICT DO NOTHING RETURNING event_id::text`,
			c.cfg.Name, ids)
		if err != nil {
			return fmt.Errorf("insert inbox rows: %w", err)
		}
		fresh, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("insert inbox rows: %w", err)
		}
		todo := make(map[string]bool, len(fresh))
		for _, id := range fresh {
			todo[id] = true
		}
		var apply []*eventsv1.Envelope
		for i, env := range envs {
			// uuid's text is lower case; the envelope's id is checked to
			// be a UUID by decode, in any case.
			id := strings.ToLower(env.GetId())
			if applied[i] = todo[id]; !applied[i] {
				continue
			}
			delete(todo, id)
			if c.cfg.BatchHandler != nil {
				apply = append(apply, env)
				continue
			}
			if err := c.cfg.Handler(ctx, tx, env); err != nil {
				return fmt.Errorf("handle %s %s: %w", env.GetType(), env.GetId(), err)
			}
		}
		if len(apply) > 0 {
			if err := c.cfg.BatchHandler(ctx, tx, apply); err != nil {
				return fmt.Errorf("handle a batch of %d: %w", len(apply), err)
			}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return false, true
		}
		span.RecordError(err)
		c.log.DebugContext(ctx, "batch failed, applying its events one by one", "messages", len(batch), "err", err)
		return false, false
	}
	each := time.Since(start) / time.Duration(len(envs))
	for _, a := range applied {
		if a {
			c.m.applied.WithLabelValues(c.cfg.Name, OutcomeApplied).Inc()
			c.m.duration.WithLabelValues(c.cfg.Name).Observe(each.Seconds())
		} else {
			c.m.applied.WithLabelValues(c.cfg.Name, OutcomeDuplicate).Inc()
		}
	}
	return true, false
}

// lagRefreshEvery is how often Run recomputes consumer_lag, whether or not
// messages are being handled.
const lagRefreshEvery = time.Second

// lagTracker holds, per partition this consumer reads, the offset after the
// last message FetchMessage handed to Run. kafka-go's own Stats().Lag cannot
// serve: for a group reader it is one value shared by all partitions, set by
// whichever partition reader last queued a message, and only then. It hides
// the up to QueueCapacity messages fetched ahead but not yet handled, and
// freezes once that queue is full (Run stuck on one message) or the topic is
// quiet.
type lagTracker struct {
	mu sync.Mutex
	// gen counts the rebalances seen; a position from an older generation
	// may belong to a partition now read by another group member.
	gen      int
	next     map[topicPartition]lagPosition
	inflight *topicPartition
}

type topicPartition struct {
	topic     string
	partition int
}

type lagPosition struct {
	next int64
	gen  int
}

// fetched records msg as the message Run is now settling.
func (t *lagTracker) fetched(msg kafka.Message) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.next == nil {
		t.next = map[topicPartition]lagPosition{}
	}
	tp := topicPartition{msg.Topic, msg.Partition}
	t.next[tp] = lagPosition{next: msg.Offset + 1, gen: t.gen}
	t.inflight = &tp
}

// settled ends the message in flight. Its partition is forgotten if a
// rebalance came meanwhile: it may have moved to another member, and if not
// it is recorded again with its next message.
func (t *lagTracker) settled() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inflight != nil && t.next[*t.inflight].gen != t.gen {
		delete(t.next, *t.inflight)
	}
	t.inflight = nil
}

// rebalanced forgets the partitions that may have been revoked, except the
// one in flight: Run is still behind on it, and a stuck message is exactly
// the lag to report.
func (t *lagTracker) rebalanced() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	for tp := range t.next {
		if t.inflight == nil || tp != *t.inflight {
			delete(t.next, tp)
		}
	}
}

func (t *lagTracker) positions() map[topicPartition]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[topicPartition]int64, len(t.next))
	for tp, p := range t.next {
		out[tp] = p.next
	}
	return out
}

// watchLag refreshes consumer_lag every lagRefreshEvery until ctx ends or
// the returned stop is called; stop waits for it and sets the gauge to 0, as
// the partitions and their lag are then another member's to report (the
// alert sums over pods).
func (c *Consumer) watchLag(ctx context.Context, t *lagTracker) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	rc := c.reader.Config()
	tr := &kafka.Transport{ClientID: "inbox-lag"}
	if d := rc.Dialer; d != nil {
		tr.Dial, tr.ClientID, tr.TLS, tr.SASL = d.DialFunc, d.ClientID, d.TLS, d.SASLMechanism
	}
	client := &kafka.Client{Addr: kafka.TCP(rc.Brokers...), Transport: tr}
	gauge := c.m.lag.WithLabelValues(c.cfg.Name)
	go func() {
		defer close(done)
		defer tr.CloseIdleConnections()
		failLog := &everyLog{every: kafkaErrorLogEvery}
		tick := time.NewTicker(lagRefreshEvery)
		defer tick.Stop()
		for {
			if err := c.refreshLag(ctx, client, t, gauge); err != nil && ctx.Err() == nil {
				// The gauge keeps its last value: with the broker away no
				// message is written either, so it is still about right.
				if held, ok := failLog.allow(time.Now()); ok {
					c.log.WarnContext(ctx, "refresh consumer lag failed", "not_logged", held, "err", err)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
		gauge.Set(0)
	}
}

// refreshLag sets gauge to the messages between each partition's next
// offset for Run and its end, listed by the broker now: right while Run is
// stuck or the topic is quiet, when the reader fetches nothing. Partitions
// from which Run has not yet received a message since the last rebalance
// are not counted until it does.
func (c *Consumer) refreshLag(ctx context.Context, client *kafka.Client, t *lagTracker, gauge prometheus.Gauge) error {
	// The one Stats call of the consumer: it resets kafka-go's counters, so
	// a second caller would steal the rebalances from this one.
	if c.reader.Stats().Rebalances > 0 {
		t.rebalanced()
	}
	next := t.positions()
	if len(next) == 0 {
		gauge.Set(0)
		return nil
	}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for tp := range next {
		req.Topics[tp.topic] = append(req.Topics[tp.topic], kafka.LastOffsetOf(tp.partition))
	}
	listCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := client.ListOffsets(listCtx, req)
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	var lag int64
	for topic, parts := range resp.Topics {
		for _, p := range parts {
			if p.Error != nil {
				return fmt.Errorf("list end offset of %s/%d: %w", topic, p.Partition, p.Error)
			}
			if n, ok := next[topicPartition{topic, p.Partition}]; ok {
				lag += max(0, p.LastOffset-n)
			}
		}
	}
	gauge.Set(float64(lag))
	return nil
}

// skipCommitEvery bounds how many skipped offsets wait for a commit; after a
// restart at most that many skipped events are read (and skipped) again.
const skipCommitEvery = 500

// decode reads msg's envelope once; an undecodable message is never
// skipped: it goes to the dead-letter path.
func decode(msg kafka.Message) (*eventsv1.Envelope, error) {
	env := &eventsv1.Envelope{}
	if err := proto.Unmarshal(msg.Value, env); err != nil {
		return env, fmt.Errorf("undecodable envelope: %w", err)
	}
	if !outbox.ValidUUID(env.GetId()) {
		return env, fmt.Errorf("undecodable envelope: id %q is not a UUID", env.GetId())
	}
	return env, nil
}

// handle returns an error only when ctx ended before msg was settled.
func (c *Consumer) handle(ctx context.Context, msg kafka.Message, env *eventsv1.Envelope, decodeErr error) error {
	if decodeErr != nil {
		return c.deadLetter(ctx, msg, env, decodeErr, 0)
	}

	ctx = kafkakit.ExtractWith(ctx, c.prop, msg)
	ctx, span := c.tracer.Start(ctx, msg.Topic+" process",
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", msg.Topic),
			attribute.String("messaging.consumer.group.name", c.cfg.Name),
			attribute.Int("messaging.destination.partition.id", msg.Partition),
			attribute.Int64("messaging.kafka.offset", msg.Offset),
			attribute.String("messaging.message.id", env.GetId()),
			attribute.String("event_type", env.GetType()),
		))
	defer span.End()
	log := c.log.With("event_id", env.GetId(), "event_type", env.GetType(), "topic", msg.Topic,
		"partition", msg.Partition, "offset", msg.Offset)

	backoff := c.cfg.Backoff
	var transientSince time.Time
	for attempt := 1; ; {
		start := time.Now()
		applied, err := c.apply(ctx, env)
		if err == nil {
			outcome := OutcomeDuplicate
			if applied {
				outcome = OutcomeApplied
				c.m.duration.WithLabelValues(c.cfg.Name).Observe(time.Since(start).Seconds())
			}
			c.m.applied.WithLabelValues(c.cfg.Name, outcome).Inc()
			span.SetAttributes(attribute.String("outcome", outcome))
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.m.errors.WithLabelValues(c.cfg.Name).Inc()
		if pg.IsTransient(err) {
			// The database, not the event, is at fault: dead-lettering would
			// discard good events during an outage or a failover. Wait it
			// out, for ever while the connection is lost, otherwise for
			// TransientRetryFor.
			now := time.Now()
			if transientSince.IsZero() {
				transientSince = now
			}
			if pg.IsConnectionError(err) || now.Sub(transientSince) < c.cfg.TransientRetryFor {
				log.WarnContext(ctx, "apply failed on a transient error, retrying",
					"retrying_for", now.Sub(transientSince).Round(time.Millisecond), "backoff", backoff, "err", err)
				if !wait.Sleep(ctx, backoff) {
					return ctx.Err()
				}
				backoff = min(backoff*2, c.cfg.MaxBackoff)
				continue
			}
			span.RecordError(err)
			span.SetStatus(codes.Error, "dead-lettered")
			return c.deadLetter(ctx, msg, env,
				fmt.Errorf("transient error for %s: %w", now.Sub(transientSince).Round(time.Second), err), attempt)
		}
		if attempt >= c.cfg.MaxAttempts {
			span.RecordError(err)
			span.SetStatus(codes.Error, "dead-lettered")
			return c.deadLetter(ctx, msg, env, err, attempt)
		}
		log.WarnContext(ctx, "apply failed, retrying", "attempt", attempt, "err", err)
		if !wait.Sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(backoff*2, c.cfg.MaxBackoff)
		attempt++
	}
}

// apply runs the inbox insert and the handler in one transaction; applied
// is false when the event was already in the inbox.
func (c *Consumer) apply(ctx context.Context, env *eventsv1.Envelope) (applied bool, err error) {
	err = pg.InTx(ctx, c.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO `+c.inbox+` (consumer, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			c.cfg.Name, env.GetId())
		if err != nil {
			return fmt.Errorf("insert inbox row: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		applied = true
		if err := c.cfg.Handler(ctx, tx, env); err != nil {
			return fmt.Errorf("handle %s: %w", env.GetType(), err)
		}
		return nil
	})
	return applied, err
}

// deadLetter records msg in dead_letters and, if configured, publishes it to
// "<topic>.dlq", retrying until both succeed or ctx ends: the offset must not
// be committed before the message is safe somewhere.
func (c *Consumer) deadLetter(ctx context.Context, msg kafka.Message, env *eventsv1.Envelope, cause error, attempts int) error {
	c.log.ErrorContext(ctx, "message dead-lettered",
		"event_id", env.GetId(), "event_type", env.GetType(), "topic", msg.Topic,
		"partition", msg.Partition, "offset", msg.Offset, "attempts", attempts, "err", cause)
	headers := map[string]string{}
	for _, h := range msg.Headers {
		headers[h.Key] = string(h.Value)
	}
	for {
		err := c.recordDeadLetter(ctx, msg, env, headers, cause, attempts)
		if err == nil {
			c.m.deadLettered.WithLabelValues(c.cfg.Name).Inc()
			c.m.applied.WithLabelValues(c.cfg.Name, OutcomeDeadLettered).Inc()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.log.ErrorContext(ctx, "dead-lettering failed, retrying", "topic", msg.Topic,
			"partition", msg.Partition, "offset", msg.Offset, "err", err)
		if !wait.Sleep(ctx, c.cfg.MaxBackoff) {
			return ctx.Err()
		}
	}
}

func (c *Consumer) recordDeadLetter(ctx context.Context, msg kafka.Message, env *eventsv1.Envelope, headers map[string]string, cause error, attempts int) error {
	hj, err := json.Marshal(headers)
	if err != nil {
		return fmt.Errorf("encode headers: %w", err)
	}
	// The unique key makes a re-run after a crash (message dead-lettered,
	// offset not yet committed) record it once.
	_, err = c.pool.Exec(ctx, `
		INSERT INTO `+c.dead+` (consumer, topic, partition, "offset", event_id, event_type, key, value, headers, error, attempts)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), NULLIF($6, ''), $7, $8, $9, $10, $11)
		ON CONFLICT (consumer, topic, partition, "offset") DO NOTHING`,
		c.cfg.Name, msg.Topic, msg.Partition, msg.Offset, env.GetId(), env.GetType(), msg.Key, msg.Value, hj, cause.Error(), attempts)
	if err != nil {
		return fmt.Errorf("record dead letter: %w", err)
	}
	if c.cfg.DeadLetter == nil {
		return nil
	}
	dlq := kafka.Message{
		Topic: msg.Topic + DeadLetterSuffix,
		Key:   msg.Key,
		Value: msg.Value,
		Headers: append(append([]kafka.Header(nil), msg.Headers...),
			kafka.Header{Key: "dlq_consumer", Value: []byte(c.cfg.Name)},
			kafka.Header{Key: "dlq_error", Value: []byte(cause.Error())},
			kafka.Header{Key: "dlq_attempts", Value: []byte(strconv.Itoa(attempts))},
			kafka.Header{Key: "dlq_source", Value: []byte(fmt.Sprintf("%s/%d/%d", msg.Topic, msg.Partition, msg.Offset))},
		),
	}
	if err := c.cfg.DeadLetter.WriteMessages(ctx, dlq); err != nil {
		return fmt.Errorf("publish to %s: %w", dlq.Topic, err)
	}
	return nil
}

// everyLog lets a repeated warning through at most once per period and
// counts the ones held back. One goroutine uses it.
type everyLog struct {
	every      time.Duration
	last       time.Time
	suppressed int
}

// allow reports whether to log now and how many were held back since the
// last line.
func (l *everyLog) allow(now time.Time) (suppressed int, ok bool) {
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed++
		return 0, false
	}
	suppressed, l.suppressed, l.last = l.suppressed, 0, now
	return suppressed, true
}
