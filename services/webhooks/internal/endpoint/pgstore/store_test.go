package pgstore

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/services/webhooks/internal/delivery"
	deliverystore "github.com/svc-dev/svc/services/webhooks/internal/delivery/pgstore"
	"github.com/svc-dev/svc/services/webhooks/internal/endpoint"
	"github.com/svc-dev/svc/services/webhooks/migrations"
)

func newStore(t *testing.T) *Store {
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
	return New(pool)
}

var at = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

func seal(id int64) ([]byte, error) { return []byte{byte(id)}, nil }

// Creates racing past the cap: the advisory lock on the program makes the
// count and the insert one step, so exactly the cap's worth get in.
func TestCreatesAtOnceNeverPassTheCap(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	const max, tries = 5, 12
	var wg sync.WaitGroup
	errs := make(chan error, tries)
	for range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Create(ctx, endpoint.Endpoint{ProgramID: 7, URL: "https://x.example", Events: []string{"sale.created"}, CreatedAt: at}, seal, max)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	ok, refused := 0, 0
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, endpoint.ErrTooMany):
			refused++
		default:
			t.Fatal(err)
		}
	}
	var n, secrets int
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM endpoints WHERE program_id = 7), (SELECT count(*) FROM endpoint_secrets)`).Scan(&n, &secrets); err != nil {
		t.Fatal(err)
	}
	if ok != max || refused != tries-max || n != max || secrets != max {
		t.Fatalf("%d created, %d refused, %d rows, %d secrets", ok, refused, n, secrets)
	}
}

// A secret that cannot be sealed leaves no endpoint behind: the row and
// its secret are one transaction.
func TestCreateIsOneTransaction(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	_, err := s.Create(ctx, endpoint.Endpoint{ProgramID: 7, URL: "https://x.example", Events: []string{"sale.created"}, CreatedAt: at},
		func(int64) ([]byte, error) { return nil, errors.New("no entropy") }, 20)
	if err == nil {
		t.Fatal("no error")
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM endpoints`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d endpoints left (%v)", n, err)
	}
}

// Rotations: the current secret gets now+overlap; a secret already rotated
// out and still signing ends now; one already expired keeps its time.
func TestRotateExpiresTheOlderSecrets(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	e, err := s.Create(ctx, endpoint.Endpoint{ProgramID: 7, URL: "https://x.example", Events: []string{"sale.created"}, CreatedAt: at}, seal, 20)
	if err != nil {
		t.Fatal(err)
	}
	times := []time.Time{at.Add(time.Hour), at.Add(2 * time.Hour), at.Add(30 * time.Hour)}
	for _, now := range times {
		if ok, err := s.Rotate(ctx, 7, e.ID, seal, now, 24*time.Hour); err != nil || !ok {
			t.Fatalf("rotate: %v %v", ok, err)
		}
	}
	if ok, err := s.Rotate(ctx, 8, e.ID, seal, at, 24*time.Hour); err != nil || ok {
		t.Fatalf("rotated through another program: %v %v", ok, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT expires_at FROM endpoint_secrets WHERE endpoint_id = $1 ORDER BY id`, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []*time.Time
	for rows.Next() {
		var exp *time.Time
		if err := rows.Scan(&exp); err != nil {
			t.Fatal(err)
		}
		got = append(got, exp)
	}
	// The first, rotated out at +1h (until +25h), ends at +2h with the
	// second rotation; the second, rotated out at +2h, had expired (+26h)
	// by the third at +30h and keeps its time; the third signs until +54h;
	// the fourth is current.
	want := []time.Time{at.Add(2 * time.Hour), at.Add(26 * time.Hour), at.Add(54 * time.Hour)}
	if len(got) != 4 || got[3] != nil {
		t.Fatalf("%d secrets, last %v", len(got), got[len(got)-1])
	}
	for i, w := range want {
		if got[i] == nil || !got[i].Equal(w) {
			t.Fatalf("secret %d expires %v, want %v", i, got[i], w)
		}
	}
}

// Retry goes through the endpoint's program: another program's delivery
// id is not found, and nothing changes.
func TestRetryStaysInTheProgram(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	e, err := s.Create(ctx, endpoint.Endpoint{ProgramID: 7, URL: "https://x.example", Events: []string{"sale.created"}, CreatedAt: at}, seal, 20)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := endpoint.PingEvent(7, e.ID, at)
	if err != nil {
		t.Fatal(err)
	}
	did, ok, err := s.Ping(ctx, 7, e.ID, ev)
	if err != nil || !ok {
		t.Fatalf("ping: %v %v", ok, err)
	}
	if _, ok, err := s.Ping(ctx, 8, e.ID, ev); err != nil || ok {
		t.Fatalf("pinged through another program: %v %v", ok, err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE deliveries SET status = 'failed', attempts = 3, next_attempt_at = NULL WHERE id = $1`, did); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Retry(ctx, 8, e.ID, did, at); err != nil || ok {
		t.Fatalf("retried through another program: %v %v", ok, err)
	}
	d, ok, err := s.Retry(ctx, 7, e.ID, did, at.Add(time.Hour))
	if err != nil || !ok || d.Status != "pending" || d.Attempts != 3 || d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(at.Add(time.Hour)) {
		t.Fatalf("retry: %+v %v %v", d, ok, err)
	}
}

// A page of the delivery log is an index range, read backwards and stopped
// by LIMIT, whatever the endpoint's log size: deliveries_endpoint without a
// status, deliveries_endpoint_status with one; never a sort.
func TestDeliveriesPageIsAnIndexRange(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	var ids []int64
	for i := range 20 {
		e, err := s.Create(ctx, endpoint.Endpoint{ProgramID: int64(i%3 + 1), URL: "https://x.example", Events: []string{"sale.created"}, CreatedAt: at}, seal, 20)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO events (id, program_id, type, is_test, object_key, body, created_at)
		SELECT 'evt_' || g, 1, 'sale.created', false, 'sale:' || g, '{}', $1 FROM generate_series(1, 1000) g`, at); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO deliveries (endpoint_id, event_id, event_type, object_key, status, created_at)
		SELECT e, 'evt_' || g, 'sale.created', 'sale:' || g, (ARRAY['pending', 'delivered', 'failed'])[1 + g % 3], $2
		FROM generate_series(1, 1000) g, unnest($1::bigint[]) e`, ids, at); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE deliveries`); err != nil {
		t.Fatal(err)
	}
	for status, index := range map[string]string{"": "deliveries_endpoint", "failed": "deliveries_endpoint_status"} {
		args := []any{ids[3], int64(1<<63 - 1), 50}
		if status != "" {
			args = append(args, status)
		}
		rows, err := s.pool.Query(ctx, `EXPLAIN `+DeliveriesQuery(status), args...)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, l)
		}
		rows.Close()
		all := strings.Join(lines, "\n")
		if !strings.Contains(all, "Index Scan Backward using "+index+" ") || strings.Contains(all, "Sort") {
			t.Errorf("status %q: not a backward range of %s:\n%s", status, index, all)
		}
		got, err := s.Deliveries(ctx, ids[3], status, 0, 50)
		if err != nil || len(got) != 50 || got[0].ID <= got[49].ID {
			t.Fatalf("status %q: %d rows, %v", status, len(got), err)
		}
	}
}

// failOut makes the dispatcher disable the endpoint, as it does after
// DISABLE_AFTER of failures, through the dispatcher's own store: a ping,
// its claim, and a failed attempt whose endpoint has been failing since
// long enough (DisableBefore is the attempt's time).
func failOut(t *testing.T, s *Store, programID, endpointID int64, now time.Time) {
	t.Helper()
	ctx := context.Background()
	ev, err := endpoint.PingEvent(programID, endpointID, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Ping(ctx, programID, endpointID, ev); err != nil || !ok {
		t.Fatalf("ping: %v %v", ok, err)
	}
	ds := deliverystore.New(s.pool)
	claimed, err := ds.Claim(ctx, delivery.ClaimRequest{Now: now, LeaseUntil: now.Add(time.Minute), Limit: 10, PerEndpoint: 10})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %+v %v", claimed, err)
	}
	c := claimed[0]
	rec, err := ds.Record(ctx, delivery.Outcome{DeliveryID: c.ID, EndpointID: c.EndpointID, Attempt: c.Attempt, Now: now, Failed: true,
		Status: 503, Error: "HTTP 503", EndpointFault: true, DisableBefore: now})
	if err != nil || !rec.Disabled {
		t.Fatalf("record: %+v %v", rec, err)
	}
}

// The dispatcher's disabling is listed, newest first, with the endpoint's
// current url; only the program's own; a deleted endpoint's notification
// stays, its url null. Paging by id is exact.
func TestNotificationsOutliveTheirEndpoint(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	mk := func(prog int64, url string) endpoint.Endpoint {
		e, err := s.Create(ctx, endpoint.Endpoint{ProgramID: prog, URL: url, Events: []string{"sale.created"}, CreatedAt: at}, seal, 20)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a1, a2, b := mk(7, "https://a1.example/h"), mk(7, "https://a2.example/h"), mk(8, "https://b.example/h")
	failOut(t, s, 7, a1.ID, at.Add(time.Hour))
	failOut(t, s, 8, b.ID, at.Add(2*time.Hour))
	failOut(t, s, 7, a2.ID, at.Add(3*time.Hour))
	if _, ok, err := s.Update(ctx, 7, a2.ID, endpoint.Patch{URL: ptr("https://a2.example/moved")}, at.Add(4*time.Hour)); err != nil || !ok {
		t.Fatalf("update: %v %v", ok, err)
	}
	got, err := s.Notifications(ctx, 7, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].EndpointID != a2.ID || got[1].EndpointID != a1.ID || got[0].ID <= got[1].ID {
		t.Fatalf("notifications of 7: %+v", got)
	}
	n := got[0]
	if n.Kind != endpoint.KindEndpointDisabled || n.URL == nil || *n.URL != "https://a2.example/moved" || !n.CreatedAt.Equal(at.Add(3*time.Hour)) ||
		n.CreatedAt.Location() != time.UTC {
		t.Fatalf("newest: %+v (url %v)", n, n.URL)
	}
	page, err := s.Notifications(ctx, 7, got[0].ID, 1)
	if err != nil || len(page) != 1 || page[0].ID != got[1].ID {
		t.Fatalf("below %d: %+v %v", got[0].ID, page, err)
	}
	if other, err := s.Notifications(ctx, 8, 0, 10); err != nil || len(other) != 1 || other[0].EndpointID != b.ID {
		t.Fatalf("notifications of 8: %+v %v", other, err)
	}
	if ok, err := s.Delete(ctx, 7, a1.ID); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	got, err = s.Notifications(ctx, 7, 0, 10)
	if err != nil || len(got) != 2 || got[1].EndpointID != a1.ID || got[1].URL != nil || got[0].URL == nil {
		t.Fatalf("after the delete: %+v %v", got, err)
	}
}

func ptr[T any](v T) *T { return &v }

// A page of the notifications is an index range of notifications_program
// read backwards and stopped by LIMIT, each endpoint read by an index;
// never a sort nor a walk through other programs' rows.
func TestNotificationsPageIsAnIndexRange(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	// 500 programs of one endpoint each, 40 notifications each (far more
	// than a program gets: one per disabling), interleaved as time would.
	if _, err := s.pool.Exec(ctx, `INSERT INTO endpoints (program_id, url, events, created_at, updated_at)
		SELECT g, 'https://x.example/' || g, '{sale.created}', $1, $1 FROM generate_series(1, 500) g`, at); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO notifications (program_id, endpoint_id, kind, created_at)
		SELECT e.program_id, e.id, 'endpoint_disabled', $1 FROM generate_series(1, 40) g, endpoints e ORDER BY g, e.id`, at); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE notifications; ANALYZE endpoints`); err != nil {
		t.Fatal(err)
	}
	rows, err := s.pool.Query(ctx, `EXPLAIN `+NotificationsQuery, int64(2), int64(1<<63-1), 21)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	rows.Close()
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, "Index Scan Backward using notifications_program ") || strings.Contains(all, "Sort") || strings.Contains(all, "Seq Scan") {
		t.Errorf("not a backward range of notifications_program:\n%s", all)
	}
	got, err := s.Notifications(ctx, 2, 0, 21)
	if err != nil || len(got) != 21 || got[0].ID <= got[20].ID || got[0].URL == nil || *got[0].URL != "https://x.example/2" {
		t.Fatalf("%d rows, %v", len(got), err)
	}
}
