package outbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestClassifyPublish(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want publishClass
	}{
		{name: "client-side message too large", err: kafka.MessageTooLargeError{}, want: permanent},
		{name: "broker message size too large", err: kafka.MessageSizeTooLarge, want: permanent},
		{name: "invalid message", err: kafka.InvalidMessage, want: permanent},
		{name: "invalid record", err: kafka.InvalidRecord, want: permanent},
		{name: "invalid topic", err: kafka.InvalidTopic, want: permanent},
		{name: "record list too large", err: kafka.RecordListTooLarge, want: permanent},
		{name: "unknown topic waits before parking", err: kafka.UnknownTopicOrPartition, want: missingTopic},
		{name: "leader not available is transient", err: kafka.LeaderNotAvailable, want: transient},
		{name: "not leader is transient", err: kafka.NotLeaderForPartition, want: transient},
		{name: "request timed out is transient", err: kafka.RequestTimedOut, want: transient},
		{name: "network error is transient", err: io.ErrUnexpectedEOF, want: transient},
		{name: "deadline is transient", err: context.DeadlineExceeded, want: transient},
		{name: "wrapped permanent", err: fmt.Errorf("write: %w", kafka.MessageSizeTooLarge), want: permanent},
		{name: "write errors take the worst", err: kafka.WriteErrors{nil, kafka.LeaderNotAvailable, kafka.MessageSizeTooLarge}, want: permanent},
		{name: "write errors all transient", err: kafka.WriteErrors{nil, kafka.LeaderNotAvailable}, want: transient},
		{name: "write errors with a missing topic", err: kafka.WriteErrors{kafka.UnknownTopicOrPartition, nil}, want: missingTopic},
		{name: "unrecognised is transient", err: errors.New("boom"), want: transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classifyPublish(tt.err); got != tt.want {
				t.Fatalf("classifyPublish(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}
