// Package kafkakit builds segmentio/kafka-go readers and writers with safe
// defaults, creates topics explicitly, and carries OpenTelemetry trace
// context in message headers.
//
// kafka-go's zero-value defaults are unsafe for the outbox/inbox pattern:
// a Writer{} does not wait for acknowledgements and batches for a second;
// ReadMessage commits before processing. The constructors here fix that.
package kafkakit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// Writer defaults.
const (
	// DefaultBatchTimeout bounds how long a partial batch waits; kafka-go's
	// default of 1 s would add a second to every synchronous write.
	DefaultBatchTimeout = 5 * time.Millisecond
	// DefaultBatchSize is the most messages per produce request. The outbox
	// relay writes whole batches in one WriteMessages call; this lets a
	// 1,000-row batch go out in one request per partition.
	DefaultBatchSize = 1000
	// DefaultWriteTimeout bounds one produce round trip.
	DefaultWriteTimeout = 10 * time.Second
)

// WriterOption adjusts a writer built by NewWriter. Any field of
// kafka.Writer can be set with a custom option.
type WriterOption func(*kafka.Writer)

// WithTopic fixes the topic of every message. Without it each message must
// carry its own Topic (the outbox relay publishes several topics per batch).
func WithTopic(topic string) WriterOption {
	return func(w *kafka.Writer) { w.Topic = topic }
}

// WithBatchSize overrides DefaultBatchSize.
func WithBatchSize(n int) WriterOption {
	return func(w *kafka.Writer) { w.BatchSize = n }
}

// WithBatchTimeout overrides DefaultBatchTimeout.
func WithBatchTimeout(d time.Duration) WriterOption {
	return func(w *kafka.Writer) { w.BatchTimeout = d }
}

// WithWriterLogger routes kafka-go's error log to logger (at warn level).
func WithWriterLogger(logger *slog.Logger) WriterOption {
	return func(w *kafka.Writer) { w.ErrorLogger = errorLogger(logger, "kafka writer") }
}

// NewWriter returns a synchronous writer that waits for all in-sync
// replicas (RequireAll), partitions by message key with a hash balancer (so
// events of one program keep their order), batches for at most a few
// milliseconds, and never creates topics implicitly.
func NewWriter(brokers []string, opts ...WriterOption) *kafka.Writer {
	w := &kafka.Writer{
		Addr:                   kafka.TCP(brokers...),
		Balancer:               &kafka.Hash{},
		RequiredAcks:           kafka.RequireAll,
		BatchTimeout:           DefaultBatchTimeout,
		BatchSize:              DefaultBatchSize,
		WriteTimeout:           DefaultWriteTimeout,
		AllowAutoTopicCreation: false,
		Async:                  false,
	}
	for _, o := range opts {
		o(w)
	}
	return w
}

// Reader defaults.
const (
	// DefaultMaxWait bounds how long a fetch waits for new data: low enough
	// that an idle consumer picks up a new event quickly.
	DefaultMaxWait = 250 * time.Millisecond
	// DefaultMaxBytes caps one fetch response.
	DefaultMaxBytes = 10 << 20
	// DefaultSessionTimeout and DefaultRebalanceTimeout (kafka-go: 30 s
	// each) bound how long a group waits for a member that is gone. After
	// a broker restart the members' old sessions are still in the group:
	// measured with the embedded broker, consumers resumed 27 s after a
	// 3 s outage with kafka-go's defaults, 10 s with these. A member
	// heartbeats every 3 s from its own goroutine, however long a message
	// takes to apply.
	DefaultSessionTimeout   = 10 * time.Second
	DefaultRebalanceTimeout = 10 * time.Second
)

// ReaderOption adjusts the kafka.ReaderConfig before NewReader builds the
// reader.
type ReaderOption func(*kafka.ReaderConfig)

// WithMaxWait overrides DefaultMaxWait.
func WithMaxWait(d time.Duration) ReaderOption {
	return func(c *kafka.ReaderConfig) { c.MaxWait = d }
}

// WithStartOffset sets where a group with no committed offset starts
// (kafka.FirstOffset by default, so no event published before the first
// deployment of a consumer is skipped).
func WithStartOffset(offset int64) ReaderOption {
	return func(c *kafka.ReaderConfig) { c.StartOffset = offset }
}

// WithReaderLogger routes kafka-go's error log to logger (at warn level).
func WithReaderLogger(logger *slog.Logger) ReaderOption {
	return func(c *kafka.ReaderConfig) { c.ErrorLogger = errorLogger(logger, "kafka reader") }
}

// NewReader returns a consumer-group reader for one topic. Offsets are
// committed synchronously (CommitInterval 0) by CommitMessages, which
// callers invoke only after their database transaction committed; use
// FetchMessage, never ReadMessage (it commits before processing).
func NewReader(brokers []string, groupID, topic string, opts ...ReaderOption) *kafka.Reader {
	cfg := kafka.ReaderConfig{
		Brokers:        brokers,
		GroupID:        groupID,
		Topic:          topic,
		StartOffset:    kafka.FirstOffset,
		MinBytes:       1,
		MaxBytes:       DefaultMaxBytes,
		MaxWait:        DefaultMaxWait,
		CommitInterval: 0,
		// A broker outage must not leave the group waiting half a minute
		// for sessions that ended with it.
		SessionTimeout:   DefaultSessionTimeout,
		RebalanceTimeout: DefaultRebalanceTimeout,
		// Partitions added to a topic later are picked up without a restart.
		WatchPartitionChanges: true,
	}
	for _, o := range opts {
		o(&cfg)
	}
	return kafka.NewReader(cfg)
}

// TopicSpec describes a topic for EnsureTopics.
type TopicSpec struct {
	Name string
	// Partitions; 0 means the broker's default.
	Partitions int
	// ReplicationFactor; 0 means the broker's default. Only a new topic
	// gets it: CheckTopics reports an existing topic with another.
	ReplicationFactor int
	// MinInsyncReplicas is the topic's min.insync.replicas (0: the broker's
	// default): with RequireAll, how many replicas must have a write before
	// it is acknowledged. Only a new topic gets it: CheckTopics reports an
	// existing topic with another value instead of changing it.
	MinInsyncReplicas int
	// Configs are topic-level settings such as "retention.ms". They are the
	// desired state: a topic that already exists gets those that differ
	// (settings not named here are left alone).
	Configs map[string]string
}

// EnsureTopics creates the topics that do not exist yet and waits until
// every requested topic has a leader for each partition. A topic that
// already exists keeps its partition count (changing it would move keys),
// but is given the spec's Configs where its own differ: a setting added to a
// spec later, such as a longer retention, must reach clusters where the topic
// was created before. That step needs the DescribeConfigs and AlterConfigs
// permissions on such topics.
//
// Call it before starting consumers: a topic created after a consumer group
// joined can get an empty assignment that never recovers.
func EnsureTopics(ctx context.Context, brokers []string, topics []TopicSpec) error {
	if len(topics) == 0 {
		return nil
	}
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr}

	req := &kafka.CreateTopicsRequest{}
	names := make([]string, 0, len(topics))
	byName := make(map[string]TopicSpec, len(topics))
	for _, t := range topics {
		if t.Name == "" {
			return errors.New("ensure topics: empty topic name")
		}
		tc := kafka.TopicConfig{Topic: t.Name, NumPartitions: -1, ReplicationFactor: -1}
		if t.Partitions > 0 {
			tc.NumPartitions = t.Partitions
		}
		if t.ReplicationFactor > 0 {
			tc.ReplicationFactor = t.ReplicationFactor
		}
		for k, v := range t.Configs {
			tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: v})
		}
		if t.MinInsyncReplicas > 0 {
			tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: minISR, ConfigValue: strconv.Itoa(t.MinInsyncReplicas)})
		}
		req.Topics = append(req.Topics, tc)
		names = append(names, t.Name)
		byName[t.Name] = t
	}
	resp, err := client.CreateTopics(ctx, req)
	if err != nil {
		return fmt.Errorf("create topics %v: %w", names, err)
	}
	var existing []TopicSpec
	for name, terr := range resp.Errors {
		switch {
		case errors.Is(terr, kafka.TopicAlreadyExists):
			if len(byName[name].Configs) > 0 {
				existing = append(existing, byName[name])
			}
		case terr != nil:
			return fmt.Errorf("create topic %s: %w", name, terr)
		}
	}
	if err := waitForLeaders(ctx, client, names); err != nil {
		return err
	}
	for _, t := range existing {
		if err := alignConfigs(ctx, client, t); err != nil {
			return err
		}
	}
	return nil
}

const minISR = "min.insync.replicas"

// Mismatch is a durability setting of an existing topic that differs from
// its TopicSpec.
type Mismatch struct {
	Topic   string
	Setting string // "replication.factor" or "min.insync.replicas"
	Want    string
	Have    string
}

func (m Mismatch) String() string {
	return fmt.Sprintf("topic %s: %s is %s, want %s", m.Topic, m.Setting, m.Have, m.Want)
}

// CheckTopics compares the replication factor and min.insync.replicas of
// existing topics with their specs (where the spec sets them) and returns
// the differences. It changes nothing: moving replicas is a reassignment an
// operator plans, and lowering min.insync.replicas silently would weaken
// every acknowledged write, so a mismatch is for a person to see (the
// platform logs it and exports kafka_topic_config_mismatch). A topic that
// does not exist is an error.
func CheckTopics(ctx context.Context, brokers []string, topics []TopicSpec) ([]Mismatch, error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr}
	names := make([]string, 0, len(topics))
	for _, t := range topics {
		names = append(names, t.Name)
	}
	if len(names) == 0 {
		return nil, nil
	}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: names})
	if err != nil {
		return nil, fmt.Errorf("check topics %v: %w", names, err)
	}
	byName := make(map[string]kafka.Topic, len(md.Topics))
	for _, t := range md.Topics {
		byName[t.Name] = t
	}
	var out []Mismatch
	for _, t := range topics {
		mt, ok := byName[t.Name]
		if !ok || mt.Error != nil || len(mt.Partitions) == 0 {
			return nil, fmt.Errorf("check topic %s: not found", t.Name)
		}
		if t.ReplicationFactor > 0 {
			rf := len(mt.Partitions[0].Replicas)
			for _, p := range mt.Partitions[1:] {
				rf = min(rf, len(p.Replicas))
			}
			if rf != t.ReplicationFactor {
				out = append(out, Mismatch{Topic: t.Name, Setting: "replication.factor", Want: strconv.Itoa(t.ReplicationFactor), Have: strconv.Itoa(rf)})
			}
		}
		if t.MinInsyncReplicas > 0 {
			have, err := describeTopicConfigs(ctx, client, t.Name, []string{minISR})
			if err != nil {
				return nil, err
			}
			if want := strconv.Itoa(t.MinInsyncReplicas); have[minISR] != want {
				out = append(out, Mismatch{Topic: t.Name, Setting: minISR, Want: want, Have: have[minISR]})
			}
		}
	}
	return out, nil
}

// alignConfigs sets the configs of an existing topic that differ from t's.
// Reading first keeps the common case (nothing to change) free of writes and
// of the AlterConfigs permission.
func alignConfigs(ctx context.Context, client *kafka.Client, t TopicSpec) error {
	names := make([]string, 0, len(t.Configs))
	for k := range t.Configs {
		names = append(names, k)
	}
	slices.Sort(names)
	have, err := describeTopicConfigs(ctx, client, t.Name, names)
	if err != nil {
		return err
	}
	var set []kafka.IncrementalAlterConfigsRequestConfig
	for _, k := range names {
		if v, ok := have[k]; !ok || v != t.Configs[k] {
			set = append(set, kafka.IncrementalAlterConfigsRequestConfig{Name: k, Value: t.Configs[k], ConfigOperation: kafka.ConfigOperationSet})
		}
	}
	if len(set) == 0 {
		return nil
	}
	resp, err := client.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{
		Resources: []kafka.IncrementalAlterConfigsRequestResource{{ResourceType: kafka.ResourceTypeTopic, ResourceName: t.Name, Configs: set}},
	})
	if err == nil {
		for _, r := range resp.Resources {
			if r.Error != nil {
				err = r.Error
			}
		}
	}
	if err != nil {
		return fmt.Errorf("set configs %v of existing topic %s: %w", configNames(set), t.Name, err)
	}
	return nil
}

func configNames(cs []kafka.IncrementalAlterConfigsRequestConfig) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// DescribeTopicConfigs returns the current value of each named config of
// topic (every config when names is empty), defaults included.
func DescribeTopicConfigs(ctx context.Context, brokers []string, topic string, names ...string) (map[string]string, error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	return describeTopicConfigs(ctx, &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr}, topic, names)
}

func describeTopicConfigs(ctx context.Context, client *kafka.Client, topic string, names []string) (map[string]string, error) {
	resp, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{
		Resources: []kafka.DescribeConfigRequestResource{{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: names}},
	})
	if err != nil {
		return nil, fmt.Errorf("describe configs of topic %s: %w", topic, err)
	}
	out := map[string]string{}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return nil, fmt.Errorf("describe configs of topic %s: %w", topic, r.Error)
		}
		for _, e := range r.ConfigEntries {
			out[e.ConfigName] = e.ConfigValue
		}
	}
	return out, nil
}

// waitForLeaders polls metadata until each topic has partitions and every
// partition a leader: CreateTopics can return before the cluster has
// propagated the new topic.
func waitForLeaders(ctx context.Context, client *kafka.Client, names []string) error {
	const pause = 50 * time.Millisecond
	for {
		md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: names})
		var notReady string
		if err != nil {
			notReady = err.Error()
		} else {
			notReady = firstNotReady(md, names)
		}
		if notReady == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for topics %v: %s: %w", names, notReady, ctx.Err())
		case <-time.After(pause):
		}
	}
}

func firstNotReady(md *kafka.MetadataResponse, names []string) string {
	byName := make(map[string]kafka.Topic, len(md.Topics))
	for _, t := range md.Topics {
		byName[t.Name] = t
	}
	for _, n := range names {
		t, ok := byName[n]
		switch {
		case !ok:
			return "topic " + n + " not in metadata"
		case t.Error != nil:
			return "topic " + n + ": " + t.Error.Error()
		case len(t.Partitions) == 0:
			return "topic " + n + " has no partitions"
		}
		for _, p := range t.Partitions {
			if p.Error != nil || p.Leader.Host == "" {
				return fmt.Sprintf("topic %s partition %d has no leader", n, p.ID)
			}
		}
	}
	return ""
}

// Ping checks that the cluster answers a metadata request; services use it
// for readiness. Bound it with a context deadline.
func Ping(ctx context.Context, brokers []string) error {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
	if err != nil {
		return fmt.Errorf("kafka metadata: %w", err)
	}
	if len(md.Brokers) == 0 {
		return errors.New("kafka metadata: no brokers")
	}
	return nil
}

// errorLogger adapts slog to kafka-go's Logger interface.
func errorLogger(logger *slog.Logger, component string) kafka.LoggerFunc {
	return func(msg string, args ...any) {
		logger.Warn(component+": "+fmt.Sprintf(msg, args...), "component", component)
	}
}
