package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

func TestHandler(t *testing.T) {
	type use struct {
		key int64
		at  time.Time
	}
	var got []use
	h := Handler(func(_ context.Context, _ pgx.Tx, key int64, at time.Time) error {
		got = append(got, use{key, at})
		return nil
	})
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	payload := func(m *eventsv1.ApiKeyUsed) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Run("a use is recorded", func(t *testing.T) {
		env := &eventsv1.Envelope{Id: "a", Type: eventsv1.TypeAPIKeyUsed, Payload: payload(&eventsv1.ApiKeyUsed{KeyId: 7, ProgramId: 3, UsedAt: timestamppb.New(at)})}
		if err := h(context.Background(), nil, env); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != (use{7, at}) {
			t.Fatalf("recorded %+v", got)
		}
	})
	t.Run("a report without key or time, or of another type, is skipped", func(t *testing.T) {
		for _, env := range []*eventsv1.Envelope{
			{Id: "b", Type: eventsv1.TypeAPIKeyUsed, Payload: payload(&eventsv1.ApiKeyUsed{UsedAt: timestamppb.New(at)})},
			{Id: "c", Type: eventsv1.TypeAPIKeyUsed, Payload: payload(&eventsv1.ApiKeyUsed{KeyId: 7})},
			{Id: "d", Type: "something.else", Payload: []byte{0xff}},
		} {
			if err := h(context.Background(), nil, env); err != nil {
				t.Fatal(err)
			}
		}
		if len(got) != 1 {
			t.Fatalf("recorded %+v", got)
		}
	})
	t.Run("an undecodable payload is an error", func(t *testing.T) {
		if err := h(context.Background(), nil, &eventsv1.Envelope{Id: "e", Type: eventsv1.TypeAPIKeyUsed, Payload: []byte{0xff}}); err == nil {
			t.Fatal("no error")
		}
	})
}
