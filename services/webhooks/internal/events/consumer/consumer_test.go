package consumer_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/webhooks/internal/events"
	"github.com/svc-dev/svc/services/webhooks/internal/events/consumer"
	replica "github.com/svc-dev/svc/services/webhooks/internal/replica/consumer"
	"github.com/svc-dev/svc/services/webhooks/migrations"
)

var t0 = time.Date(2026, 11, 28, 9, 30, 15, 0, time.UTC)

// newPool is webhooks' schema as the platform migrates it: the service's
// migrations, the outbox/inbox tables and the catalog barrier's.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	logger := slog.New(slog.DiscardHandler)
	if err := pg.Migrate(ctx, dsn, "webhooks", migrations.FS, logger); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, dsn, "webhooks", logger); err != nil {
		t.Fatal(err)
	}
	if err := catalogsync.Migrate(ctx, dsn, "webhooks", logger); err != nil {
		t.Fatal(err)
	}
	pool, err := pg.NewPool(ctx, dsn, pg.Options{Schema: "webhooks", MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func endpoint(t *testing.T, pool *pgxpool.Pool, program int64, types ...string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO endpoints (program_id, url, events, include_test, enabled, created_at, updated_at)
		VALUES ($1, 'https://hooks.example/in', $2, false, true, $3, $3)`, program, types, t0); err != nil {
		t.Fatal(err)
	}
}

func envelope(t *testing.T, id, typ string, seq int64, msg proto.Message) *eventsv1.Envelope {
	t.Helper()
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return &eventsv1.Envelope{Id: id, Type: typ, OccurredAt: timestamppb.New(t0), Seq: seq, Epoch: "ep1", Source: "accounts", Payload: b}
}

// eventTypes lists the stored webhook events' types in seq order.
func eventTypes(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT type FROM events ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func inTx(t *testing.T, pool *pgxpool.Pool, fn func(pgx.Tx) error) {
	t.Helper()
	if err := pg.InTx(context.Background(), pool, fn); err != nil {
		t.Fatal(err)
	}
}

// A batch of the ledger's events becomes its webhook events in order,
// for the endpoints that list them; events that mean nothing are skipped.
func TestApplyBatchWritesTheBatchInOrder(t *testing.T) {
	pool := newPool(t)
	clock := platformtest.NewClock(t0)
	endpoint(t, pool, 7, events.TypeSaleCreated, events.TypeCommissionCreated, events.TypeCommissionApproved)
	w := consumer.Writer{Now: clock.Now}
	envs := []*eventsv1.Envelope{
		envelope(t, "s", eventsv1.TypeLedgerSaleRecorded, 0, &eventsv1.LedgerSaleRecorded{SaleId: 1, TransactionId: "tx", ProgramId: 7, AmountCents: 100, Currency: "USD"}),
		envelope(t, "n", eventsv1.TypeNotificationCreated, 0, &eventsv1.NotificationCreated{NotificationId: 1}),
		envelope(t, "c", eventsv1.TypeCommissionCreated, 0, &eventsv1.CommissionCreated{CommissionId: 2, SaleId: 1, ProgramId: 7, Kind: "sale", Status: "approved", Amount: 10, Currency: "USD"}),
		envelope(t, "r", eventsv1.TypeRefundRecorded, 0, &eventsv1.RefundRecorded{RefundId: 3, SaleId: 1, ProgramId: 7}), // sale.refunded: not listed
	}
	for _, env := range envs {
		if consumer.Skip(env) != (env.GetType() == eventsv1.TypeNotificationCreated) {
			t.Errorf("Skip(%s) = %v", env.GetType(), consumer.Skip(env))
		}
	}
	inTx(t, pool, func(tx pgx.Tx) error { return w.ApplyBatch(context.Background(), tx, envs) })
	want := []string{events.TypeSaleCreated, events.TypeCommissionCreated, events.TypeCommissionApproved}
	if got := eventTypes(t, pool); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("events %v, want %v", got, want)
	}
	// The same envelopes again (a redelivery the inbox no longer
	// remembers) write nothing.
	inTx(t, pool, func(tx pgx.Tx) error { return w.Apply(context.Background(), tx, envs[0]) })
	inTx(t, pool, func(tx pgx.Tx) error { return w.ApplyBatch(context.Background(), tx, envs) })
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM deliveries)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 6 {
		t.Fatalf("%d events and deliveries after the replay, want 6", n)
	}
}

// partner.enrolled comes from the catalog replica's Before hook, which
// sees the replica as it was before each catalog event.
func TestPartnerEnrolled(t *testing.T) {
	pool := newPool(t)
	clock := platformtest.NewClock(t0)
	endpoint(t, pool, 7, events.TypePartnerEnrolled)
	applier := replica.Applier{Service: "webhooks", Now: clock.Now, Before: consumer.Writer{Now: clock.Now}.Enrolled}
	apply := func(id string, seq int64, pp *eventsv1.PartnerProgram) {
		t.Helper()
		inTx(t, pool, func(tx pgx.Tx) error {
			return applier.Apply(context.Background(), tx, envelope(t, id, eventsv1.TypePartnerProgramUpserted, seq, pp))
		})
	}
	enrolled := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE type = 'partner.enrolled'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	pp := func(id int64, approved bool) *eventsv1.PartnerProgram {
		return &eventsv1.PartnerProgram{Id: id, PartnerId: id + 100, ProgramId: 7, Approved: approved, CreatedAt: timestamppb.New(t0)}
	}
	steps := []struct {
		name   string
		id     string
		seq    int64
		pp     *eventsv1.PartnerProgram
		events int
	}{
		{"a new approved enrolment is partner.enrolled", "a1", 1, pp(1, true), 1},
		{"re-upserted approved: none", "a2", 2, pp(1, true), 1},
		{"a new unapproved enrolment: none", "b1", 3, pp(2, false), 1},
		{"an older event approving it (a replay): none", "b0", 2, pp(2, true), 1},
		{"approved by a newer event: partner.enrolled", "b2", 4, pp(2, true), 2},
		{"approval withdrawn: none", "b3", 5, pp(2, false), 2},
		{"approved again: partner.enrolled", "b4", 6, pp(2, true), 3},
		{"an older unapproved snapshot replayed after: none", "b5", 5, pp(2, false), 3},
		{"another program's enrolment with no endpoint: none", "c1", 7, &eventsv1.PartnerProgram{Id: 3, PartnerId: 9, ProgramId: 8, Approved: true}, 3},
	}
	for _, s := range steps {
		apply(s.id, s.seq, s.pp)
		if got := enrolled(); got != s.events {
			t.Fatalf("%s: %d partner.enrolled events, want %d", s.name, got, s.events)
		}
	}
	// The program's `svc test` fixture partner: its enrolment is a test
	// event, for endpoints with include_test only (program 7's has not).
	inTx(t, pool, func(tx pgx.Tx) error {
		return applier.Apply(context.Background(), tx, envelope(t, "f0", eventsv1.TypePartnerUpserted, 8,
			&eventsv1.Partner{Id: 50, Name: "Test partner", Email: "test-partner+7@svc.invalid"}))
	})
	apply("f1", 9, &eventsv1.PartnerProgram{Id: 51, PartnerId: 50, ProgramId: 7, Approved: true})
	if got := enrolled(); got != 3 {
		t.Fatalf("the fixture partner's enrolment was sent to an endpoint without include_test (%d events)", got)
	}
	if _, err := pool.Exec(context.Background(), `INSERT INTO endpoints (program_id, url, events, include_test, enabled, created_at, updated_at)
		VALUES (7, 'https://hooks.example/test', $1, true, true, $2, $2)`, []string{events.TypePartnerEnrolled}, t0); err != nil {
		t.Fatal(err)
	}
	apply("f2", 10, &eventsv1.PartnerProgram{Id: 51, PartnerId: 50, ProgramId: 7, Approved: false})
	apply("f3", 11, &eventsv1.PartnerProgram{Id: 51, PartnerId: 50, ProgramId: 7, Approved: true})
	var test bool
	if err := pool.QueryRow(context.Background(), `SELECT is_test FROM events WHERE id = $1`, events.EventID("f3", events.TypePartnerEnrolled)).Scan(&test); err != nil || !test {
		t.Fatalf("the fixture partner's enrolment: is_test %v (%v), want a test event", test, err)
	}
	var body string
	if err := pool.QueryRow(context.Background(), `SELECT convert_from(body, 'UTF8') FROM events WHERE id = $1`,
		events.EventID("a1", events.TypePartnerEnrolled)).Scan(&body); err != nil {
		t.Fatal(err)
	}
	want := `{"id":"` + events.EventID("a1", events.TypePartnerEnrolled) + `","type":"partner.enrolled","created_at":"2026-11-28T09:30:15.000Z","program_id":7,"data":{"id":1,"partner_id":101,"program_id":7,"approved":true,"test":false,"created_at":"2026-11-28T09:30:15.000Z"}}`
	if body != want {
		t.Fatalf("body\n got %s\nwant %s", body, want)
	}
}
