package outbox_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/outbox/internal/testenv"
)

const (
	benchEvents = 20000
	benchBatch  = 1000
)

// benchRow is one outbox row as Enqueue would store it: a ~150-byte
// envelope keyed by one of 50 programs, with a trace header.
type benchRow struct {
	eventID, key string
	payload      []byte
	headers      map[string]string
}

func benchRows(b *testing.B) []benchRow {
	rows := make([]benchRow, benchEvents)
	for i := range rows {
		env := testenv.Envelope("bench.thing.happened", int64(i%50), int64(i))
		env.Payload = make([]byte, 100)
		p, err := proto.Marshal(env)
		if err != nil {
			b.Fatal(err)
		}
		rows[i] = benchRow{
			eventID: env.Id,
			key:     strconv.FormatInt(env.ProgramId, 10),
			payload: p,
			headers: map[string]string{"traceparent": "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01"},
		}
	}
	return rows
}

// BenchmarkRelayThroughput measures events/s from committed outbox rows to
// acknowledged Kafka writes (kfake, RequireAll) and rows marked sent: each
// iteration pre-inserts benchEvents rows, then times a relay until all are
// published. raw_writer is the reference: the same messages written with
// kafka-go alone, in the same batch size, with no database work.
func BenchmarkRelayThroughput(b *testing.B) {
	rows := benchRows(b)

	b.Run("relay", func(b *testing.B) {
		e := testenv.New(b, "bench.v1")
		ctx := testenv.Ctx(b)
		w := kafkakit.NewWriter(e.Brokers)
		b.Cleanup(func() { _ = w.Close() })
		reg := prometheus.NewRegistry()
		relay, err := outbox.NewRelay(e.Pool, w, outbox.RelayConfig{
			Schema: testenv.Schema, BatchSize: benchBatch, PollInterval: time.Second, Registerer: reg,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			copyRows(ctx, b, e, rows)
			b.StartTimer()
			stop, _ := testenv.Go(b, relay.Run)
			want := float64((i + 1) * benchEvents)
			for testenv.Metric(b, reg, "outbox_published_total") < want {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			if err := stop(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(benchEvents*b.N)/b.Elapsed().Seconds(), "events/s")
	})

	b.Run("raw_writer", func(b *testing.B) {
		e := testenv.New(b, "bench.v1")
		ctx := testenv.Ctx(b)
		w := kafkakit.NewWriter(e.Brokers)
		b.Cleanup(func() { _ = w.Close() })
		msgs := make([]kafka.Message, len(rows))
		for i, r := range rows {
			msgs[i] = kafka.Message{Topic: "bench.v1", Key: []byte(r.key), Value: r.payload, Headers: []kafka.Header{
				{Key: "traceparent", Value: []byte(r.headers["traceparent"])},
				{Key: outbox.HeaderEventID, Value: []byte(r.eventID)},
				{Key: outbox.HeaderEventType, Value: []byte("bench.thing.happened")},
			}}
		}
		b.ResetTimer()
		for range b.N {
			for start := 0; start < len(msgs); start += benchBatch {
				if err := w.WriteMessages(ctx, msgs[start:min(start+benchBatch, len(msgs))]...); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(benchEvents*b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// copyRows inserts rows with fresh event ids (event_id is unique) via COPY.
func copyRows(ctx context.Context, b *testing.B, e *testenv.Env, rows []benchRow) {
	b.Helper()
	src := make([][]any, len(rows))
	for i, r := range rows {
		src[i] = []any{outbox.NewEventID(), "bench.v1", r.key, "bench.thing.happened", r.payload, r.headers}
	}
	_, err := e.Pool.CopyFrom(ctx, pgx.Identifier{"outbox"},
		[]string{"event_id", "topic", "key", "event_type", "payload", "headers"}, pgx.CopyFromRows(src))
	if err != nil {
		b.Fatal(err)
	}
}
