package consumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/accounts/internal/integration"
	"github.com/svc-dev/svc/services/accounts/internal/integration/consumer"
)

func envelope(t *testing.T, typ string, msg proto.Message, published *timestamppb.Timestamp) *eventsv1.Envelope {
	t.Helper()
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return &eventsv1.Envelope{Id: "e1", Type: typ, ProgramId: 7, OccurredAt: published, Payload: b}
}

func TestHandlerKeepsOnlyKeyedTestClicksAndLeads(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	pub := at.Add(2 * time.Second)
	for _, tc := range []struct {
		name string
		env  *eventsv1.Envelope
		want *integration.RecordedEvent
	}{
		{"keyed test click", envelope(t, eventsv1.TypeClickRecorded, &eventsv1.ClickRecorded{EventId: 5, ProgramId: 7, IsTest: true, ViaApiKey: true, ClickedAt: timestamppb.New(at)}, timestamppb.New(pub)),
			&integration.RecordedEvent{Kind: integration.KindClick, EventID: 5, ProgramID: 7, OccurredAt: at, PublishedAt: pub}},
		{"test click without key", envelope(t, eventsv1.TypeClickRecorded, &eventsv1.ClickRecorded{EventId: 13, ProgramId: 7, IsTest: true, ClickedAt: timestamppb.New(at)}, timestamppb.New(pub)), nil},
		{"real click", envelope(t, eventsv1.TypeClickRecorded, &eventsv1.ClickRecorded{EventId: 6, ProgramId: 7, ClickedAt: timestamppb.New(at)}, timestamppb.New(pub)), nil},
		{"keyed test lead", envelope(t, eventsv1.TypeLeadRecorded, &eventsv1.LeadRecorded{EventId: 8, ProgramId: 7, IsTest: true, ViaApiKey: true, RecordedAt: timestamppb.New(at)}, timestamppb.New(pub)),
			&integration.RecordedEvent{Kind: integration.KindLead, EventID: 8, ProgramID: 7, OccurredAt: at, PublishedAt: pub}},
		{"test lead without key", envelope(t, eventsv1.TypeLeadRecorded, &eventsv1.LeadRecorded{EventId: 9, ProgramId: 7, IsTest: true}, timestamppb.New(pub)), nil},
		{"real keyed lead", envelope(t, eventsv1.TypeLeadRecorded, &eventsv1.LeadRecorded{EventId: 10, ProgramId: 7, ViaApiKey: true}, timestamppb.New(pub)), nil},
		{"visit", envelope(t, eventsv1.TypeVisitRecorded, &eventsv1.VisitRecorded{EventId: 11, ProgramId: 7}, timestamppb.New(pub)), nil},
		{"unknown type", &eventsv1.Envelope{Id: "x", Type: "tracking.something.new", Payload: []byte{0xff}}, nil},
		{"test click without its own time uses the commit time", envelope(t, eventsv1.TypeClickRecorded, &eventsv1.ClickRecorded{EventId: 12, ProgramId: 7, IsTest: true, ViaApiKey: true}, timestamppb.New(pub)),
			&integration.RecordedEvent{Kind: integration.KindClick, EventID: 12, ProgramID: 7, OccurredAt: pub, PublishedAt: pub}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []integration.RecordedEvent
			h := consumer.Handler(func(_ context.Context, _ pgx.Tx, e integration.RecordedEvent) error {
				got = append(got, e)
				return nil
			})
			if err := h(context.Background(), nil, tc.env); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == nil && len(got) != 0:
				t.Fatalf("kept %+v", got)
			case tc.want != nil && (len(got) != 1 || got[0] != *tc.want):
				t.Fatalf("kept %+v, want %+v", got, *tc.want)
			}
		})
	}
}

func TestHandlerRejectsAnUndecodablePayload(t *testing.T) {
	h := consumer.Handler(func(context.Context, pgx.Tx, integration.RecordedEvent) error { return nil })
	err := h(context.Background(), nil, &eventsv1.Envelope{Id: "bad", Type: eventsv1.TypeClickRecorded, Payload: []byte{0xff, 0xff}})
	if err == nil {
		t.Fatal("garbage payload accepted")
	}
}
