package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/libs/platform/platformtest"

	"github.com/svc-dev/svc/services/webhooks/internal/delivery"
	"github.com/svc-dev/svc/services/webhooks/internal/delivery/pgstore"
	"github.com/svc-dev/svc/services/webhooks/internal/endpoint"
	endpointpg "github.com/svc-dev/svc/services/webhooks/internal/endpoint/pgstore"
	"github.com/svc-dev/svc/services/webhooks/internal/secret"
	"github.com/svc-dev/svc/services/webhooks/migrations"
)

const (
	program     = int64(12)
	testTimeout = 2 * time.Second
	grace       = 3 * time.Second
)

// env is one test's database, clock and dispatcher settings.
type env struct {
	t     *testing.T
	ctx   context.Context
	pool  *pgxpool.Pool
	store *pgstore.Store
	box   *secret.Box
	clock *platformtest.Clock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	if err := pg.Migrate(ctx, dsn, "webhooks", migrations.FS, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	pool, err := pg.NewPool(ctx, dsn, pg.Options{Schema: "webhooks", MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	key := make([]byte, secret.KeySize)
	_, _ = rand.Read(key)
	box, err := secret.NewBox(key)
	if err != nil {
		t.Fatal(err)
	}
	// The wall clock's time, so Verify's tolerance (which reads the real
	// clock) holds for the first attempts; moved later, tests verify
	// ignoring the timestamp and compare it themselves.
	return &env{t: t, ctx: ctx, pool: pool, store: pgstore.New(pool), box: box, clock: platformtest.NewClock(time.Now().Truncate(time.Second))}
}

type dispatcherOpt func(*delivery.Config, *delivery.SenderConfig)

// dispatcher returns a dispatcher over the env's store and clock, with the
// backoff's jitter at its middle (the schedule exactly), and its registry.
func (e *env) dispatcher(opts ...dispatcherOpt) (*delivery.Dispatcher, *prometheus.Registry) {
	e.t.Helper()
	sc := delivery.SenderConfig{AllowPrivate: true, Timeout: testTimeout}
	cfg := delivery.Config{
		Store:               e.store,
		Secrets:             e.box,
		Now:                 e.clock.Now,
		Rand:                func() float64 { return 0.5 },
		Workers:             8,
		EndpointConcurrency: 2,
		Timeout:             testTimeout,
		Grace:               grace,
		PollInterval:        10 * time.Millisecond,
		DisableAfter:        5 * 24 * time.Hour,
	}
	for _, o := range opts {
		o(&cfg, &sc)
	}
	sender := delivery.NewSender(sc)
	e.t.Cleanup(sender.Close)
	cfg.Sender = sender
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	d, err := delivery.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return d, reg
}

// endpoint adds an enabled endpoint with one current secret and returns
// its id and secret.
func (e *env) endpoint(url string) (int64, string) {
	e.t.Helper()
	var id int64
	now := e.clock.Now()
	if err := e.pool.QueryRow(e.ctx, `INSERT INTO endpoints (program_id, url, events, created_at, updated_at)
		VALUES ($1, $2, '{sale.created}', $3, $3) RETURNING id`, program, url, now).Scan(&id); err != nil {
		e.t.Fatal(err)
	}
	return id, e.addSecret(id, nil)
}

func (e *env) addSecret(endpointID int64, expires *time.Time) string {
	e.t.Helper()
	s, err := secret.New()
	if err != nil {
		e.t.Fatal(err)
	}
	sealed, err := e.box.Seal(s, endpointID)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO endpoint_secrets (endpoint_id, secret_sealed, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
		endpointID, sealed, e.clock.Now(), expires); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// event writes an event of object and its delivery to each endpoint, due
// now, and returns the event's id and body.
func (e *env) event(object string, endpoints ...int64) (string, []byte) {
	e.t.Helper()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := "evt_" + hex.EncodeToString(b)
	now := e.clock.Now()
	body := fmt.Appendf(nil, `{"id":%q,"type":"sale.created","created_at":%q,"program_id":%d,"data":{"object":%q,"amount":1250,"currency":"USD"}}`,
		id, now.UTC().Format("2006-01-02T15:04:05.000Z"), program, object)
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO events (id, program_id, type, is_test, object_key, body, created_at) VALUES ($1, $2, 'sale.created', false, $3, $4, $5)`,
		id, program, object, body, now); err != nil {
		e.t.Fatal(err)
	}
	for _, ep := range endpoints {
		if _, err := e.pool.Exec(e.ctx, `INSERT INTO deliveries (endpoint_id, event_id, event_type, object_key, status, next_attempt_at, created_at)
			VALUES ($1, $2, 'sale.created', $3, 'pending', $4, $4)`, ep, id, object, now); err != nil {
			e.t.Fatal(err)
		}
	}
	return id, body
}

// row is a delivery as stored.
type row struct {
	Status       string
	Attempts     int
	Next         *time.Time
	LastStatus   *int
	LastError    string
	DeliveredAt  *time.Time
	LastDuration *int
}

func (e *env) delivery(endpointID int64, eventID string) row {
	e.t.Helper()
	var r row
	if err := e.pool.QueryRow(e.ctx, `SELECT status, attempts, next_attempt_at, last_status, last_error, delivered_at, last_duration_ms
		FROM deliveries WHERE endpoint_id = $1 AND event_id = $2`, endpointID, eventID).
		Scan(&r.Status, &r.Attempts, &r.Next, &r.LastStatus, &r.LastError, &r.DeliveredAt, &r.LastDuration); err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) runOnce(d *delivery.Dispatcher, want int) {
	e.t.Helper()
	n, err := d.RunOnce(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if n != want {
		e.t.Fatalf("RunOnce attempted %d deliveries, want %d", n, want)
	}
}

// received is one request a receiver got.
type received struct {
	Header http.Header
	Body   []byte
	Status int
}

// receiver is a real HTTP server answering status(request number, from 1)
// and keeping what it got.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  []received
	hits chan struct{}
}

func newReceiver(t *testing.T, status func(n int, r *http.Request) int) *receiver {
	t.Helper()
	rc := &receiver{hits: make(chan struct{}, 1000)}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		n := len(rc.got) + 1
		rc.got = append(rc.got, received{Header: r.Header.Clone(), Body: body})
		rc.mu.Unlock()
		rc.hits <- struct{}{}
		code := status(n, r)
		rc.mu.Lock()
		rc.got[n-1].Status = code
		rc.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(rc.Server.Close)
	return rc
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

func always(code int) func(int, *http.Request) int {
	return func(int, *http.Request) int { return code }
}

// counter reads a metric's value with the given label value ("" for none).
func counter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("metric %s{%s} not found", name, label)
	return 0
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPendingDeliveryIsDeliveredOnceSignedAndExact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, always(http.StatusOK))
	ep, whsec := e.endpoint(rc.URL + "/hooks")
	id, body := e.event("sale:1", ep)
	d, reg := e.dispatcher()

	e.runOnce(d, 1)
	e.runOnce(d, 0)

	got := rc.requests()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(got))
	}
	r := got[0]
	if string(r.Body) != string(body) {
		t.Fatalf("body %s, want %s", r.Body, body)
	}
	for k, v := range map[string]string{
		"webhook-id":        id,
		"webhook-timestamp": strconv.FormatInt(e.clock.Now().Unix(), 10),
		"Content-Type":      "application/json",
		"User-Agent":        "svc-webhooks/1",
	} {
		if r.Header.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, r.Header.Get(k), v)
		}
	}
	if sig := r.Header.Get("webhook-signature"); strings.Count(sig, "v1,") != 1 {
		t.Errorf("webhook-signature %q, want one v1 value", sig)
	}
	wh, err := standardwebhooks.NewWebhook(whsec)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(r.Body, r.Header); err != nil {
		t.Fatalf("the receiver's Standard Webhooks library refuses the signature: %v", err)
	}
	row := e.delivery(ep, id)
	if row.Status != "delivered" || row.Attempts != 1 || row.LastStatus == nil || *row.LastStatus != 200 ||
		row.DeliveredAt == nil || !row.DeliveredAt.Equal(e.clock.Now()) || row.Next != nil || row.LastDuration == nil {
		t.Fatalf("delivery %+v", row)
	}
	if v := counter(t, reg, "webhooks_deliveries_total", "delivered"); v != 1 {
		t.Errorf("deliveries_total{delivered} = %v", v)
	}
	if v := counter(t, reg, "webhooks_attempts_total", "2xx"); v != 1 {
		t.Errorf("attempts_total{2xx} = %v", v)
	}
	if v := counter(t, reg, "webhooks_delivery_lag_seconds", ""); v != 1 {
		t.Errorf("delivery_lag_seconds count = %v", v)
	}
}

func TestReceiverDownForAnHourThenUpIsDeliveredOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	start := e.clock.Now()
	clock := e.clock
	// Down for the first hour of the fake clock, then up.
	rc := newReceiver(t, func(int, *http.Request) int {
		if clock.Now().Sub(start) < time.Hour {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	ep, whsec := e.endpoint(rc.URL)
	id, _ := e.event("sale:1", ep)
	d, reg := e.dispatcher()

	// The attempts at 0, 5 s, 5 min 5 s and 35 min 5 s fail; each is
	// retried exactly after the schedule's wait (jitter at its middle),
	// and not a moment before.
	for i, wait := range []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute} {
		e.runOnce(d, 1)
		row := e.delivery(ep, id)
		if row.Status != "pending" || row.Attempts != i+1 || row.LastStatus == nil || *row.LastStatus != 500 || row.LastError != "HTTP 500" {
			t.Fatalf("after attempt %d: %+v", i+1, row)
		}
		if want := e.clock.Now().Add(wait); row.Next == nil || !row.Next.Equal(want) {
			t.Fatalf("after attempt %d: next attempt %v, want %s", i+1, row.Next, want)
		}
		e.clock.Advance(wait - time.Second)
		e.runOnce(d, 0)
		e.clock.Advance(time.Second)
	}
	e.runOnce(d, 1) // 35 min 5 s: still down; next in 2 h
	e.clock.Advance(2 * time.Hour)
	e.runOnce(d, 1) // up
	e.clock.Advance(24 * time.Hour)
	e.runOnce(d, 0)

	row := e.delivery(ep, id)
	if row.Status != "delivered" || row.Attempts != 5 || *row.LastStatus != 200 || row.LastError != "" {
		t.Fatalf("delivery %+v", row)
	}
	got := rc.requests()
	if len(got) != 5 {
		t.Fatalf("receiver got %d requests, want 5", len(got))
	}
	wh, _ := standardwebhooks.NewWebhook(whsec)
	delivered := 0
	for i, r := range got {
		if r.Header.Get("webhook-id") != id {
			t.Errorf("attempt %d: webhook-id %q, want %q", i+1, r.Header.Get("webhook-id"), id)
		}
		if err := wh.VerifyIgnoringTimestamp(r.Body, r.Header); err != nil {
			t.Errorf("attempt %d: %v", i+1, err)
		}
		if r.Status == http.StatusOK {
			delivered++
		}
	}
	if delivered != 1 {
		t.Fatalf("%d attempts answered 200, want 1", delivered)
	}
	for outcome, want := range map[string]float64{"delivered": 1, "retried": 4, "failed": 0} {
		if v := counter(t, reg, "webhooks_deliveries_total", outcome); v != want {
			t.Errorf("deliveries_total{%s} = %v, want %v", outcome, v, want)
		}
	}
	if v := counter(t, reg, "webhooks_attempts_total", "5xx"); v != 4 {
		t.Errorf("attempts_total{5xx} = %v, want 4", v)
	}
	var failing *time.Time
	if err := e.pool.QueryRow(e.ctx, `SELECT failing_since FROM endpoints WHERE id = $1`, ep).Scan(&failing); err != nil || failing != nil {
		t.Fatalf("failing_since %v (%v), want NULL after the 2xx", failing, err)
	}
}

func TestHangingEndpointDoesNotDelayAnother(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	release := make(chan struct{})
	var mu sync.Mutex
	inflight, most := 0, 0
	hanging := newReceiver(t, func(int, *http.Request) int {
		mu.Lock()
		inflight++
		most = max(most, inflight)
		mu.Unlock()
		<-release
		mu.Lock()
		inflight--
		mu.Unlock()
		return http.StatusOK
	})
	fine := newReceiver(t, always(http.StatusOK))
	a, _ := e.endpoint(hanging.URL)
	b, _ := e.endpoint(fine.URL)
	// A's deliveries come first in the due order.
	for i := range 6 {
		e.event(fmt.Sprintf("sale:a%d", i), a)
	}
	var bEvents []string
	for i := range 5 {
		id, _ := e.event(fmt.Sprintf("sale:b%d", i), b)
		bEvents = append(bEvents, id)
	}
	d, _ := e.dispatcher(func(c *delivery.Config, s *delivery.SenderConfig) {
		c.Workers, c.EndpointConcurrency = 4, 2
		// Longer than the test: A's attempts stay in flight throughout.
		c.Timeout, s.Timeout = time.Minute, time.Minute
	})
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { close(release) })
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	waitFor(t, "B's deliveries while A hangs", func() bool {
		var n int
		if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM deliveries WHERE endpoint_id = $1 AND status = 'delivered'`, b).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == len(bEvents)
	})
	mu.Lock()
	defer mu.Unlock()
	if inflight != 2 || most != 2 {
		t.Fatalf("A: %d attempts in flight (at most %d), want its share of 2 throughout", inflight, most)
	}
	if len(fine.requests()) != len(bEvents) {
		t.Fatalf("B got %d requests, want %d", len(fine.requests()), len(bEvents))
	}
}

func TestAttemptCutByACrashIsMadeAgainAfterItsLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	rc := newReceiver(t, func(n int, r *http.Request) int {
		if n == 1 {
			// The first attempt hangs until its process dies.
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return http.StatusOK
		}
		return http.StatusOK
	})
	ep, whsec := e.endpoint(rc.URL)
	id, _ := e.event("sale:1", ep)

	// The first process claims the delivery, its attempt reaches the
	// receiver, and the process goes before recording anything.
	first, _ := e.dispatcher()
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	<-rc.hits
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	row := e.delivery(ep, id)
	// Unrecorded: no outcome (a cut attempt recorded as the endpoint's
	// failure would carry its error and a backoff, and the lease of 5 s
	// equals the first backoff, so the time alone cannot tell).
	if row.Status != "pending" || row.Attempts != 1 || row.Next == nil || !row.Next.Equal(e.clock.Now().Add(testTimeout+grace)) ||
		row.LastError != "" || row.LastStatus != nil || row.LastDuration != nil {
		t.Fatalf("after the crash: %+v, want pending under a lease of timeout + grace, no outcome recorded", row)
	}

	// A new process leaves it alone while the lease holds, then delivers.
	second, _ := e.dispatcher()
	e.runOnce(second, 0)
	e.clock.Advance(testTimeout + grace - time.Second)
	e.runOnce(second, 0)
	e.clock.Advance(time.Second)
	e.runOnce(second, 1)
	row = e.delivery(ep, id)
	if row.Status != "delivered" || row.Attempts != 2 {
		t.Fatalf("after the lease: %+v", row)
	}
	got := rc.requests()
	if len(got) != 2 || got[1].Header.Get("webhook-id") != id {
		t.Fatalf("receiver got %d requests", len(got))
	}
	wh, _ := standardwebhooks.NewWebhook(whsec)
	if err := wh.VerifyIgnoringTimestamp(got[1].Body, got[1].Header); err != nil {
		t.Fatal(err)
	}
}

func TestOneObjectsEventsAreDeliveredInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, func(n int, r *http.Request) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	ep, _ := e.endpoint(rc.URL)
	created, _ := e.event("commission:1", ep)
	reversed, _ := e.event("commission:1", ep)
	d, _ := e.dispatcher(func(c *delivery.Config, _ *delivery.SenderConfig) { c.EndpointConcurrency = 4 })

	// The first fails; the second, behind it, is not attempted.
	e.runOnce(d, 1)
	if row := e.delivery(ep, reversed); row.Attempts != 0 || row.Status != "pending" {
		t.Fatalf("second event attempted while the first is pending: %+v", row)
	}
	// Another object's event is not held up by commission:1.
	other, _ := e.event("commission:2", ep)
	e.runOnce(d, 1)
	if row := e.delivery(ep, other); row.Status != "delivered" {
		t.Fatalf("another object's event: %+v", row)
	}
	if row := e.delivery(ep, reversed); row.Attempts != 0 {
		t.Fatalf("second event attempted while the first is pending: %+v", row)
	}
	e.clock.Advance(5 * time.Second)
	e.runOnce(d, 1) // the first, delivered now
	e.runOnce(d, 1) // then the second
	var order []string
	for _, r := range rc.requests() {
		order = append(order, r.Header.Get("webhook-id"))
	}
	if want := []string{created, other, created, reversed}; fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("receiver got %v, want %v", order, want)
	}
}

func TestRotatedSecretSignsBesideTheNewOneUntilItExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, always(http.StatusOK))
	ep, old := e.endpoint(rc.URL)
	// The rotation: the old secret expires in 24 hours, the new one is
	// current.
	expires := e.clock.Now().Add(24 * time.Hour)
	if _, err := e.pool.Exec(e.ctx, `UPDATE endpoint_secrets SET expires_at = $2 WHERE endpoint_id = $1`, ep, expires); err != nil {
		t.Fatal(err)
	}
	current := e.addSecret(ep, nil)
	d, _ := e.dispatcher()
	oldWH, _ := standardwebhooks.NewWebhook(old)
	newWH, _ := standardwebhooks.NewWebhook(current)

	e.event("sale:1", ep)
	e.runOnce(d, 1)
	r := rc.requests()[0]
	sigs := strings.Split(r.Header.Get("webhook-signature"), " ")
	if len(sigs) != 2 {
		t.Fatalf("during the rotation: webhook-signature %q, want two values", r.Header.Get("webhook-signature"))
	}
	// Newest first; each value verifies with its own secret.
	for i, wh := range []*standardwebhooks.Webhook{newWH, oldWH} {
		h := r.Header.Clone()
		h.Set("webhook-signature", sigs[i])
		if err := wh.Verify(r.Body, h); err != nil {
			t.Fatalf("signature %d: %v", i, err)
		}
		if err := []*standardwebhooks.Webhook{oldWH, newWH}[i].Verify(r.Body, h); err == nil {
			t.Fatalf("signature %d verifies with the other secret", i)
		}
	}

	e.clock.Set(expires)
	e.event("sale:2", ep)
	e.runOnce(d, 1)
	r = rc.requests()[1]
	if sig := r.Header.Get("webhook-signature"); strings.Count(sig, "v1,") != 1 {
		t.Fatalf("after the old secret expired: webhook-signature %q, want one value", sig)
	}
	if err := newWH.VerifyIgnoringTimestamp(r.Body, r.Header); err != nil {
		t.Fatalf("new secret: %v", err)
	}
	if err := oldWH.VerifyIgnoringTimestamp(r.Body, r.Header); err == nil {
		t.Fatal("the expired secret still verifies")
	}
}

func TestPrivateDestinationRefusedAtConnectionTimeIsRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hit := make(chan struct{}, 10)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit <- struct{}{} }))
	t.Cleanup(srv.Close)
	// The url as it was when it passed CheckURL (a public name); by the
	// attempt it resolves to loopback. The dialer sees the address.
	u := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	ep, _ := e.endpoint(u)
	id, _ := e.event("sale:1", ep)
	d, reg := e.dispatcher(func(_ *delivery.Config, s *delivery.SenderConfig) { s.AllowPrivate = false })

	e.runOnce(d, 1)
	row := e.delivery(ep, id)
	if row.Status != "pending" || row.Attempts != 1 || row.LastStatus != nil || row.LastError != "destination address not allowed" ||
		row.Next == nil || !row.Next.Equal(e.clock.Now().Add(5*time.Second)) {
		t.Fatalf("delivery %+v, want refused and retried", row)
	}
	if v := counter(t, reg, "webhooks_attempts_total", "refused"); v != 1 {
		t.Fatalf("attempts_total{refused} = %v", v)
	}
	e.clock.Advance(5 * time.Second)
	e.runOnce(d, 1)
	if len(hit) != 0 {
		t.Fatal("the loopback receiver was reached")
	}
}

func TestEndpointFailingForFiveDaysIsDisabled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// upAt is the hour (from the first failure) at which the receiver
		// answers 2xx once; -1 never.
		upAt         int
		enabledUntil int // the last hour the endpoint is still enabled
	}{
		{name: "failing throughout", upAt: -1, enabledUntil: 110},
		{name: "a 2xx in between starts the count again", upAt: 30, enabledUntil: 150},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			start := e.clock.Now()
			clock := e.clock
			rc := newReceiver(t, func(int, *http.Request) int {
				if tt.upAt >= 0 && clock.Now().Equal(start.Add(time.Duration(tt.upAt)*time.Hour)) {
					return http.StatusOK
				}
				return http.StatusInternalServerError
			})
			ep, _ := e.endpoint(rc.URL)
			d, reg := e.dispatcher()
			// Every 10 hours a new event, and whatever is due is attempted.
			for h := 0; h <= tt.enabledUntil+10; h += 10 {
				e.clock.Set(start.Add(time.Duration(h) * time.Hour))
				e.event(fmt.Sprintf("sale:%d", h), ep)
				if _, err := d.RunOnce(e.ctx); err != nil {
					t.Fatal(err)
				}
				var enabled bool
				var reason string
				var failing, disabledAt *time.Time
				if err := e.pool.QueryRow(e.ctx, `SELECT enabled, disabled_reason, failing_since, disabled_at FROM endpoints WHERE id = $1`, ep).
					Scan(&enabled, &reason, &failing, &disabledAt); err != nil {
					t.Fatal(err)
				}
				if h == tt.upAt && failing != nil {
					t.Fatalf("hour %d: failing_since %s after a 2xx, want NULL", h, failing)
				}
				if h <= tt.enabledUntil {
					if !enabled {
						t.Fatalf("hour %d: disabled, want enabled until hour %d", h, tt.enabledUntil)
					}
					continue
				}
				if enabled || reason != "failing" || disabledAt == nil || !disabledAt.Equal(e.clock.Now()) {
					t.Fatalf("hour %d: enabled %v, reason %q, disabled_at %v; want disabled as failing now", h, enabled, reason, disabledAt)
				}
			}
			var n int
			var kind string
			if err := e.pool.QueryRow(e.ctx, `SELECT count(*), min(kind) FROM notifications WHERE program_id = $1 AND endpoint_id = $2`, program, ep).Scan(&n, &kind); err != nil {
				t.Fatal(err)
			}
			if n != 1 || kind != "endpoint_disabled" {
				t.Fatalf("%d notifications (%q), want one endpoint_disabled", n, kind)
			}
			if v := counter(t, reg, "webhooks_endpoints_disabled_total", ""); v != 1 {
				t.Fatalf("endpoints_disabled_total = %v", v)
			}
			// A disabled endpoint's deliveries wait: nothing is claimed.
			e.clock.Advance(24 * time.Hour)
			e.event("sale:late", ep)
			e.runOnce(d, 0)
			// Its backlog was parked with the disabling (out of the claim's
			// index); the delivery written since (here by hand: the writer
			// skips a disabled endpoint) is a stray the claim's join skips.
			pending := func() (parked, loose int) {
				t.Helper()
				if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FILTER (WHERE parked), count(*) FILTER (WHERE NOT parked)
					FROM deliveries WHERE endpoint_id = $1 AND status = 'pending'`, ep).Scan(&parked, &loose); err != nil {
					t.Fatal(err)
				}
				return parked, loose
			}
			if parked, loose := pending(); parked == 0 || loose != 1 {
				t.Fatalf("after the disabling: %d parked, %d not", parked, loose)
			}
			// The brand turns it on: all are due again and attempted.
			store := endpointpg.New(e.pool)
			set := func(on bool) {
				t.Helper()
				if _, ok, err := store.Update(e.ctx, program, ep, endpoint.Patch{Enabled: &on}, e.clock.Now()); err != nil || !ok {
					t.Fatalf("enabled %v: %v %v", on, ok, err)
				}
			}
			set(true)
			if parked, _ := pending(); parked != 0 {
				t.Fatalf("%d still parked after enabling", parked)
			}
			if n, err := d.RunOnce(e.ctx); err != nil || n == 0 {
				t.Fatalf("after enabling: %d attempted, %v", n, err)
			}
			// Turned off by hand: parked again, all of them.
			set(false)
			if parked, loose := pending(); parked == 0 || loose != 0 {
				t.Fatalf("after turning it off: %d parked, %d not", parked, loose)
			}
		})
	}
}

func TestDeliveryStillFailingAfterThreeDaysIsFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, always(http.StatusBadGateway))
	ep, _ := e.endpoint(rc.URL)
	id, _ := e.event("sale:1", ep)
	created := e.clock.Now()
	d, reg := e.dispatcher(func(c *delivery.Config, _ *delivery.SenderConfig) { c.DisableAfter = 30 * 24 * time.Hour })
	var row row
	for i := 0; i < 30; i++ {
		e.runOnce(d, 1)
		row = e.delivery(ep, id)
		if row.Status != "pending" {
			break
		}
		if e.clock.Now().Sub(created) >= 72*time.Hour {
			t.Fatalf("still pending after a failed attempt at %s", e.clock.Now().Sub(created))
		}
		e.clock.Set(*row.Next)
	}
	// Attempts at 0, 5 s, 5 min 5 s, 35 min 5 s, 2 h 35 min 5 s, 7 h 35
	// min 5 s, then every 10 h: the 13th, at 77 h 35 min 5 s, is the
	// first 3 days on.
	if row.Status != "failed" || row.Attempts != 13 || row.Next != nil || row.LastError != "HTTP 502" {
		t.Fatalf("delivery %+v, want failed after 13 attempts", row)
	}
	if got, want := e.clock.Now().Sub(created), 77*time.Hour+35*time.Minute+5*time.Second; got != want {
		t.Fatalf("failed at %s, want %s", got, want)
	}
	e.clock.Advance(24 * time.Hour)
	e.runOnce(d, 0)
	if v := counter(t, reg, "webhooks_deliveries_total", "failed"); v != 1 {
		t.Fatalf("deliveries_total{failed} = %v", v)
	}
}

func TestPendingGaugesCountEnabledEndpointsQueues(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, _ := e.endpoint("https://a.example/hooks")
	b, _ := e.endpoint("https://b.example/hooks")
	off, _ := e.endpoint("https://off.example/hooks")
	for i := range 3 {
		e.event(fmt.Sprintf("sale:%d", i), a, off)
	}
	e.event("sale:b", b, off)
	delivered, _ := e.event("sale:done", a)
	if _, err := e.pool.Exec(e.ctx, `UPDATE deliveries SET status = 'delivered' WHERE event_id = $1`, delivered); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(e.ctx, `UPDATE endpoints SET enabled = false WHERE id = $1`, off); err != nil {
		t.Fatal(err)
	}
	d, reg := e.dispatcher()
	if err := d.RefreshGauges(e.ctx); err != nil {
		t.Fatal(err)
	}
	if v := counter(t, reg, "webhooks_pending_deliveries", ""); v != 4 {
		t.Errorf("pending_deliveries = %v, want 4", v)
	}
	if v := counter(t, reg, "webhooks_endpoint_pending_max", ""); v != 3 {
		t.Errorf("endpoint_pending_max = %v, want 3", v)
	}
}

// The dispatcher's two frequent statements can be served by the partial
// indexes (with sequential scans priced out, the plan names an index on
// deliveries and never scans the table).
func TestFrequentStatementsAreIndexServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name string
		sql  string
		args []any
		want []string
	}{
		{name: "pending gauges", sql: pgstore.PendingSQL, want: []string{"deliveries_object_pending"}},
		{name: "claim", sql: pgstore.ClaimSQL, args: []any{time.Now(), 10, []int64{}}, want: []string{"deliveries_due", "deliveries_object_pending"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := e.pool.Begin(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(e.ctx) }()
			if _, err := tx.Exec(e.ctx, `SET LOCAL enable_seqscan = off`); err != nil {
				t.Fatal(err)
			}
			rows, err := tx.Query(e.ctx, "EXPLAIN "+tt.sql, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			var plan strings.Builder
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan.WriteString(line + "\n")
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(plan.String(), "Seq Scan on deliveries") {
				t.Fatalf("plan scans deliveries:\n%s", plan.String())
			}
			for _, idx := range tt.want {
				if !strings.Contains(plan.String(), idx) {
					t.Fatalf("plan does not use %s:\n%s", idx, plan.String())
				}
			}
		})
	}
}

// A secret still signing that does not open under the service's key (the
// key changed while a rotation's old secret had hours left) does not stop
// the delivery: the current secret signs alone. With no secret that
// opens, nothing is sent.
func TestASecretThatDoesNotOpenLeavesTheOthersSigning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rc := newReceiver(t, always(http.StatusOK))
	ep, current := e.endpoint(rc.URL)
	if _, err := e.pool.Exec(e.ctx, `INSERT INTO endpoint_secrets (endpoint_id, secret_sealed, created_at, expires_at)
		VALUES ($1, 'sealed under another key', $2, $3)`, ep, e.clock.Now().Add(-time.Hour), e.clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	d, _ := e.dispatcher()
	id, _ := e.event("sale:1", ep)
	e.runOnce(d, 1)
	if row := e.delivery(ep, id); row.Status != "delivered" {
		t.Fatalf("%+v", row)
	}
	r := rc.requests()[0]
	wh, _ := standardwebhooks.NewWebhook(current)
	if err := wh.Verify(r.Body, r.Header); err != nil || strings.Contains(r.Header.Get("webhook-signature"), " ") {
		t.Fatalf("webhook-signature %q: %v", r.Header.Get("webhook-signature"), err)
	}

	// Only secrets that do not open: not sent.
	if _, err := e.pool.Exec(e.ctx, `UPDATE endpoint_secrets SET secret_sealed = 'garbage' WHERE endpoint_id = $1`, ep); err != nil {
		t.Fatal(err)
	}
	id2, _ := e.event("sale:2", ep)
	e.runOnce(d, 1)
	if row := e.delivery(ep, id2); row.Status != "pending" || len(rc.requests()) != 1 {
		t.Fatalf("sent without a secret that opens: %+v, %d requests", row, len(rc.requests()))
	}
}
