package outbox_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/outbox/internal/testenv"
	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

func TestEnqueueRefusesAPayloadOverTheLimit(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	ctx := testenv.Ctx(t)
	big := func(n int) *eventsv1.Envelope {
		return &eventsv1.Envelope{Type: "test.big", ProgramId: 1, Payload: bytes.Repeat([]byte{'x'}, n)}
	}
	tests := []struct {
		name    string
		env     *eventsv1.Envelope
		opts    []outbox.EnqueueOption
		wantErr bool
	}{
		{name: "under the default limit is written", env: big(800 << 10)},
		{name: "over the default limit (900 KiB) is refused", env: big(900 << 10), wantErr: true},
		{name: "over a configured limit is refused", env: big(2000), opts: []outbox.EnqueueOption{outbox.WithMaxPayloadBytes(1000)}, wantErr: true},
		{name: "a raised limit admits more", env: big(1000 << 10), opts: []outbox.EnqueueOption{outbox.WithMaxPayloadBytes(2 << 20)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Count(t, `SELECT count(*) FROM outbox`)
			err := pg.InTx(ctx, e.Pool, func(tx pgx.Tx) error {
				_, err := outbox.Enqueue(ctx, tx, topic, tt.env, tt.opts...)
				return err
			})
			if got := errors.Is(err, outbox.ErrTooLarge); got != tt.wantErr {
				t.Fatalf("err = %v, want ErrTooLarge: %v", err, tt.wantErr)
			}
			if !tt.wantErr && err != nil {
				t.Fatal(err)
			}
			want := before
			if !tt.wantErr {
				want++
			}
			if n := e.Count(t, `SELECT count(*) FROM outbox`); n != want {
				t.Fatalf("outbox rows = %d, want %d", n, want)
			}
		})
	}
	t.Run("EnqueueMany refuses the whole batch", func(t *testing.T) {
		err := pg.InTx(ctx, e.Pool, func(tx pgx.Tx) error {
			return outbox.EnqueueMany(ctx, tx, topic, []*eventsv1.Envelope{big(10), big(1 << 20)})
		})
		if !errors.Is(err, outbox.ErrTooLarge) {
			t.Fatalf("err = %v, want ErrTooLarge", err)
		}
	})
}
