// Package platformtest runs real services in tests: a fresh database and an
// embedded Kafka-protocol broker per test, and each service in-process on a
// loopback port through the same platform.Start the binaries use, on the
// real clock or on a Clock the test moves (platform.WithClock(clock.Now)).
package platformtest

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/kafkakit/kafkatest"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/libs/platform"
)

// Env is the environment a test stack shares: a fresh database (dropped when
// the test ends), a fresh one-broker cluster (topics with one replica),
// loopback listeners and quiet logs. Add the
// services' own variables to it.
func Env(t testing.TB) map[string]string {
	t.Helper()
	return map[string]string{
		"HTTP_ADDR":     "127.0.0.1:0",
		"DATABASE_URL":  pgtest.NewDatabase(t),
		"KAFKA_BROKERS": strings.Join(kafkatest.StartBroker(t), ","),
		"LOG_LEVEL":     "error",
		// One broker: production's 3 replicas could not be placed.
		"KAFKA_REPLICATION_FACTOR":  "1",
		"KAFKA_MIN_INSYNC_REPLICAS": "1",
		// make test runs many stacks at once against one Postgres (100
		// connections by default): a pool gives back what a burst opened
		// instead of keeping it for pgxpool's 30 minutes.
		"DB_MAX_CONN_IDLE": "500ms",
	}
}

// Start runs spec with env until the test ends (stopped gracefully in
// t.Cleanup) and returns it; its address is inst.Addr(). Options are
// platform.Start's, such as platform.WithClock(clock.Now).
func Start(t testing.TB, spec platform.Spec, env map[string]string, opts ...platform.Option) *platform.Instance {
	t.Helper()
	inst, err := TryStart(t, spec, env, opts...)
	if err != nil {
		t.Fatalf("start %s: %v", spec.Name, err)
	}
	return inst
}

// TryStart is Start for tests that check a service refuses to start: the
// error is returned rather than failing the test. An instance that did start
// is stopped when the test ends, so the caller must not stop it too (a
// second Stop would wait for ever).
func TryStart(t testing.TB, spec platform.Spec, env map[string]string, opts ...platform.Option) (*platform.Instance, error) {
	t.Helper()
	inst, err := platform.Start(context.Background(), spec, func(k string) string { return env[k] }, io.Discard, opts...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = inst.Stop() })
	return inst, nil
}

// With returns a copy of env with the given variables set on top.
func With(env map[string]string, extra map[string]string) map[string]string {
	out := make(map[string]string, len(env)+len(extra))
	for k, v := range env {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}
