// Package testenv builds the Postgres + Kafka fixture shared by the outbox
// and inbox tests: a fresh database with the bus tables in schema "svc", a
// pool on that schema, and an in-process kfake broker with topics created.
package testenv

import (
	"context"
	"fmt"
	"github.com/svc-dev/svc/libs/obs/obstest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/kafkakit/kafkatest"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// Schema is the service schema the fixture migrates.
const Schema = "svc"

// Env is one test's database and broker.
type Env struct {
	DSN     string
	Pool    *pgxpool.Pool
	Brokers []string
}

// New migrates a fresh database, opens a pool on Schema, creates an
// "effects" table (no unique key, so a double apply shows as two rows),
// starts a broker and creates topics with 4 partitions each.
func New(t testing.TB, topics ...string) *Env {
	t.Helper()
	ctx := Ctx(t)
	dsn := pgtest.NewDatabase(t)
	if err := outbox.Migrate(ctx, dsn, Schema, nil); err != nil {
		t.Fatalf("outbox.Migrate: %v", err)
	}
	pool, err := pg.NewPool(ctx, dsn, pg.Options{Schema: Schema})
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE effects (event_id uuid NOT NULL, program_id bigint NOT NULL, seq bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	brokers := kafkatest.StartBroker(t)
	specs := make([]kafkakit.TopicSpec, 0, len(topics))
	for _, tp := range topics {
		specs = append(specs, kafkakit.TopicSpec{Name: tp, Partitions: 4})
	}
	if err := kafkakit.EnsureTopics(ctx, brokers, specs); err != nil {
		t.Fatalf("EnsureTopics: %v", err)
	}
	return &Env{DSN: dsn, Pool: pool, Brokers: brokers}
}

// Ctx is a context cancelled when the test ends, with an overall deadline.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Envelope builds an envelope for program with sequence seq.
func Envelope(typ string, program, seq int64) *eventsv1.Envelope {
	return &eventsv1.Envelope{Id: outbox.NewEventID(), Type: typ, ProgramId: program, Seq: seq, Source: "test"}
}

// Enqueue commits one event in its own transaction.
func (e *Env) Enqueue(t testing.TB, topic string, env *eventsv1.Envelope) int64 {
	t.Helper()
	var id int64
	err := pg.InTx(Ctx(t), e.Pool, func(tx pgx.Tx) error {
		var err error
		id, err = outbox.Enqueue(Ctx(t), tx, topic, env)
		return err
	})
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return id
}

// Count runs a count query.
func (e *Env) Count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.Pool.QueryRow(Ctx(t), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// Conn opens a connection of its own, outside Pool, with search_path
// Schema, closed when the test ends: a checker that outlives the pool's
// backends being terminated.
func (e *Env) Conn(t testing.TB) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(e.DSN)
	if err != nil {
		t.Fatalf("parse dsn: %v", err)
	}
	cfg.RuntimeParams["search_path"] = Schema
	conn, err := pgx.ConnectConfig(Ctx(t), cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// CountOn runs a count query on conn.
func CountOn(t testing.TB, conn *pgx.Conn, query string, args ...any) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(Ctx(t), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// TerminateOthers terminates every other backend of conn's database (the
// pool's, relays' lock connections, consumers', autovacuum's) and waits up
// to 10 s for each to exit; it returns how many went.
func TerminateOthers(t testing.TB, conn *pgx.Conn) int {
	t.Helper()
	return CountOn(t, conn, `
		SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`)
}

// TerminateRelayLockHolder terminates the backend holding an advisory lock
// in conn's database (the active relay's lock connection) and waits up to
// 10 s for it to exit; it returns how many went (1 while a relay is active).
func TerminateRelayLockHolder(ctx context.Context, conn interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	var n int
	err := conn.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("terminate the relay lock holder: %w", err)
	}
	return n, nil
}

// TopicSize is the number of records ever written to topic (sum of the
// partitions' end offsets); nothing is deleted by retention in tests.
func (e *Env) TopicSize(t testing.TB, topic string) int64 {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(e.Brokers...), Transport: &kafka.Transport{}}
	ctx := Ctx(t)
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil || len(md.Topics) != 1 {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for _, p := range md.Topics[0].Partitions {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p.ID))
	}
	resp, err := client.ListOffsets(ctx, req)
	if err != nil {
		t.Fatalf("list offsets of %s: %v", topic, err)
	}
	var total int64
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			t.Fatalf("list offsets of %s/%d: %v", topic, po.Partition, po.Error)
		}
		total += po.LastOffset
	}
	return total
}

// Eventually polls cond every 10 ms until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Go runs fn in a goroutine until the returned stop is called (or the test
// ends); stop cancels fn's context and returns fn's error. done receives
// fn's error when fn returns by itself.
func Go(t testing.TB, fn func(ctx context.Context) error) (stop func() error, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	ch := make(chan error, 1)
	var result error
	go func() {
		result = fn(ctx)
		ch <- result
		close(finished)
	}()
	stop = func() error {
		cancel()
		<-finished
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop, ch
}

// Metric returns the value of a counter or gauge in reg whose labels include
// the given pairs (0 when absent).
func Metric(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	return obstest.Metric(t, reg, name, labels...)
}

// Decode unmarshals a message value into an Envelope.
func Decode(t testing.TB, m kafka.Message) *eventsv1.Envelope {
	t.Helper()
	env := &eventsv1.Envelope{}
	if err := proto.Unmarshal(m.Value, env); err != nil {
		t.Fatalf("decode %s/%d/%d: %v", m.Topic, m.Partition, m.Offset, err)
	}
	return env
}

// Header returns the value of header key of m.
func Header(m kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Clock is a settable clock for injected Now functions.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the current fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// String helps failure messages.
func (c *Clock) String() string { return fmt.Sprint(c.Now()) }
