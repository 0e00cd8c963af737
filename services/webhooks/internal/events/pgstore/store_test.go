package pgstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/services/webhooks/internal/events"
	"github.com/svc-dev/svc/services/webhooks/internal/events/pgstore"
	"github.com/svc-dev/svc/services/webhooks/migrations"
)

var t0 = time.Date(2026, 11, 28, 9, 30, 15, 123000000, time.UTC)

func newPool(t *testing.T) *pgxpool.Pool {
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
	return pool
}

// endpoint inserts an endpoint and answers its id.
func endpoint(t *testing.T, pool *pgxpool.Pool, program int64, types []string, enabled, includeTest bool) int64 {
	t.Helper()
	var id int64
	if err := pool.QueryRow(context.Background(), `INSERT INTO endpoints (program_id, url, events, include_test, enabled, created_at, updated_at)
		VALUES ($1, 'https://hooks.example/in', $2, $3, $4, $5, $5) RETURNING id`, program, types, includeTest, enabled, t0).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func write(t *testing.T, pool *pgxpool.Pool, evs ...events.Event) int64 {
	t.Helper()
	var n int64
	err := pg.InTx(context.Background(), pool, func(tx pgx.Tx) error {
		var err error
		n, err = pgstore.Write(context.Background(), tx, evs)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

type delivery struct {
	endpoint  int64
	event     string
	typ, key  string
	status    string
	attempts  int
	next, cre time.Time
}

func deliveries(t *testing.T, pool *pgxpool.Pool, eventID string) []delivery {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT endpoint_id, event_id, event_type, object_key, status, attempts, next_attempt_at, created_at
		FROM deliveries WHERE event_id = $1 ORDER BY endpoint_id`, eventID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (delivery, error) {
		var d delivery
		err := r.Scan(&d.endpoint, &d.event, &d.typ, &d.key, &d.status, &d.attempts, &d.next, &d.cre)
		return d, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func endpointsOf(ds []delivery) []int64 {
	var ids []int64
	for _, d := range ds {
		ids = append(ids, d.endpoint)
	}
	return ids
}

func count(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func sale(id int64, program int64, test bool) events.Event {
	return events.Event{
		ID: events.EventID(fmt.Sprintf("env-sale-%d", id), events.TypeSaleCreated), Type: events.TypeSaleCreated, ProgramID: program,
		IsTest: test, ObjectKey: fmt.Sprintf("sale:%d", id), CreatedAt: t0,
		Data: events.Sale{ID: id, TransactionID: fmt.Sprintf("tx_%d", id), AmountCents: 1000, Currency: "USD", Source: "api", Test: test, OccurredAt: events.Time(t0)},
	}
}

// Fan-out: one delivery per endpoint of the program that is enabled and
// lists the type; a test event only to those with include_test; another
// program's endpoints never. Each delivery is pending and due at the
// event's creation; the event row holds the exact body.
func TestWriteFansOutToMatchingEndpoints(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	live := endpoint(t, pool, 7, []string{events.TypeSaleCreated, events.TypeCommissionCreated}, true, false)
	withTest := endpoint(t, pool, 7, []string{events.TypeSaleCreated}, true, true)
	endpoint(t, pool, 7, []string{events.TypeSaleCreated}, false, true)  // disabled
	endpoint(t, pool, 7, []string{events.TypeLeadCreated}, true, true)   // does not list sale.created
	endpoint(t, pool, 8, []string{events.TypeSaleCreated}, true, true)   // another program
	endpoint(t, pool, 8, []string{events.TypeClickRecorded}, true, true) // another program
	clicks := endpoint(t, pool, 9, []string{events.TypeClickRecorded}, true, false)

	t.Run("a live sale goes to the program's enabled endpoints that list it", func(t *testing.T) {
		e := sale(1, 7, false)
		if n := write(t, pool, e); n != 2 {
			t.Fatalf("%d deliveries written, want 2", n)
		}
		ds := deliveries(t, pool, e.ID)
		if got := endpointsOf(ds); !slices.Equal(got, []int64{live, withTest}) {
			t.Fatalf("deliveries to %v, want %v", got, []int64{live, withTest})
		}
		for _, d := range ds {
			if d.typ != events.TypeSaleCreated || d.key != "sale:1" || d.status != "pending" || d.attempts != 0 || !d.next.Equal(t0) || !d.cre.Equal(t0) {
				t.Errorf("delivery %+v, want pending sale.created of sale:1 due at %s", d, t0)
			}
		}
		var program int64
		var typ, key string
		var test bool
		var body []byte
		var created time.Time
		if err := pool.QueryRow(ctx, `SELECT program_id, type, is_test, object_key, body, created_at FROM events WHERE id = $1`, e.ID).
			Scan(&program, &typ, &test, &key, &body, &created); err != nil {
			t.Fatal(err)
		}
		want := `{"id":"` + e.ID + `","type":"sale.created","created_at":"2026-11-28T09:30:15.123Z","program_id":7,"data":{"id":1,"transaction_id":"tx_1","customer_id":null,"partner_id":null,"amount_cents":1000,"currency":"USD","refunded_cents":0,"source":"api","test":false,"occurred_at":"2026-11-28T09:30:15.123Z"}}`
		if string(body) != want {
			t.Errorf("body\n got %s\nwant %s", body, want)
		}
		if program != 7 || typ != events.TypeSaleCreated || test || key != "sale:1" || !created.Equal(t0) {
			t.Errorf("event row program %d type %s test %v key %s created %s", program, typ, test, key, created)
		}
	})
	t.Run("a test sale goes only to endpoints with include_test", func(t *testing.T) {
		e := sale(2, 7, true)
		if n := write(t, pool, e); n != 1 {
			t.Fatalf("%d deliveries written, want 1", n)
		}
		if got := endpointsOf(deliveries(t, pool, e.ID)); !slices.Equal(got, []int64{withTest}) {
			t.Fatalf("deliveries to %v, want %v", got, []int64{withTest})
		}
	})
	t.Run("a click goes only to endpoints that list click.recorded", func(t *testing.T) {
		before := count(t, pool, "events")
		e := events.Event{ID: events.EventID("env-click-1", events.TypeClickRecorded), Type: events.TypeClickRecorded, ProgramID: 7,
			ObjectKey: "click:1", CreatedAt: t0, Data: events.Click{ID: 1, CreatedAt: events.Time(t0)}}
		if n := write(t, pool, e); n != 0 || count(t, pool, "events") != before {
			t.Fatalf("%d deliveries and %d new events for a program none of whose endpoints lists clicks, want none", n, count(t, pool, "events")-before)
		}
		e.ID, e.ProgramID = events.EventID("env-click-2", events.TypeClickRecorded), 9
		if n := write(t, pool, e); n != 1 {
			t.Fatalf("%d deliveries written, want 1", n)
		}
		if got := endpointsOf(deliveries(t, pool, e.ID)); !slices.Equal(got, []int64{clicks}) {
			t.Fatalf("deliveries to %v, want %v", got, []int64{clicks})
		}
	})
	t.Run("a program without endpoints writes nothing at all", func(t *testing.T) {
		ev, dl := count(t, pool, "events"), count(t, pool, "deliveries")
		if n := write(t, pool, sale(3, 42, false), sale(4, 42, true)); n != 0 {
			t.Fatalf("%d deliveries written, want 0", n)
		}
		if count(t, pool, "events") != ev || count(t, pool, "deliveries") != dl {
			t.Fatalf("events %d -> %d, deliveries %d -> %d: want no rows", ev, count(t, pool, "events"), dl, count(t, pool, "deliveries"))
		}
	})
	t.Run("a replayed event writes nothing new", func(t *testing.T) {
		ev, dl := count(t, pool, "events"), count(t, pool, "deliveries")
		if n := write(t, pool, sale(1, 7, false), sale(2, 7, true)); n != 0 {
			t.Fatalf("%d deliveries written on replay, want 0", n)
		}
		if count(t, pool, "events") != ev || count(t, pool, "deliveries") != dl {
			t.Fatalf("events %d -> %d, deliveries %d -> %d on replay", ev, count(t, pool, "events"), dl, count(t, pool, "deliveries"))
		}
		// An endpoint added since does not get the replayed event either:
		// the event was written once, with the deliveries of its time.
		endpoint(t, pool, 7, []string{events.TypeSaleCreated}, true, false)
		if n := write(t, pool, sale(1, 7, false)); n != 0 {
			t.Fatalf("%d deliveries written on replay, want 0", n)
		}
	})
	t.Run("events of one batch are written in their order", func(t *testing.T) {
		a, b, c := sale(10, 7, false), sale(11, 7, false), sale(12, 7, false)
		write(t, pool, a, b, c)
		rows, err := pool.Query(ctx, `SELECT id FROM events WHERE id = ANY($1) ORDER BY seq`, []string{a.ID, b.ID, c.ID})
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, []string{a.ID, b.ID, c.ID}) {
			t.Fatalf("seq order %v, want the batch's", ids)
		}
	})
}

// The dispatcher is told at commit when deliveries were written, and only
// then.
func TestWriteNotifiesWhenDeliveriesWereWritten(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	endpoint(t, pool, 7, []string{events.TypeSaleCreated}, true, false)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `LISTEN `+pgstore.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	next := func() string {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := conn.Conn().WaitForNotification(c)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return n.Payload
	}
	write(t, pool, sale(1, 42, false)) // no endpoint: no notification
	if _, err := pool.Exec(ctx, `SELECT pg_notify($1, 'marker')`, pgstore.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	write(t, pool, sale(2, 7, false))
	// Notifications come in commit order: a notification of the first
	// write would precede the marker.
	if got := next(); got != "marker" {
		t.Fatalf("first notification %q, want the marker (the write without deliveries told nobody)", got)
	}
	if got := next(); got != "" {
		t.Fatalf("second notification %q, want the write's", got)
	}
}

func TestEnrolment(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO partner_programs (id, program_id, partner_id, approved, catalog_seq) VALUES (21, 7, 3, false, 40)`); err != nil {
		t.Fatal(err)
	}
	err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		if err := pgstore.KeepFixturePartner(ctx, tx, 4, 7); err != nil {
			return err
		}
		if err := pgstore.KeepFixturePartner(ctx, tx, 4, 7); err != nil { // again: no conflict
			return err
		}
		for _, c := range []struct {
			id, program, partner int64
			want                 events.Enrolment
		}{
			{21, 7, 3, events.Enrolment{Found: true, Approved: false, Seq: 40}},
			{22, 7, 5, events.Enrolment{}},
			{23, 7, 4, events.Enrolment{Test: true}},
			{24, 8, 4, events.Enrolment{}}, // the fixture of another program
		} {
			got, err := pgstore.Enrolment(ctx, tx, c.id, c.program, c.partner)
			if err != nil {
				return err
			}
			if got != c.want {
				t.Errorf("enrolment %d (program %d, partner %d): %+v, want %+v", c.id, c.program, c.partner, got, c.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func refund(sale int64, program int64) events.Event {
	return events.Event{
		ID: events.EventID(fmt.Sprintf("env-refund-%d", sale), events.TypeSaleRefunded), Type: events.TypeSaleRefunded, ProgramID: program,
		ObjectKey: fmt.Sprintf("sale:%d", sale), CreatedAt: t0,
		Data: events.SaleRefunded{ID: sale, TransactionID: fmt.Sprintf("tx_%d", sale), Currency: "USD", RefundedCents: 100,
			Refund: events.Refund{ID: sale, AmountCents: 100, Reason: "refund", CreatedAt: events.Time(t0)}},
	}
}

// The refund of a test-mode sale is a test event (its source does not
// say so): delivered only with include_test, like the sale was, even when
// no endpoint received the sale, and when both come in one batch.
func TestWriteMarksRefundsOfTestSalesTest(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	live := endpoint(t, pool, 7, []string{events.TypeSaleRefunded}, true, false)
	withTest := endpoint(t, pool, 7, []string{events.TypeSaleRefunded}, true, true)
	isTest := func(e events.Event) bool {
		t.Helper()
		var test bool
		if err := pool.QueryRow(ctx, `SELECT is_test FROM events WHERE id = $1`, e.ID).Scan(&test); err != nil {
			t.Fatal(err)
		}
		return test
	}

	write(t, pool, sale(1, 7, true)) // no endpoint lists sale.created: kept all the same
	write(t, pool, sale(2, 7, false))
	for _, c := range []struct {
		name  string
		write []events.Event
		check events.Event
		test  bool
	}{
		{"the refund of a test sale seen before", []events.Event{refund(1, 7)}, refund(1, 7), true},
		{"the refund of a live sale", []events.Event{refund(2, 7)}, refund(2, 7), false},
		{"a test sale and its refund in one batch", []events.Event{sale(3, 7, true), refund(3, 7)}, refund(3, 7), true},
		{"the refund of a sale never seen", []events.Event{refund(4, 7)}, refund(4, 7), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			write(t, pool, c.write...)
			want := []int64{live, withTest}
			if c.test {
				want = []int64{withTest}
			}
			if got := endpointsOf(deliveries(t, pool, c.check.ID)); !slices.Equal(got, want) {
				t.Fatalf("deliveries to %v, want %v", got, want)
			}
			if isTest(c.check) != c.test {
				t.Fatalf("is_test %v, want %v", !c.test, c.test)
			}
		})
	}
}

// listener inserts a `svc listen` listener of program and answers its id.
func listener(t *testing.T, pool *pgxpool.Pool, program int64, types []string, includeTest bool, expires time.Time) int64 {
	t.Helper()
	var id int64
	if err := pool.QueryRow(context.Background(), `INSERT INTO listeners (program_id, secret_sealed, events, include_test, created_at, expires_at)
		VALUES ($1, '\x00', $2, $3, $4, $5) RETURNING id`, program, types, includeTest, t0, expires).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func eventExists(t *testing.T, pool *pgxpool.Pool, id string) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM events WHERE id = $1)`, id).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// A program without endpoints but with a live `svc listen` listener that
// wants the event keeps the event row (the listener polls it) and writes
// no delivery; an expired listener, one not listing the type, one without
// include_test for a test event, or another program's listener keeps
// nothing.
func TestWriteKeepsEventsForLiveListeners(t *testing.T) {
	pool := newPool(t)
	listener(t, pool, 50, []string{events.TypeSaleCreated}, false, t0.Add(2*time.Minute))
	listener(t, pool, 51, []string{events.TypeSaleCreated}, true, t0) // expired at the event's time
	listener(t, pool, 52, []string{events.TypeLeadCreated}, true, t0.Add(time.Minute))
	listener(t, pool, 53, []string{events.TypeSaleCreated}, true, t0.Add(time.Minute))
	withEndpoint := endpoint(t, pool, 54, []string{events.TypeSaleCreated}, true, false)
	listener(t, pool, 54, []string{events.TypeSaleCreated}, false, t0.Add(time.Minute))

	for _, c := range []struct {
		name  string
		ev    events.Event
		kept  bool
		deliv []int64
	}{
		{"a live listener of the type keeps the event, without a delivery", sale(100, 50, false), true, nil},
		{"a listener without include_test does not keep a test event", sale(101, 50, true), false, nil},
		{"an expired listener keeps nothing", sale(102, 51, false), false, nil},
		{"a listener of other types keeps nothing", sale(103, 52, false), false, nil},
		{"a listener with include_test keeps a test event", sale(104, 53, true), true, nil},
		{"another program's listener keeps nothing", sale(105, 55, false), false, nil},
		{"with an endpoint too: one event, the endpoint's delivery only", sale(106, 54, false), true, []int64{withEndpoint}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := write(t, pool, c.ev)
			if n != int64(len(c.deliv)) {
				t.Fatalf("%d deliveries written, want %d", n, len(c.deliv))
			}
			if got := eventExists(t, pool, c.ev.ID); got != c.kept {
				t.Fatalf("event kept %v, want %v", got, c.kept)
			}
			if got := endpointsOf(deliveries(t, pool, c.ev.ID)); !slices.Equal(got, c.deliv) {
				t.Fatalf("deliveries to %v, want %v", got, c.deliv)
			}
		})
	}
	t.Run("a replay for a listener writes nothing new", func(t *testing.T) {
		before := count(t, pool, "events")
		write(t, pool, sale(100, 50, false))
		if count(t, pool, "events") != before {
			t.Fatal("replay wrote an event")
		}
	})
}
