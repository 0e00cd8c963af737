package kafkakit_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/kafkakit/kafkatest"
)

func TestCheckTopicsReportsDurabilityMismatchesAndChangesNothing(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.StartBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// As the local stack creates them: one replica, min.insync.replicas 1.
	created := []kafkakit.TopicSpec{
		{Name: "test.durable.v1", Partitions: 2, ReplicationFactor: 1, MinInsyncReplicas: 1},
		{Name: "test.defaults.v1", Partitions: 2},
	}
	if err := kafkakit.EnsureTopics(ctx, brokers, created); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		spec kafkakit.TopicSpec
		want []kafkakit.Mismatch
	}{
		{name: "same settings", spec: created[0]},
		{name: "settings not in the spec are not checked", spec: kafkakit.TopicSpec{Name: "test.durable.v1"}},
		{name: "production settings on a one-replica topic", spec: kafkakit.TopicSpec{Name: "test.durable.v1", ReplicationFactor: 3, MinInsyncReplicas: 2},
			want: []kafkakit.Mismatch{
				{Topic: "test.durable.v1", Setting: "replication.factor", Want: "3", Have: "1"},
				{Topic: "test.durable.v1", Setting: "min.insync.replicas", Want: "2", Have: "1"},
			}},
		{name: "broker default min.insync.replicas", spec: kafkakit.TopicSpec{Name: "test.defaults.v1", MinInsyncReplicas: 2},
			want: []kafkakit.Mismatch{{Topic: "test.defaults.v1", Setting: "min.insync.replicas", Want: "2", Have: "1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := kafkakit.CheckTopics(ctx, brokers, []kafkakit.TopicSpec{tt.spec})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("mismatches = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("ensure with other settings changes nothing", func(t *testing.T) {
		prod := []kafkakit.TopicSpec{{Name: "test.durable.v1", Partitions: 2, ReplicationFactor: 3, MinInsyncReplicas: 2}}
		if err := kafkakit.EnsureTopics(ctx, brokers, prod); err != nil {
			t.Fatal(err)
		}
		got, err := kafkakit.DescribeTopicConfigs(ctx, brokers, "test.durable.v1", "min.insync.replicas")
		if err != nil || got["min.insync.replicas"] != "1" {
			t.Fatalf("min.insync.replicas = %q, %v; want 1, untouched", got["min.insync.replicas"], err)
		}
	})
	t.Run("missing topic is an error", func(t *testing.T) {
		if _, err := kafkakit.CheckTopics(ctx, brokers, []kafkakit.TopicSpec{{Name: "test.absent.v1", ReplicationFactor: 1}}); err == nil {
			t.Fatal("no error")
		}
	})
}
