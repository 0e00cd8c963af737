package kafkakit

import (
	"context"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// HeaderCarrier adapts message headers to propagation.TextMapCarrier.
// Use it through a pointer to the message's Headers,
// (*HeaderCarrier)(&msg.Headers): Set appends to the slice, and on a value
// the appended header would be lost.
type HeaderCarrier []kafka.Header

var _ propagation.TextMapCarrier = (*HeaderCarrier)(nil)

// Get returns the value of the last header named key, or "".
func (c *HeaderCarrier) Get(key string) string {
	for i := len(*c) - 1; i >= 0; i-- {
		if (*c)[i].Key == key {
			return string((*c)[i].Value)
		}
	}
	return ""
}

// Set replaces every header named key with one holding value. It builds a
// new slice rather than editing in place: callers may share one header slice
// between messages.
func (c *HeaderCarrier) Set(key, value string) {
	kept := make([]kafka.Header, 0, len(*c)+1)
	for _, h := range *c {
		if h.Key != key {
			kept = append(kept, h)
		}
	}
	*c = append(kept, kafka.Header{Key: key, Value: []byte(value)})
}

// Keys lists the header names.
func (c *HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(*c))
	for _, h := range *c {
		keys = append(keys, h.Key)
	}
	return keys
}

// Inject writes the trace context of ctx into msg's headers with the
// process's propagator (otel.GetTextMapPropagator, installed by the
// service's main).
func Inject(ctx context.Context, msg *kafka.Message) {
	InjectWith(ctx, otel.GetTextMapPropagator(), msg)
}

// InjectWith is Inject with an explicit propagator.
func InjectWith(ctx context.Context, prop propagation.TextMapPropagator, msg *kafka.Message) {
	prop.Inject(ctx, (*HeaderCarrier)(&msg.Headers))
}

// Extract returns ctx carrying the trace context found in msg's headers,
// read with the process's propagator; start the consumer span from it.
func Extract(ctx context.Context, msg kafka.Message) context.Context {
	return ExtractWith(ctx, otel.GetTextMapPropagator(), msg)
}

// ExtractWith is Extract with an explicit propagator.
func ExtractWith(ctx context.Context, prop propagation.TextMapPropagator, msg kafka.Message) context.Context {
	return prop.Extract(ctx, (*HeaderCarrier)(&msg.Headers))
}
