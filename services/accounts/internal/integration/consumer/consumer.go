// Package consumer is the Kafka transport of the integration state: it
// decodes tracking's events (topic tracking.events.v1) and keeps the test
// events that count toward a program's integration, inside the inbox
// transaction the platform opens for each event.
package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/accounts/internal/integration"
)

// Group is the consumer group (and inbox name) of this consumer; keep it
// stable, renaming it re-applies every event still in Kafka.
const Group = "accounts.integration"

// Recorder stores one counted test event inside tx.
type Recorder func(ctx context.Context, tx pgx.Tx, e integration.RecordedEvent) error

// Handler returns the inbox handler for tracking.events.v1. Real clicks and
// leads, visits and unknown types are acknowledged and ignored, so a new
// event type never stalls this consumer.
func Handler(record Recorder) func(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	return func(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
		ev, ok, err := decode(env)
		if err != nil || !ok {
			return err
		}
		return record(ctx, tx, ev)
	}
}

// decode turns an envelope into the event to keep, if it counts.
func decode(env *eventsv1.Envelope) (integration.RecordedEvent, bool, error) {
	switch env.GetType() {
	case eventsv1.TypeClickRecorded:
		var c eventsv1.ClickRecorded
		if err := proto.Unmarshal(env.GetPayload(), &c); err != nil {
			return integration.RecordedEvent{}, false, fmt.Errorf("decode click event %s: %w", env.GetId(), err)
		}
		if !integration.CountsForVerification(integration.KindClick, c.GetIsTest(), c.GetViaApiKey()) {
			return integration.RecordedEvent{}, false, nil
		}
		ev := integration.RecordedEvent{Kind: integration.KindClick, EventID: c.GetEventId(), ProgramID: c.GetProgramId()}
		ev.OccurredAt, ev.PublishedAt = times(c.GetClickedAt(), env.GetOccurredAt())
		return ev, true, nil
	case eventsv1.TypeLeadRecorded:
		var l eventsv1.LeadRecorded
		if err := proto.Unmarshal(env.GetPayload(), &l); err != nil {
			return integration.RecordedEvent{}, false, fmt.Errorf("decode lead event %s: %w", env.GetId(), err)
		}
		if !integration.CountsForVerification(integration.KindLead, l.GetIsTest(), l.GetViaApiKey()) {
			return integration.RecordedEvent{}, false, nil
		}
		ev := integration.RecordedEvent{Kind: integration.KindLead, EventID: l.GetEventId(), ProgramID: l.GetProgramId()}
		ev.OccurredAt, ev.PublishedAt = times(l.GetRecordedAt(), env.GetOccurredAt())
		return ev, true, nil
	}
	return integration.RecordedEvent{}, false, nil
}

// times picks the event's own time and its commit time, each standing in
// for the other when a producer left one out.
func times(at, published *timestamppb.Timestamp) (time.Time, time.Time) {
	switch {
	case at == nil && published == nil:
		return time.Time{}, time.Time{}
	case at == nil:
		at = published
	case published == nil:
		published = at
	}
	return at.AsTime(), published.AsTime()
}

// Skip declines, before any transaction, the tracking events that can never
// count for verification (production clicks, leads and visits): almost all
// of the topic. An undecodable payload is not skipped, so it reaches the
// handler and the dead-letter path.
func Skip(env *eventsv1.Envelope) bool {
	_, ok, err := decode(env)
	return err == nil && !ok
}
