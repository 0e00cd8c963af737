package inbox_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/svc-dev/svc/libs/outbox/inbox"
	"github.com/svc-dev/svc/libs/outbox/internal/testenv"
)

// replayConsumer is a consumer that is never run: Replay needs its pool and
// handler only. Dead letters are inserted as the consumer records them.
func replayConsumer(t *testing.T, f *fixture, name string) *inbox.Consumer {
	t.Helper()
	c, err := inbox.NewConsumerOpening(f.e.Pool, func() *kafka.Reader { panic("not run") }, inbox.ConsumerConfig{Name: name, Handler: f.h.handle})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func insertDeadLetter(t *testing.T, f *fixture, consumer string, offset int64, value []byte) int64 {
	t.Helper()
	var id int64
	err := f.e.Pool.QueryRow(testenv.Ctx(t), `INSERT INTO dead_letters (consumer, topic, partition, "offset", value, error, attempts)
		VALUES ($1, $2, 0, $3, $4, 'handler refuses', 3) RETURNING id`, consumer, topic, offset, value).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestReplay(t *testing.T) {
	t.Parallel()
	f := newFixture(t, topic)
	c := replayConsumer(t, f, "replayer")

	t.Run("concurrent replays of one dead letter apply it once", func(t *testing.T) {
		env := testenv.Envelope("test.effect", 1, 1)
		id := insertDeadLetter(t, f, "replayer", 1, message(t, env).Value)
		var wg sync.WaitGroup
		results := make([]inbox.ReplayResult, 8)
		errs := make([]error, 8)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = c.Replay(testenv.Ctx(t), id, false)
			}()
		}
		wg.Wait()
		applied := 0
		for i, r := range results {
			if errs[i] != nil {
				t.Fatalf("replay %d: %v", i, errs[i])
			}
			if !r.AlreadyReplayed && r.Outcome == inbox.ReplayApplied {
				applied++
			} else if !r.AlreadyReplayed {
				t.Fatalf("replay %d: outcome %q, not already replayed", i, r.Outcome)
			}
		}
		if applied != 1 || f.e.Count(t, `SELECT count(*) FROM effects WHERE event_id = $1`, env.Id) != 1 {
			t.Fatalf("applied by %d replays, %d effect rows; want 1 and 1", applied,
				f.e.Count(t, `SELECT count(*) FROM effects WHERE event_id = $1`, env.Id))
		}
		d, err := inbox.GetDeadLetter(testenv.Ctx(t), f.e.Pool, "", id)
		if err != nil || d.ReplayedAt == nil || d.ReplayOutcome != inbox.ReplayApplied {
			t.Fatalf("dead letter after replay = %+v, %v", d, err)
		}
	})
	t.Run("dry run rolls everything back", func(t *testing.T) {
		env := testenv.Envelope("test.effect", 1, 2)
		id := insertDeadLetter(t, f, "replayer", 2, message(t, env).Value)
		r, err := c.Replay(testenv.Ctx(t), id, true)
		if err != nil || r.Outcome != inbox.ReplayApplied || !r.DryRun {
			t.Fatalf("dry run = %+v, %v", r, err)
		}
		if n := f.e.Count(t, `SELECT count(*) FROM effects WHERE event_id = $1`, env.Id) +
			f.e.Count(t, `SELECT count(*) FROM inbox WHERE event_id = $1`, env.Id) +
			f.e.Count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND replayed_at IS NOT NULL`, id); n != 0 {
			t.Fatalf("dry run left %d rows behind", n)
		}
	})
	t.Run("refused, changing nothing", func(t *testing.T) {
		failing := testenv.Envelope("test.fails", 1, 3)
		f.h.failTimes = map[string]int64{"test.fails": -1}
		tests := []struct {
			name string
			id   int64
			want string
		}{
			{"another consumer's", insertDeadLetter(t, f, "someone-else", 3, message(t, testenv.Envelope("test.effect", 1, 4)).Value), "belongs to consumer"},
			{"undecodable", insertDeadLetter(t, f, "replayer", 4, []byte("not an envelope")), "undecodable"},
			{"handler still failing", insertDeadLetter(t, f, "replayer", 5, message(t, failing).Value), "refuses"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := c.Replay(testenv.Ctx(t), tt.id, false)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want one saying %q", err, tt.want)
				}
				if n := f.e.Count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND replayed_at IS NOT NULL`, tt.id); n != 0 {
					t.Fatal("dead letter marked replayed")
				}
			})
		}
		if n := f.e.Count(t, `SELECT count(*) FROM inbox WHERE event_id = $1`, failing.Id); n != 0 {
			t.Fatal("a failed replay left an inbox row")
		}
	})
	t.Run("unknown id", func(t *testing.T) {
		if _, err := c.Replay(testenv.Ctx(t), 987654, false); !errors.Is(err, inbox.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})
}
