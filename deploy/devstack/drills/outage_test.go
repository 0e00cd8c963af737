package drills_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/libs/obs/obstest"
	"github.com/svc-dev/svc/libs/outbox"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// brokerOutage is how long drill 1 keeps the broker away: the 60 s,
// well past every client's retry budget (kafka-go gives up a consumer
// group fetch after three attempts, about 1.5 s).
const brokerOutage = 60 * time.Second

// Drill 1: the broker stops for 60 s while clicks, leads and admin writes
// arrive through the gateway. No request is refused, /readyz stays ready,
// no service stops; when the broker returns every event reaches its topic,
// every catalog event is applied once by each replica, and per-key order
// holds for causally ordered writes (one client's chain of clicks, one
// operator's sequence of program updates). The brand's webhook endpoint
// gets every lead's lead.created once (issue 22: nothing lost when the
// broker stops and returns).
func TestDrillBrokerOutageWholeStack(t *testing.T) {
	t.Parallel()
	d := startDrillStack(t)
	hooks := d.webhookEndpoint("lead.created")
	tr := &traffic{}
	ctx, cancel := context.WithCancel(context.Background())
	loaded := make(chan struct{})
	go func() { d.load(ctx, tr, 3); close(loaded) }()
	defer func() { cancel(); <-loaded }()
	progress := func() (int, int) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.nClicks, tr.admin
	}
	waitFor(t, 60*time.Second, "traffic before the outage", func() bool { c, a := progress(); return c >= 50 && a >= 6 })

	d.broker.down()
	began := time.Now()
	clicksAt, adminAt := progress()
	for _, name := range d.st.Names() {
		reg := d.st.Instance(name).Platform().Registry
		waitFor(t, 30*time.Second, name+" reporting kafka_up 0", func() bool { return obstest.Metric(t, reg, "kafka_up") == 0 })
	}
	// The outage lasts its fixed length: that is the drill, not a wait
	// for a condition. Readiness is checked all along.
	for time.Since(began) < brokerOutage {
		for _, name := range d.st.Names() {
			resp, err := http.Get(d.st.URL(name) + "/readyz")
			if err != nil {
				t.Fatalf("%s /readyz during the outage: %v", name, err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%s /readyz answered %d during the outage", name, resp.StatusCode)
			}
		}
		time.Sleep(time.Second) // the probe's period, as a kubelet's would be
	}
	clicksDuring, adminDuring := progress()
	if clicksDuring-clicksAt < 50 || adminDuring-adminAt < 6 {
		t.Fatalf("too little traffic was served during the outage: %d clicks, %d admin writes", clicksDuring-clicksAt, adminDuring-adminAt)
	}
	t.Logf("served during the %s outage: %d clicks, %d admin writes", brokerOutage, clicksDuring-clicksAt, adminDuring-adminAt)
	d.wantAllRunning()

	d.broker.up()
	waitFor(t, 60*time.Second, "traffic after the broker returned", func() bool { c, a := progress(); return c >= clicksDuring+50 && a >= adminDuring+6 })
	cancel()
	<-loaded
	if len(tr.refused) > 0 {
		t.Fatalf("%d requests refused, e.g. %q", len(tr.refused), tr.refused[0])
	}
	d.wantAllRunning()
	t.Logf("in all: %d clicks, %d leads, %d admin writes", tr.nClicks, tr.leads, tr.admin)

	// Everything the admin API wrote is applied by every replica.
	d.caughtUp()
	pool := d.st.Instance("tracking").Platform().Pool
	for _, replica := range []string{"tracking", "commissions"} {
		if n := count(t, pool, fmt.Sprintf(`SELECT count(*) FROM accounts.outbox o WHERE o.topic = $1
			AND NOT EXISTS (SELECT 1 FROM %s.inbox i WHERE i.event_id = o.event_id)`, replica), eventsv1.TopicCatalog); n != 0 {
			t.Fatalf("%d catalog events never applied by %s", n, replica)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM accounts.links l WHERE NOT EXISTS (SELECT 1 FROM tracking.links r WHERE r.id = l.id AND r.code = l.code)`); n != 0 {
		t.Fatalf("%d links missing from tracking's replica", n)
	}
	// Every lead answered 200, before, during and after the outage, reached
	// the brand's endpoint as one lead.created.
	waitFor(t, 90*time.Second, "every lead's webhook", func() bool { n, _ := hooks.got("lead.created"); return n >= tr.leads })
	if n, repeated := hooks.got("lead.created"); n != tr.leads || repeated != 0 {
		t.Fatalf("%d lead.created webhooks (%d ids more than once) for %d leads", n, repeated, tr.leads)
	}
	last := tr.ordered[len(tr.ordered)-1]
	if got := count(t, pool, `SELECT attribution_window_days FROM tracking.programs WHERE id = $1`, d.demo.ProgramID); got != last {
		t.Fatalf("tracking's replica has attribution window %d, the last update set %d", got, last)
	}

	// Every event of the outboxes is in its topic.
	for _, topic := range []string{eventsv1.TopicCatalog, eventsv1.TopicTracking} {
		inTopic := map[string]bool{}
		for _, m := range d.topicMessages(topic) {
			for _, h := range m.Headers {
				if h.Key == outbox.HeaderEventID {
					inTopic[string(h.Value)] = true
				}
			}
		}
		schema := map[string]string{eventsv1.TopicCatalog: "accounts", eventsv1.TopicTracking: "tracking"}[topic]
		rows, err := pool.Query(context.Background(), fmt.Sprintf(`SELECT event_id::text FROM %s.outbox WHERE topic = $1`, schema), topic)
		if err != nil {
			t.Fatal(err)
		}
		var missing, total int
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			total++
			if !inTopic[id] {
				missing++
			}
		}
		rows.Close()
		if missing != 0 || total == 0 {
			t.Fatalf("%d of %d %s outbox events are not in the topic", missing, total, topic)
		}
	}

	// Per-key order: one client's clicks, and one operator's updates, in
	// the order they were answered.
	var chain []string
	for _, m := range d.topicMessages(eventsv1.TopicTracking) {
		env := envelope(t, m)
		if env.GetType() != eventsv1.TypeClickRecorded {
			continue
		}
		var c eventsv1.ClickRecorded
		if err := proto.Unmarshal(env.GetPayload(), &c); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(tr.chain, c.GetClickId()) && !slices.Contains(chain, c.GetClickId()) {
			chain = append(chain, c.GetClickId())
		}
	}
	if !slices.Equal(chain, tr.chain) {
		t.Fatalf("the chain of %d clicks reached the topic as %d, out of order or incomplete", len(tr.chain), len(chain))
	}
	var windows []int
	lastSeq := int64(0)
	for _, m := range d.topicMessages(eventsv1.TopicCatalog) {
		env := envelope(t, m)
		if env.GetType() != eventsv1.TypeProgramUpserted || env.GetProgramId() != d.demo.ProgramID || env.GetSeq() <= lastSeq {
			continue // not the program, or a redelivery of an update already seen
		}
		lastSeq = env.GetSeq()
		var p eventsv1.Program
		if err := proto.Unmarshal(env.GetPayload(), &p); err != nil {
			t.Fatal(err)
		}
		windows = append(windows, int(p.GetAttributionWindowDays()))
	}
	if len(windows) < len(tr.ordered) || !slices.Equal(windows[len(windows)-len(tr.ordered):], tr.ordered) {
		t.Fatalf("the %d program updates reached the topic out of order: %v, sent %v", len(tr.ordered), windows, tr.ordered)
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func count(t *testing.T, pool *pgxpool.Pool, q string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}
