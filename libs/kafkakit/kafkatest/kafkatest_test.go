package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/kafkakit"
)

func TestStartBrokerServesUntilCleanup(t *testing.T) {
	var brokers []string
	t.Run("serves", func(t *testing.T) {
		brokers = StartBroker(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := kafkakit.Ping(ctx, brokers); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("closed after cleanup", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := kafkakit.Ping(ctx, brokers); err == nil {
			t.Fatal("broker still answers after its test ended")
		}
	})
}
