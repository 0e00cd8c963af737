package embedded_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/kafkakit/embedded"
)

// freeAddr reserves a free loopback port and releases it for the broker.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func start(t *testing.T, addr string, opt embedded.Options) func() {
	t.Helper()
	stop, err := embedded.Start(addr, opt)
	if err != nil {
		t.Fatalf("Start(%s): %v", addr, err)
	}
	return stop
}

func TestStartPersistsAcrossRestartsWithDataDir(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr, dir := freeAddr(t), t.TempDir()
	brokers := []string{addr}
	const topic = "test.persist.v1"

	stop := start(t, addr, embedded.Options{DataDir: dir})
	if err := kafkakit.EnsureTopics(ctx, brokers, []kafkakit.TopicSpec{{Name: topic, Partitions: 1}}); err != nil {
		stop()
		t.Fatal(err)
	}
	w := kafkakit.NewWriter(brokers, kafkakit.WithTopic(topic))
	err := w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte("v1")}, kafka.Message{Key: []byte("k"), Value: []byte("v2")})
	_ = w.Close()
	if err != nil {
		stop()
		t.Fatal(err)
	}
	r := kafkakit.NewReader(brokers, "g", topic)
	m, err := r.FetchMessage(ctx)
	if err == nil {
		err = r.CommitMessages(ctx, m)
	}
	_ = r.Close()
	stop()
	if err != nil {
		t.Fatal(err)
	}

	stop = start(t, addr, embedded.Options{DataDir: dir})
	defer stop()
	r = kafkakit.NewReader(brokers, "g", topic)
	defer r.Close()
	m, err = r.FetchMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Value) != "v2" {
		t.Fatalf("after restart the group resumed at %q, want v2 (v1 was committed)", m.Value)
	}
}

func TestStartRejectsBadAddresses(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"nonsense", "127.0.0.1:http", "0.0.0.0:9092", ":9092"} {
		if stop, err := embedded.Start(addr, embedded.Options{}); err == nil {
			stop()
			t.Errorf("Start(%q) succeeded", addr)
		}
	}
}

func TestStartFailsWhenAddressIsTaken(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if stop, err := embedded.Start(ln.Addr().String(), embedded.Options{}); err == nil {
		stop()
		t.Fatal("Start succeeded on a taken port")
	}
}
