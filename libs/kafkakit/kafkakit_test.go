package kafkakit_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/kafkakit/kafkatest"
)

func TestNewWriterDefaults(t *testing.T) {
	t.Parallel()
	w := kafkakit.NewWriter([]string{"b1:9092", "b2:9092"})
	if w.RequiredAcks != kafka.RequireAll {
		t.Errorf("RequiredAcks = %v, want RequireAll", w.RequiredAcks)
	}
	if _, ok := w.Balancer.(*kafka.Hash); !ok {
		t.Errorf("Balancer = %T, want *kafka.Hash", w.Balancer)
	}
	if w.BatchTimeout != kafkakit.DefaultBatchTimeout || w.BatchTimeout > 10*time.Millisecond {
		t.Errorf("BatchTimeout = %v, want a few ms", w.BatchTimeout)
	}
	if w.BatchSize != kafkakit.DefaultBatchSize {
		t.Errorf("BatchSize = %d", w.BatchSize)
	}
	if w.AllowAutoTopicCreation || w.Async {
		t.Errorf("AllowAutoTopicCreation=%v Async=%v, want both false", w.AllowAutoTopicCreation, w.Async)
	}
	if w.Addr.String() != "b1:9092,b2:9092" {
		t.Errorf("Addr = %s", w.Addr)
	}
	w2 := kafkakit.NewWriter([]string{"b"}, kafkakit.WithTopic("t"), kafkakit.WithBatchSize(7), kafkakit.WithBatchTimeout(time.Millisecond))
	if w2.Topic != "t" || w2.BatchSize != 7 || w2.BatchTimeout != time.Millisecond {
		t.Errorf("options not applied: topic=%q size=%d timeout=%v", w2.Topic, w2.BatchSize, w2.BatchTimeout)
	}
}

func TestNewReaderDefaults(t *testing.T) {
	t.Parallel()
	r := kafkakit.NewReader([]string{"b1:9092"}, "g", "t")
	defer r.Close()
	c := r.Config()
	if c.GroupID != "g" || c.Topic != "t" {
		t.Errorf("group, topic = %q, %q", c.GroupID, c.Topic)
	}
	if c.StartOffset != kafka.FirstOffset {
		t.Errorf("StartOffset = %d, want FirstOffset", c.StartOffset)
	}
	if c.CommitInterval != 0 {
		t.Errorf("CommitInterval = %v, want 0 (synchronous commits)", c.CommitInterval)
	}
	if c.MaxWait != kafkakit.DefaultMaxWait {
		t.Errorf("MaxWait = %v", c.MaxWait)
	}
	if !c.WatchPartitionChanges {
		t.Error("WatchPartitionChanges = false")
	}
	if c.SessionTimeout != 10*time.Second || c.RebalanceTimeout != 10*time.Second {
		t.Errorf("SessionTimeout, RebalanceTimeout = %v, %v; want 10s each (a restarted broker's group waits that long for the old sessions)", c.SessionTimeout, c.RebalanceTimeout)
	}
}

func TestHeaderCarrier(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		start    []kafka.Header
		setKey   string
		setValue string
		want     []kafka.Header
	}{
		{name: "set appends a new key", start: nil, setKey: "a", setValue: "1",
			want: []kafka.Header{{Key: "a", Value: []byte("1")}}},
		{name: "set replaces every existing value of the key", start: []kafka.Header{{Key: "a", Value: []byte("old")}, {Key: "b", Value: []byte("2")}, {Key: "a", Value: []byte("older")}},
			setKey: "a", setValue: "new",
			want: []kafka.Header{{Key: "b", Value: []byte("2")}, {Key: "a", Value: []byte("new")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := kafka.Message{Headers: tt.start}
			c := (*kafkakit.HeaderCarrier)(&msg.Headers)
			c.Set(tt.setKey, tt.setValue)
			if fmt.Sprint(msg.Headers) != fmt.Sprint(tt.want) {
				t.Fatalf("headers = %v, want %v", msg.Headers, tt.want)
			}
			if got := c.Get(tt.setKey); got != tt.setValue {
				t.Fatalf("Get = %q", got)
			}
			if len(c.Keys()) != len(tt.want) {
				t.Fatalf("Keys = %v", c.Keys())
			}
		})
	}
	t.Run("set does not write into a header slice shared with another message", func(t *testing.T) {
		shared := make([]kafka.Header, 1, 4)
		shared[0] = kafka.Header{Key: "a", Value: []byte("1")}
		m1, m2 := kafka.Message{Headers: shared}, kafka.Message{Headers: shared}
		(*kafkakit.HeaderCarrier)(&m1.Headers).Set("a", "changed")
		(*kafkakit.HeaderCarrier)(&m1.Headers).Set("b", "added")
		if string(m2.Headers[0].Value) != "1" || len(m2.Headers) != 1 {
			t.Fatalf("m2 headers changed: %v", m2.Headers)
		}
	})
	t.Run("get of a missing key is empty", func(t *testing.T) {
		var h []kafka.Header
		if got := (*kafkakit.HeaderCarrier)(&h).Get("x"); got != "" {
			t.Fatalf("Get = %q", got)
		}
	})
}

func TestInjectExtractRoundTrip(t *testing.T) {
	t.Parallel()
	prop := propagation.TraceContext{}
	tid, _ := trace.TraceIDFromHex("0102030405060708090a0b0c0d0e0f10")
	sid, _ := trace.SpanIDFromHex("0102030405060708")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)

	msg := kafka.Message{Headers: []kafka.Header{{Key: "event_id", Value: []byte("e1")}}}
	kafkakit.InjectWith(ctx, prop, &msg)
	if (*kafkakit.HeaderCarrier)(&msg.Headers).Get("traceparent") == "" {
		t.Fatalf("no traceparent header after Inject: %v", msg.Headers)
	}
	got := trace.SpanContextFromContext(kafkakit.ExtractWith(context.Background(), prop, msg))
	if got.TraceID() != tid || got.SpanID() != sid || !got.IsRemote() {
		t.Fatalf("extracted %v, want trace %s span %s (remote)", got, tid, sid)
	}
	if (*kafkakit.HeaderCarrier)(&msg.Headers).Get("event_id") != "e1" {
		t.Fatal("inject dropped an existing header")
	}
}

func TestBrokerRoundTrip(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.StartBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const topic = "test.ordered.v1"
	spec := []kafkakit.TopicSpec{{Name: topic, Partitions: 4}}
	t.Run("ensure topics is idempotent", func(t *testing.T) {
		for i := range 2 {
			if err := kafkakit.EnsureTopics(ctx, brokers, spec); err != nil {
				t.Fatalf("EnsureTopics call %d: %v", i+1, err)
			}
		}
		parts, err := partitions(ctx, brokers, topic)
		if err != nil || parts != 4 {
			t.Fatalf("partitions = %d, %v; want 4", parts, err)
		}
	})
	t.Run("ping answers", func(t *testing.T) {
		if err := kafkakit.Ping(ctx, brokers); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("writer and group reader keep per-key order and resume after commit", func(t *testing.T) {
		w := kafkakit.NewWriter(brokers, kafkakit.WithTopic(topic))
		defer w.Close()
		const keys, perKey = 5, 40
		var msgs []kafka.Message
		for i := range perKey {
			for k := range keys {
				msgs = append(msgs, kafka.Message{Key: []byte(strconv.Itoa(k)), Value: []byte(strconv.Itoa(i))})
			}
		}
		half := len(msgs) / 2
		if err := w.WriteMessages(ctx, msgs[:half]...); err != nil {
			t.Fatal(err)
		}

		// Consume the first half and commit, then close the reader.
		r := kafkakit.NewReader(brokers, "g1", topic)
		last := map[string]int{}
		got := consume(ctx, t, r, half, last)
		if err := r.CommitMessages(ctx, got...); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}

		// A new member of the same group sees only the second half.
		if err := w.WriteMessages(ctx, msgs[half:]...); err != nil {
			t.Fatal(err)
		}
		r2 := kafkakit.NewReader(brokers, "g1", topic)
		defer r2.Close()
		rest := consume(ctx, t, r2, len(msgs)-half, last)
		for _, m := range rest {
			if v, _ := strconv.Atoi(string(m.Value)); v < perKey/2 {
				t.Fatalf("committed message redelivered: key %s value %d", m.Key, v)
			}
		}
		for k, v := range last {
			if v != perKey-1 {
				t.Errorf("key %s ended at %d, want %d", k, v, perKey-1)
			}
		}
	})
}

// consume fetches n messages and fails if a key's values go backwards.
func consume(ctx context.Context, t *testing.T, r *kafka.Reader, n int, last map[string]int) []kafka.Message {
	t.Helper()
	var out []kafka.Message
	for len(out) < n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("fetch after %d of %d: %v", len(out), n, err)
		}
		v, _ := strconv.Atoi(string(m.Value))
		if prev, ok := last[string(m.Key)]; ok && v != prev+1 {
			t.Fatalf("key %s: value %d after %d", m.Key, v, prev)
		}
		last[string(m.Key)] = v
		out = append(out, m)
	}
	return out
}

func partitions(ctx context.Context, brokers []string, topic string) (int, error) {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: &kafka.Transport{}}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, err
	}
	if len(md.Topics) != 1 {
		return 0, errors.New("topic missing")
	}
	return len(md.Topics[0].Partitions), nil
}

func TestPingFailsWhenNoBroker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := kafkakit.Ping(ctx, []string{"127.0.0.1:1"}); err == nil {
		t.Fatal("Ping succeeded without a broker")
	}
}

func TestEnsureTopicsRejectsEmptyName(t *testing.T) {
	t.Parallel()
	if err := kafkakit.EnsureTopics(context.Background(), []string{"127.0.0.1:1"}, []kafkakit.TopicSpec{{}}); err == nil {
		t.Fatal("empty topic name accepted")
	}
}

func TestEnsureTopicsAppliesConfigs(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.StartBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	keep := map[string]string{"retention.ms": "-1"}

	t.Run("a new topic is created with its configs", func(t *testing.T) {
		const topic = "test.kept.v1"
		if err := kafkakit.EnsureTopics(ctx, brokers, []kafkakit.TopicSpec{{Name: topic, Partitions: 2, Configs: keep}}); err != nil {
			t.Fatal(err)
		}
		got, err := kafkakit.DescribeTopicConfigs(ctx, brokers, topic, "retention.ms")
		if err != nil || got["retention.ms"] != "-1" {
			t.Fatalf("retention.ms = %q, %v; want -1", got["retention.ms"], err)
		}
	})

	t.Run("an existing topic gets the configs that differ and keeps the rest", func(t *testing.T) {
		const topic = "test.existing.v1"
		if err := kafkakit.EnsureTopics(ctx, brokers, []kafkakit.TopicSpec{{Name: topic, Partitions: 3, Configs: map[string]string{"retention.bytes": "1048576"}}}); err != nil {
			t.Fatal(err)
		}
		before, err := kafkakit.DescribeTopicConfigs(ctx, brokers, topic, "retention.ms")
		if err != nil || before["retention.ms"] == "-1" {
			t.Fatalf("retention.ms before = %q, %v; want the broker default", before["retention.ms"], err)
		}
		for i := range 2 { // the second call finds nothing to change
			if err := kafkakit.EnsureTopics(ctx, brokers, []kafkakit.TopicSpec{{Name: topic, Partitions: 6, Configs: keep}}); err != nil {
				t.Fatalf("EnsureTopics call %d: %v", i+1, err)
			}
		}
		got, err := kafkakit.DescribeTopicConfigs(ctx, brokers, topic)
		if err != nil {
			t.Fatal(err)
		}
		if got["retention.ms"] != "-1" || got["retention.bytes"] != "1048576" {
			t.Fatalf("retention.ms = %q, retention.bytes = %q; want -1 and the earlier 1048576", got["retention.ms"], got["retention.bytes"])
		}
		if parts, err := partitions(ctx, brokers, topic); err != nil || parts != 3 {
			t.Fatalf("partitions = %d, %v; want 3 (never changed)", parts, err)
		}
	})
}
