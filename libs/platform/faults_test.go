package platform_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/kafkakit/embedded"
	"github.com/svc-dev/svc/libs/kafkakit/kafkatest"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/obs/obstest"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

const relayTopic = "probe.relayed.v1"

// relaySpec consumes its own topic: POST /emit writes one event to the
// outbox; the consumer records each applied event in "applied" (one row per
// application, no unique key, so a double apply shows).
func relaySpec(applied *atomic.Int64) platform.Spec {
	return platform.Spec{
		Name: "drillprobe",
		Migrations: fstest.MapFS{
			"00001_applied.sql": {Data: []byte("-- +goose Up\nCREATE TABLE applied (event_id uuid NOT NULL);\n")},
		},
		Topics: []string{relayTopic},
		Wire: func(_ context.Context, p *platform.Platform) ([]platform.Route, error) {
			err := p.Consume(relayTopic, "drillprobe-self", func(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
				applied.Add(1)
				_, err := tx.Exec(ctx, `INSERT INTO applied VALUES ($1)`, env.GetId())
				return err
			})
			if err != nil {
				return nil, err
			}
			pool := p.Pool
			return []platform.Route{{Pattern: "POST /emit", Name: "emit", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id := outbox.NewEventID()
				err := pg.InTx(r.Context(), pool, func(tx pgx.Tx) error {
					_, err := outbox.Enqueue(r.Context(), tx, relayTopic, &eventsv1.Envelope{Id: id, Type: "probe.emitted", ProgramId: 1, Source: "drillprobe"})
					return err
				})
				if err != nil {
					http.Error(w, "enqueue failed", http.StatusInternalServerError)
					return
				}
				_, _ = io.WriteString(w, id)
			})}}, nil
		},
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func status(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Drill: a service started while its broker is down serves at once (healthz
// and readyz 200: readiness is Postgres only), reports kafka_up 0, and
// once the broker starts creates its topics, starts its consumer and
// delivers an event written to its outbox exactly once.
func TestDrillServiceStartsWhileKafkaIsDown(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	env := platformtest.With(platformtest.Env(t), map[string]string{
		"KAFKA_BROKERS":        addr, // nothing listens there yet
		"KAFKA_PROBE_INTERVAL": "100ms",
	})
	var applied atomic.Int64
	began := time.Now()
	inst := platformtest.Start(t, relaySpec(&applied), env)
	startedIn := time.Since(began)
	p := inst.Platform()
	base := "http://" + inst.Addr()
	if got := status(t, base+"/healthz"); got != http.StatusOK {
		t.Fatalf("/healthz = %d with the broker down, want 200", got)
	}
	if got := status(t, base+"/readyz"); got != http.StatusOK {
		t.Fatalf("/readyz = %d with the broker down, want 200 (Kafka is not a readiness check)", got)
	}
	if p.TopicsCreated() {
		t.Fatal("topics reported created with no broker")
	}
	if v := obstest.Metric(t, p.Registry, "kafka_topics_ready"); v != 0 {
		t.Fatalf("kafka_topics_ready = %v, want 0", v)
	}
	eventually(t, 30*time.Second, "kafka_topic_ensure_errors_total counted", func() bool {
		return obstest.Metric(t, p.Registry, "kafka_topic_ensure_errors_total") >= 1
	})
	// An event written while the broker is down waits in the outbox.
	resp, err := http.Post(base+"/emit", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	idBytes, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /emit = %d with the broker down, want 200", resp.StatusCode)
	}
	id := string(idBytes)

	stop, err := embedded.Start(addr, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	brokerAt := time.Now()
	select {
	case <-p.TopicsReady():
	case <-time.After(30 * time.Second):
		t.Fatal("topics not created 30s after the broker started")
	}
	eventually(t, 60*time.Second, "the event applied", func() bool {
		var n int
		return p.Pool.QueryRow(ctx(t), `SELECT count(*) FROM inbox WHERE event_id = $1`, id).Scan(&n) == nil && n >= 1
	})
	t.Logf("served %s after Start began; event applied %s after the broker started", startedIn, time.Since(brokerAt))
	eventually(t, 10*time.Second, "kafka_up 1", func() bool { return obstest.Metric(t, p.Registry, "kafka_up") == 1 })
	if v := obstest.Metric(t, p.Registry, "kafka_topics_ready"); v != 1 {
		t.Fatalf("kafka_topics_ready = %v, want 1", v)
	}
	var n int
	if err := p.Pool.QueryRow(ctx(t), `SELECT count(*) FROM applied WHERE event_id = $1`, id).Scan(&n); err != nil || n != 1 {
		t.Fatalf("applied rows for the event = %d, %v; want 1", n, err)
	}
	if err := p.Pool.QueryRow(ctx(t), `SELECT count(*) FROM inbox WHERE event_id = $1`, id).Scan(&n); err != nil || n != 1 {
		t.Fatalf("inbox rows for the event = %d, %v; want 1", n, err)
	}
	if got := applied.Load(); got != 1 {
		t.Fatalf("handler applied %d times, want 1", got)
	}
	for _, topic := range []string{relayTopic, relayTopic + ".dlq"} {
		if _, err := kafkakit.DescribeTopicConfigs(ctx(t), []string{addr}, topic, "retention.ms"); err != nil {
			t.Fatalf("topic %s: %v", topic, err)
		}
	}
}

// kafka_up follows the broker; /readyz does not.
func TestKafkaUpFollowsTheBrokerAndReadyzDoesNot(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	stop, err := embedded.Start(addr, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	env := platformtest.With(platformtest.Env(t), map[string]string{"KAFKA_BROKERS": addr, "KAFKA_PROBE_INTERVAL": "50ms"})
	inst := platformtest.Start(t, spec(), env)
	reg := inst.Platform().Registry
	if !inst.Platform().TopicsCreated() {
		t.Fatal("with the broker up, topics are not created when Start returns")
	}
	eventually(t, 10*time.Second, "kafka_up 1", func() bool { return obstest.Metric(t, reg, "kafka_up") == 1 })
	stop()
	eventually(t, 30*time.Second, "kafka_up 0 after the broker stopped", func() bool { return obstest.Metric(t, reg, "kafka_up") == 0 })
	if got := status(t, "http://"+inst.Addr()+"/readyz"); got != http.StatusOK {
		t.Fatalf("/readyz = %d with the broker stopped, want 200", got)
	}
}

// An existing topic whose durability differs from the configuration is
// reported (kafka_topic_config_mismatch, a warning), not changed.
func TestTopicDurabilityMismatchIsReportedNotChanged(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.StartBroker(t)
	// Created by hand with min.insync.replicas 2 on a one-replica topic.
	if err := kafkakit.EnsureTopics(ctx(t), brokers, []kafkakit.TopicSpec{{Name: keptTopic, Partitions: 2, ReplicationFactor: 1, MinInsyncReplicas: 2}}); err != nil {
		t.Fatal(err)
	}
	env := platformtest.With(platformtest.Env(t), map[string]string{"KAFKA_BROKERS": strings.Join(brokers, ",")})
	inst := platformtest.Start(t, spec(), env)
	reg := inst.Platform().Registry
	if v := obstest.Metric(t, reg, "kafka_topic_config_mismatch", "topic", keptTopic, "setting", "min.insync.replicas"); v != 1 {
		t.Fatalf("kafka_topic_config_mismatch{topic=%s,setting=min.insync.replicas} = %v, want 1", keptTopic, v)
	}
	if v := obstest.Metric(t, reg, "kafka_topic_config_mismatch"); v != 1 {
		t.Fatalf("mismatches in all = %v, want only that one", v)
	}
	got, err := kafkakit.DescribeTopicConfigs(ctx(t), brokers, keptTopic, "min.insync.replicas")
	if err != nil || got["min.insync.replicas"] != "2" {
		t.Fatalf("min.insync.replicas = %q, %v; want 2, unchanged", got["min.insync.replicas"], err)
	}
}

func TestKafkaDurabilityConfig(t *testing.T) {
	t.Parallel()
	t.Run("production defaults", func(t *testing.T) {
		cfg := platform.LoadConfig("x", obsEnv(map[string]string{}))
		if cfg.KafkaReplicationFactor != 3 || cfg.KafkaMinInsyncReplicas != 2 {
			t.Fatalf("replication factor, min.insync.replicas = %d, %d; want 3, 2", cfg.KafkaReplicationFactor, cfg.KafkaMinInsyncReplicas)
		}
	})
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{name: "replication factor 0", env: map[string]string{"KAFKA_REPLICATION_FACTOR": "0", "KAFKA_MIN_INSYNC_REPLICAS": "1"}, want: "KAFKA_REPLICATION_FACTOR"},
		{name: "min.insync.replicas above the replication factor", env: map[string]string{"KAFKA_REPLICATION_FACTOR": "1", "KAFKA_MIN_INSYNC_REPLICAS": "2"}, want: "KAFKA_MIN_INSYNC_REPLICAS"},
		{name: "min.insync.replicas 0", env: map[string]string{"KAFKA_MIN_INSYNC_REPLICAS": "0"}, want: "KAFKA_MIN_INSYNC_REPLICAS"},
		{name: "not a number", env: map[string]string{"KAFKA_REPLICATION_FACTOR": "three"}, want: "KAFKA_REPLICATION_FACTOR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := obsEnv(tt.env)
			platform.LoadConfig("x", env)
			if err := env.Err(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one naming %s", err, tt.want)
			}
		})
	}
}

func obsEnv(m map[string]string) *obs.Env { return obs.NewEnv(func(k string) string { return m[k] }) }
