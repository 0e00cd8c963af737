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
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

const (
	name       = "platformprobe"
	otherTopic = "probe.things.v1"
)

func spec() platform.Spec {
	return platform.Spec{
		Name: name,
		Migrations: fstest.MapFS{
			"00001_probe.sql": {Data: []byte("-- +goose Up\nCREATE TABLE probe (id int);\n")},
		},
		Topics: []string{eventsv1.TopicCatalog, otherTopic},
		Wire:   func(context.Context, *platform.Platform) ([]platform.Route, error) { return nil, nil },
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestCatalogTopicIsKeptForever(t *testing.T) {
	t.Parallel()
	env := platformtest.Env(t)
	platformtest.Start(t, spec(), env)
	brokers := strings.Split(env["KAFKA_BROKERS"], ",")

	tests := []struct {
		topic   string
		forever bool
	}{
		{topic: eventsv1.TopicCatalog, forever: true},
		{topic: eventsv1.TopicCatalog + ".dlq"},
		{topic: otherTopic},
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

func TestCatalogTopicCreatedEarlierIsKeptForeverAfterStart(t *testing.T) {
	t.Parallel()
	env := platformtest.Env(t)
	brokers := strings.Split(env["KAFKA_BROKERS"], ",")
	// As on a cluster where the topic predates the setting.
	if err := kafkakit.EnsureTopics(ctx(t), brokers, []kafkakit.TopicSpec{{Name: eventsv1.TopicCatalog, Partitions: 4}}); err != nil {
		t.Fatal(err)
	}
	platformtest.Start(t, spec(), env)
	got, err := kafkakit.DescribeTopicConfigs(ctx(t), brokers, eventsv1.TopicCatalog, "retention.ms")
	if err != nil || got["retention.ms"] != "-1" {
		t.Fatalf("retention.ms = %q, %v; want -1", got["retention.ms"], err)
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
