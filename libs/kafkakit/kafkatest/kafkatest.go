// Package kafkatest starts an in-process Kafka-compatible broker (kfake,
// which speaks the real wire protocol) for tests.
package kafkatest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// StartBroker starts a one-broker kfake cluster on a free 127.0.0.1 port and
// returns its bootstrap addresses; the cluster is closed in t.Cleanup.
// Topics are not created automatically (as in production): create them with
// kafkakit.EnsureTopics, or pass kfake.SeedTopics in opts.
func StartBroker(t testing.TB, opts ...kfake.Opt) []string {
	t.Helper()
	all := append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)
	c, err := kfake.NewCluster(all...)
	if err != nil {
		t.Fatalf("kafkatest: start kfake cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}
