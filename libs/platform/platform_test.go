package platform_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

const (
	name       = "platformprobe"
	keptTopic  = "probe.kept.v1"
	otherTopic = "probe.things.v1"
)

func spec() platform.Spec {
	return platform.Spec{
		Name: name,
		Migrations: fstest.MapFS{
			"00001_probe.sql": {Data: []byte("-- +goose Up\nCREATE TABLE probe (id int);\n")},
		},
		Topics:       []string{keptTopic, otherTopic},
		TopicConfigs: map[string]map[string]string{keptTopic: {"retention.ms": "-1"}},
		Wire:         func(context.Context, *platform.Platform) ([]platform.Route, error) { return nil, nil },
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestTopicsAreCreatedWithTheirSpecConfigs(t *testing.T) {
	t.Parallel()
	env := platformtest.Env(t)
	platformtest.Start(t, spec(), env)
	brokers := strings.Split(env["KAFKA_BROKERS"], ",")

	tests := []struct {
		topic   string
		forever bool
	}{
		{topic: keptTopic, forever: true},
		{topic: keptTopic + ".dlq"},
		{topic: otherTopic},
		{topic: otherTopic + ".dlq"},
	}
	for _, tt := range tests {
		t.Run(tt.topic, func(t *testing.T) {
			got, err := kafkakit.DescribeTopicConfigs(ctx(t), brokers, tt.topic, "retention.ms")
			if err != nil {
				t.Fatal(err)
			}
			if forever := got["retention.ms"] == "-1"; forever != tt.forever {
				t.Fatalf("retention.ms = %q; kept forever = %v, want %v", got["retention.ms"], forever, tt.forever)
			}
		})
	}
}

func TestTopicCreatedEarlierIsBroughtToItsSpecConfigsAtStart(t *testing.T) {
	t.Parallel()
	env := platformtest.Env(t)
	brokers := strings.Split(env["KAFKA_BROKERS"], ",")
	// As on a cluster where the topic predates the setting, or where a
	// consumer that lists the topic without its settings started first.
	consumer := spec()
	consumer.Name, consumer.TopicConfigs = "probeconsumer", nil
	platformtest.Start(t, consumer, env)
	if got, err := kafkakit.DescribeTopicConfigs(ctx(t), brokers, keptTopic, "retention.ms"); err != nil || got["retention.ms"] == "-1" {
		t.Fatalf("before the owner started: retention.ms = %q, %v; want the broker default", got["retention.ms"], err)
	}
	platformtest.Start(t, spec(), env)
	got, err := kafkakit.DescribeTopicConfigs(ctx(t), brokers, keptTopic, "retention.ms")
	if err != nil || got["retention.ms"] != "-1" {
		t.Fatalf("retention.ms = %q, %v; want -1", got["retention.ms"], err)
	}
	// A consumer that starts again afterwards leaves the owner's settings.
	platformtest.Start(t, consumer, env)
	if got, err := kafkakit.DescribeTopicConfigs(ctx(t), brokers, keptTopic, "retention.ms"); err != nil || got["retention.ms"] != "-1" {
		t.Fatalf("after the consumer restarted: retention.ms = %q, %v; want -1", got["retention.ms"], err)
	}
}

func TestInboxSweptByRetentionFromEnv(t *testing.T) {
	t.Parallel()
	env := platformtest.With(platformtest.Env(t), map[string]string{"INBOX_RETENTION": "2h"})
	// The bus tables exist before the service starts, with one row past the
	// configured retention and one within it; the sweeper's first pass runs
	// at start.
	if err := outbox.Migrate(ctx(t), env["DATABASE_URL"], name, nil); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx(t), env["DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	old, recent := outbox.NewEventID(), outbox.NewEventID()
	if _, err := conn.Exec(ctx(t), `INSERT INTO `+name+`.inbox (consumer, event_id, applied_at)
		VALUES ('c', $1, now() - interval '3 hours'), ('c', $2, now() - interval '1 hour')`, old, recent); err != nil {
		t.Fatal(err)
	}
	inst := platformtest.Start(t, spec(), env)

	count := func(id string) int {
		var n int
		if err := inst.Platform().Pool.QueryRow(ctx(t), `SELECT count(*) FROM inbox WHERE event_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for count(old) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the row past INBOX_RETENTION was not swept")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if count(recent) != 1 {
		t.Fatal("the row within INBOX_RETENTION was swept")
	}
	mfs, err := inst.Platform().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var swept float64
	for _, mf := range mfs {
		if mf.GetName() == "inbox_swept_total" {
			swept = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if swept != 1 {
		t.Fatalf("inbox_swept_total = %v, want 1", swept)
	}
}

func TestInboxRetentionIsValidated(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, value string }{
		{name: "not a duration", value: "168"},
		{name: "shorter than an hour", value: "30m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := platformtest.With(platformtest.Env(t), map[string]string{"INBOX_RETENTION": tt.value})
			inst, err := platform.Start(context.Background(), spec(), func(k string) string { return env[k] }, io.Discard)
			if err == nil {
				_ = inst.Stop()
				t.Fatalf("started with INBOX_RETENTION=%q", tt.value)
			}
			if !strings.Contains(err.Error(), "INBOX_RETENTION") {
				t.Fatalf("error %q does not name INBOX_RETENTION", err)
			}
		})
	}
}
