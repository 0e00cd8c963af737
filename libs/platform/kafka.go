package platform

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/svc-dev/svc/libs/kafkakit"
)

// Kafka is not needed to serve: a service whose broker is away starts,
// answers HTTP and keeps writing its outbox, creates its topics in the
// background once the broker answers, and only then lets its consumers join
// their groups (a group that joined before its topic existed can keep an
// empty assignment for ever). /readyz leaves Kafka out, or a broker outage
// would take every pod out of its Service; kafka_up tells the alerting.
const (
	// firstEnsureTimeout bounds the topic creation Start waits for: with the
	// broker up, topics exist when Start returns, as before; with it away,
	// Start goes on and the background retry takes over.
	firstEnsureTimeout = 3 * time.Second
	// ensureMaxBackoff caps the pause between background attempts.
	ensureMaxBackoff = 5 * time.Second
	// kafkaLogEvery bounds how often a failing attempt is logged.
	kafkaLogEvery = 30 * time.Second
	// probeTimeout bounds one kafka_up probe.
	probeTimeout = 5 * time.Second
)

type kafkaMetrics struct {
	up           prometheus.Gauge
	topicsReady  prometheus.Gauge
	ensureErrors prometheus.Counter
	mismatch     *prometheus.GaugeVec
}

func newKafkaMetrics(reg prometheus.Registerer) (kafkaMetrics, error) {
	m := kafkaMetrics{
		up: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kafka_up", Help: "1 when the last probe of the Kafka brokers (a metadata request) answered, else 0.",
		}),
		topicsReady: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kafka_topics_ready", Help: "1 once this service's topics exist (consumers start then), 0 while creation is retried.",
		}),
		ensureErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kafka_topic_ensure_errors_total", Help: "Failed attempts to create this service's topics; retried with backoff.",
		}),
		mismatch: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kafka_topic_config_mismatch", Help: "1 for each existing topic setting (replication.factor, min.insync.replicas) that differs from the configuration; never changed by the service.",
		}, []string{"topic", "setting"}),
	}
	for _, c := range []prometheus.Collector{m.up, m.topicsReady, m.ensureErrors, m.mismatch} {
		if err := reg.Register(c); err != nil {
			return m, fmt.Errorf("kafka metrics: %w", err)
		}
	}
	return m, nil
}

// topicSpecs are spec's topics, each with its dead-letter topic, at the
// configured partitions and durability.
func topicSpecs(spec Spec, cfg Config) []kafkakit.TopicSpec {
	topics := make([]kafkakit.TopicSpec, 0, len(spec.Topics)*2)
	for _, t := range spec.Topics {
		topics = append(topics,
			kafkakit.TopicSpec{Name: t, Partitions: cfg.TopicPartition, ReplicationFactor: cfg.KafkaReplicationFactor,
				MinInsyncReplicas: cfg.KafkaMinInsyncReplicas, Configs: spec.TopicConfigs[t]},
			kafkakit.TopicSpec{Name: t + ".dlq", Partitions: 1, ReplicationFactor: cfg.KafkaReplicationFactor,
				MinInsyncReplicas: cfg.KafkaMinInsyncReplicas})
	}
	return topics
}

// ensureTopics creates the topics once and reports existing ones whose
// durability differs from the configuration (a warning and
// kafka_topic_config_mismatch; they are not changed).
func (p *Platform) ensureTopics(ctx context.Context) error {
	if err := kafkakit.EnsureTopics(ctx, p.Config.KafkaBrokers, p.topics); err != nil {
		p.kafka.ensureErrors.Inc()
		return err
	}
	mismatches, err := kafkakit.CheckTopics(ctx, p.Config.KafkaBrokers, p.topics)
	if err != nil {
		p.Logger.WarnContext(ctx, "kafka topic settings not checked", "err", err)
	}
	for _, m := range mismatches {
		p.kafka.mismatch.WithLabelValues(m.Topic, m.Setting).Set(1)
		p.Logger.WarnContext(ctx, "kafka topic setting differs from the configuration; not changed",
			"topic", m.Topic, "setting", m.Setting, "have", m.Have, "want", m.Want)
	}
	p.kafka.topicsReady.Set(1)
	close(p.topicsReady)
	return nil
}

// retryTopics is a runner: it retries topic creation with backoff until it
// succeeds (unless Start's attempt did), then waits for the end.
func (p *Platform) retryTopics(ctx context.Context) error {
	backoff, lastLog := 100*time.Millisecond, time.Time{}
	for !p.TopicsCreated() {
		attemptCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := p.ensureTopics(attemptCtx)
		cancel()
		if err == nil {
			p.Logger.InfoContext(ctx, "kafka topics created", "topics", len(p.topics))
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		if now := time.Now(); now.Sub(lastLog) >= kafkaLogEvery {
			lastLog = now
			p.logEnsureFailure(ctx, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, ensureMaxBackoff)
	}
	<-ctx.Done()
	return nil
}

func (p *Platform) logEnsureFailure(ctx context.Context, err error) {
	if errors.Is(err, kafka.InvalidReplicationFactor) {
		// Not an outage: the cluster has fewer brokers than the
		// configuration asks replicas of (a one-broker stack without
		// KAFKA_REPLICATION_FACTOR=1). Retried still, in case brokers join.
		p.Logger.ErrorContext(ctx, "kafka topics cannot be created: KAFKA_REPLICATION_FACTOR exceeds the brokers of the cluster; consumers wait",
			"replication_factor", p.Config.KafkaReplicationFactor, "brokers", p.Brokers(), "err", err)
		return
	}
	p.Logger.WarnContext(ctx, "kafka topics not created yet, retrying in the background; consumers wait", "brokers", p.Brokers(), "err", err)
}

// TopicsCreated reports whether the service's topics exist (its consumers
// have started or are about to).
func (p *Platform) TopicsCreated() bool {
	select {
	case <-p.topicsReady:
		return true
	default:
		return false
	}
}

// TopicsReady is closed once the service's topics exist.
func (p *Platform) TopicsReady() <-chan struct{} { return p.topicsReady }

// afterTopics runs fn once the topics exist; nil if ctx ends first.
func (p *Platform) afterTopics(fn func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-p.topicsReady:
			return fn(ctx)
		case <-ctx.Done():
			return nil
		}
	}
}

// probeKafka is a runner: it refreshes kafka_up every KAFKA_PROBE_INTERVAL.
func (p *Platform) probeKafka(ctx context.Context) error {
	t := time.NewTicker(p.Config.KafkaProbeInterval)
	defer t.Stop()
	for {
		probeCtx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := kafkakit.Ping(probeCtx, p.Config.KafkaBrokers)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			p.kafka.up.Set(0)
		} else {
			p.kafka.up.Set(1)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// newReader is a group reader for a consumer, built when it starts.
func (p *Platform) newReader(group, topic string) func() *kafka.Reader {
	return func() *kafka.Reader { return kafkakit.NewReader(p.Config.KafkaBrokers, group, topic) }
}
