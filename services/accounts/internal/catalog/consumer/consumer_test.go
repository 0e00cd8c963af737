package consumer

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

func TestHandler(t *testing.T) {
	type ack struct {
		service, epoch string
		seq            int64
	}
	var got []ack
	h := Handler(func(_ context.Context, _ pgx.Tx, service, epoch string, seq int64) (bool, error) {
		got = append(got, ack{service, epoch, seq})
		return true, nil
	})
	t.Run("an acknowledgement is recorded", func(t *testing.T) {
		payload, err := proto.Marshal(&eventsv1.CatalogApplied{Service: "tracking", Epoch: "e1", Seq: 7})
		if err != nil {
			t.Fatal(err)
		}
		if err := h(context.Background(), nil, &eventsv1.Envelope{Id: "a", Payload: payload}); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != (ack{"tracking", "e1", 7}) {
			t.Fatalf("recorded %+v", got)
		}
	})
	t.Run("an undecodable payload is an error", func(t *testing.T) {
		if err := h(context.Background(), nil, &eventsv1.Envelope{Id: "b", Payload: []byte{0xff}}); err == nil {
			t.Fatal("no error")
		}
	})
}
