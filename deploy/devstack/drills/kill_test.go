package drills_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// killDeliveryTimeout is DELIVERY_TIMEOUT in the drill. The attempt it
// would cut is cut by the kill long before; shorter than the default, it
// keeps the lease (timeout + the dispatcher's 30 s grace) and so the drill
// short.
const killDeliveryTimeout = 5 * time.Second

// Issue 22, "the webhooks service killed mid-attempt → delivered": a
// brand's endpoint holds the first attempt of a lead.created open; the
// webhooks process is killed with SIGKILL meanwhile (no shutdown: nothing
// is recorded), a second lead arrives while it is down, and a new process
// starts. When the first attempt's lease ends the new process makes it
// again: same webhook-id and body, signed afresh, answered 2xx once, the
// delivery delivered after two attempts; the second lead's event is
// delivered once; no event is written twice though the new process
// consumes again what the killed one had not committed.
func TestDrillWebhooksKilledMidAttempt(t *testing.T) {
	t.Parallel()
	began := time.Now()
	d := startDrillStackWith(t, drillOptions{
		// What a lead's webhook needs: accounts (catalog, sessions, keys),
		// tracking (the lead) and webhooks, in a process of its own.
		only:  []string{"accounts", "tracking", "webhooks"},
		apart: []string{"webhooks"},
		env:   map[string]string{"DELIVERY_TIMEOUT": killDeliveryTimeout.String()},
	})
	hooks := d.procs["webhooks"]
	rc := newHangingReceiver(t)
	endpointID, secret := d.endpoint(rc.srv.URL, "lead.created")
	t.Logf("stack up, endpoint created after %s", time.Since(began).Round(time.Millisecond))

	// The first lead's first attempt reaches the brand, which holds it.
	d.lead("203.0.113.1")
	var first hookRequest
	select {
	case first = <-rc.hung:
	case <-time.After(60 * time.Second):
		t.Fatal("the first lead's webhook never reached the receiver")
	}
	hooks.kill()
	killed := time.Now()
	t.Logf("killed the webhooks process mid-attempt after %s", killed.Sub(began).Round(time.Millisecond))

	// Killed before any outcome: the delivery is pending under its lease,
	// one attempt counted, none recorded (a recorded failure would carry
	// its error and a 5 s backoff instead).
	pool := d.st.Instance("tracking").Platform().Pool
	a := deliveryRow(t, pool, endpointID, first.id)
	if a.status != "pending" || a.attempts != 1 || a.lastStatus != nil || a.lastError != "" || a.next == nil ||
		a.next.Sub(a.lastAttempt) < killDeliveryTimeout {
		t.Fatalf("after the kill the delivery is %v, want pending under its lease with no outcome", a)
	}
	lease := *a.next
	// The brand's side of the cut attempt ends with the connection.
	waitFor(t, 30*time.Second, "the held request to end with its connection", func() bool { return rc.cut() == 1 })

	// A lead while webhooks is down waits in its topic.
	d.lead("203.0.113.2")
	hooks.up()
	t.Logf("webhooks up again after %s; the lease ends %s after the kill", time.Since(began).Round(time.Millisecond), lease.Sub(killed).Round(time.Millisecond))

	var rows []delivery
	defer func() {
		if t.Failed() {
			t.Logf("the endpoint's deliveries: %v", rows)
		}
	}()
	waitFor(t, lease.Sub(time.Now())+60*time.Second, "both leads' deliveries delivered", func() bool {
		rows = deliveryRows(t, pool, endpointID)
		return len(rows) == 2 && rows[0].status == "delivered" && rows[1].status == "delivered"
	})
	t.Logf("delivered after %s", time.Since(began).Round(time.Millisecond))

	// The receiver recorded each request before answering, and a delivery
	// is delivered only after its answer: every request is in.
	got := rc.requests()
	if len(got) != 3 {
		t.Fatalf("the receiver got %d requests, want 3 (the cut attempt, its retry, the second lead's)", len(got))
	}
	again, second := got[1], got[2]
	if again.id != first.id {
		again, second = second, again
	}
	if again.id != first.id || again.body != first.body || again.status != 200 {
		t.Fatalf("after the restart the first event came as %q (%d), want %q again with the same body, answered 200", again.id, again.status, first.id)
	}
	if again.at.Before(lease) {
		t.Fatalf("made again at %s, before its lease ended at %s", again.at, lease)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []hookRequest{again, second} {
		if err := wh.Verify([]byte(r.body), r.header); err != nil {
			t.Fatalf("the webhook %s does not verify: %v", r.id, err)
		}
	}
	if again.header.Get("webhook-timestamp") == first.header.Get("webhook-timestamp") {
		t.Fatal("the attempt after the restart carries the cut attempt's timestamp: it was not signed afresh")
	}
	if second.id == first.id || second.status != 200 {
		t.Fatalf("the second lead's webhook %q answered %d", second.id, second.status)
	}
	for id, n := range rc.answered() {
		if n != 1 {
			t.Fatalf("webhook %s answered 2xx %d times, want once", id, n)
		}
	}

	// The delivery log: the first lead's after two attempts, the second's
	// after one, both 200; and one event per lead, none written twice.
	for _, r := range rows {
		want := 1
		if r.eventID == first.id {
			want = 2
		}
		if r.attempts != want || r.lastStatus == nil || *r.lastStatus != 200 || r.lastError != "" || r.deliveredAt == nil {
			t.Fatalf("delivery of %s: %v, want delivered after %d attempts with a 200", r.eventID, r, want)
		}
	}
	if n := count(t, pool, `SELECT count(*) FROM webhooks.events WHERE program_id = $1 AND type = 'lead.created'`, d.demo.ProgramID); n != 2 {
		t.Fatalf("%d lead.created events written for 2 leads", n)
	}
	d.wantAllRunning()
}

// hookRequest is a request the receiver got, and what it answered (0: it
// held the request until the connection went).
type hookRequest struct {
	id     string
	body   string
	header http.Header
	at     time.Time
	status int
}

// hangingReceiver is a brand's endpoint that holds its first request open
// (reporting it on hung) until the caller's connection goes, and answers
// 200 to every later one.
type hangingReceiver struct {
	srv  *httptest.Server
	hung chan hookRequest
	mu   sync.Mutex
	got  []hookRequest
}

func newHangingReceiver(t *testing.T) *hangingReceiver {
	rc := &hangingReceiver{hung: make(chan hookRequest, 1)}
	release := make(chan struct{})
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := hookRequest{id: r.Header.Get("webhook-id"), body: string(body), header: r.Header.Clone(), at: time.Now()}
		rc.mu.Lock()
		n := len(rc.got)
		if n > 0 {
			req.status = http.StatusOK
		}
		rc.got = append(rc.got, req)
		rc.mu.Unlock()
		if n > 0 {
			w.WriteHeader(http.StatusOK)
			return
		}
		rc.hung <- req
		select {
		case <-r.Context().Done():
		case <-release:
		}
		rc.mu.Lock()
		rc.got[0].status = -1 // cut: the caller went
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.srv.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for handlers
	return rc
}

func (rc *hangingReceiver) requests() []hookRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hookRequest(nil), rc.got...)
}

// cut is how many requests ended with the caller gone.
func (rc *hangingReceiver) cut() int {
	n := 0
	for _, r := range rc.requests() {
		if r.status == -1 {
			n++
		}
	}
	return n
}

// answered counts the 2xx answers per webhook-id.
func (rc *hangingReceiver) answered() map[string]int {
	out := map[string]int{}
	for _, r := range rc.requests() {
		if r.status >= 200 && r.status < 300 {
			out[r.id]++
		}
	}
	return out
}

// delivery is a row of webhooks.deliveries.
type delivery struct {
	eventID     string
	status      string
	attempts    int
	next        *time.Time
	lastAttempt time.Time
	lastStatus  *int
	lastError   string
	deliveredAt *time.Time
}

const deliveryColumns = `SELECT event_id, status, attempts, next_attempt_at, COALESCE(last_attempt_at, 'epoch'), last_status, last_error, delivered_at
	FROM webhooks.deliveries`

func scanDelivery(row pgx.Row) (delivery, error) {
	var r delivery
	err := row.Scan(&r.eventID, &r.status, &r.attempts, &r.next, &r.lastAttempt, &r.lastStatus, &r.lastError, &r.deliveredAt)
	return r, err
}

func deliveryRow(t *testing.T, pool *pgxpool.Pool, endpointID int64, eventID string) delivery {
	t.Helper()
	r, err := scanDelivery(pool.QueryRow(context.Background(), deliveryColumns+` WHERE endpoint_id = $1 AND event_id = $2`, endpointID, eventID))
	if err != nil {
		t.Fatalf("delivery of %s to endpoint %d: %v", eventID, endpointID, err)
	}
	return r
}

// deliveryRows are the endpoint's deliveries, oldest first.
func deliveryRows(t *testing.T, pool *pgxpool.Pool, endpointID int64) []delivery {
	t.Helper()
	rows, err := pool.Query(context.Background(), deliveryColumns+` WHERE endpoint_id = $1 ORDER BY id`, endpointID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []delivery
	for rows.Next() {
		r, err := scanDelivery(rows)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// String shows the row in a failure message, its times and status by value.
func (r delivery) String() string {
	val := func(p any) string {
		switch v := p.(type) {
		case *time.Time:
			if v != nil {
				return v.Format(time.RFC3339Nano)
			}
		case *int:
			if v != nil {
				return fmt.Sprint(*v)
			}
		}
		return "null"
	}
	return fmt.Sprintf("{event %s status %s attempts %d next_attempt_at %s last_attempt_at %s last_status %s last_error %q delivered_at %s}",
		r.eventID, r.status, r.attempts, val(r.next), r.lastAttempt.Format(time.RFC3339Nano), val(r.lastStatus), r.lastError, val(r.deliveredAt))
}
