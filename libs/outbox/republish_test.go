package outbox_test

import (
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/outbox/internal/testenv"
)

// A broker that lost its log gets the kept rows again: published once, then
// republished and published a second time, in order; a schema with no
// outbox has nothing to republish.
func TestRepublishSendsKeptRowsAgain(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, topic)
	ctx := testenv.Ctx(t)
	for seq := int64(1); seq <= 3; seq++ {
		e.Enqueue(t, topic, testenv.Envelope("test.seq", 7, seq))
	}
	if _, err := e.Pool.Exec(ctx, `UPDATE outbox SET sent_at = now() WHERE id = (SELECT min(id) FROM outbox)`); err != nil {
		t.Fatal(err)
	}
	// Before any relay: the first row counts as published, the other two not.
	if n, err := outbox.Republish(ctx, e.Pool, testenv.Schema); err != nil || n != 1 {
		t.Fatalf("Republish = %d, %v; want the one published row", n, err)
	}
	if n := unsent(t, e); n != 3 {
		t.Fatalf("%d rows unsent, want 3", n)
	}
	stop, _ := startRelay(t, e, relayOpts{})
	r := kafkakit.NewReader(e.Brokers, "republish-check", topic)
	defer r.Close()
	last := map[int64]int64{}
	readInOrder(t, ctx, r, 3, last)
	testenv.Eventually(t, 30*time.Second, "every row sent", func() bool { return unsent(t, e) == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n, err := outbox.Republish(ctx, e.Pool, testenv.Schema); err != nil || n != 3 {
		t.Fatalf("Republish = %d, %v; want 3", n, err)
	}
	if n := e.TopicSize(t, topic); n != 3 {
		t.Fatalf("topic holds %d before the second relay, want 3", n)
	}
	startRelay(t, e, relayOpts{})
	testenv.Eventually(t, 30*time.Second, "the topic holds every event twice", func() bool { return e.TopicSize(t, topic) == 6 })
	if n, err := outbox.Republish(ctx, e.Pool, "no_outbox_here"); err != nil || n != 0 {
		t.Fatalf("Republish of a schema without an outbox = %d, %v; want 0", n, err)
	}
	if _, err := outbox.Republish(ctx, e.Pool, "Bad-Schema"); err == nil {
		t.Fatal("an invalid schema name was accepted")
	}
}
