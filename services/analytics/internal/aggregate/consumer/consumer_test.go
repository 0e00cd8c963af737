package consumer_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/analytics/internal/aggregate/consumer"
	"github.com/svc-dev/svc/services/analytics/migrations"
)

var t0 = time.Date(2026, 3, 10, 12, 7, 0, 0, time.UTC)

func setup(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	if err := pg.Migrate(ctx, dsn, "analytics", migrations.FS, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	pool, err := pg.NewPool(ctx, dsn, pg.Options{Schema: "analytics", MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// apply applies one event in its own transaction, as the inbox does, under
// a fresh envelope id (a replay or a re-published outbox row).
func apply(t *testing.T, pool *pgxpool.Pool, fn func(context.Context, pgx.Tx, *eventsv1.Envelope) error, typ string, msg proto.Message) {
	t.Helper()
	payload, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	env := &eventsv1.Envelope{Id: time.Now().String(), Type: typ, Payload: payload, OccurredAt: timestamppb.New(t0)}
	if err := pg.InTx(context.Background(), pool, func(tx pgx.Tx) error { return fn(context.Background(), tx, env) }); err != nil {
		t.Fatal(err)
	}
}

// Every event counts once, under any number of envelopes; test events go
// to status's list, never to the figures; buckets are 15 minutes.
func TestEventsCountOnce(t *testing.T) {
	pool := setup(t)
	ts := timestamppb.New(t0)
	for range 2 {
		apply(t, pool, consumer.Tracking, eventsv1.TypeClickRecorded, &eventsv1.ClickRecorded{EventId: 1, ProgramId: 7, CustomerId: 1, NewCustomer: true, ReferrerUrl: "https://google.com/", ClickedAt: ts})
		apply(t, pool, consumer.Tracking, eventsv1.TypeClickRecorded, &eventsv1.ClickRecorded{EventId: 2, ProgramId: 7, CustomerId: 2, ClickedAt: ts, IsTest: true, ViaApiKey: true})
		// A key-less test click verifies nothing: not kept (issue 23).
		apply(t, pool, consumer.Tracking, eventsv1.TypeClickRecorded, &eventsv1.ClickRecorded{EventId: 5, ProgramId: 7, ClickedAt: ts, IsTest: true})
		apply(t, pool, consumer.Tracking, eventsv1.TypeLeadRecorded, &eventsv1.LeadRecorded{EventId: 6, ProgramId: 7, IsTest: true, Status: "settled", RecordedAt: ts})
		apply(t, pool, consumer.Tracking, eventsv1.TypeLeadRecorded, &eventsv1.LeadRecorded{EventId: 3, ProgramId: 7, CustomerId: 1, Status: "settled", RecordedAt: ts, SignupDate: ts})
		apply(t, pool, consumer.Tracking, eventsv1.TypeLeadRecorded, &eventsv1.LeadRecorded{EventId: 4, ProgramId: 7, CustomerId: 3, Status: "provisional", RecordedAt: ts})
		apply(t, pool, consumer.Tracking, eventsv1.TypeCustomerConverted, &eventsv1.CustomerConverted{ProgramId: 7, CustomerId: 1, SignupDate: ts, FirstPurchaseDate: ts})
		// Converted without a lead: a conversion, not a lead.
		apply(t, pool, consumer.Tracking, eventsv1.TypeCustomerConverted, &eventsv1.CustomerConverted{ProgramId: 7, CustomerId: 4, FirstPurchaseDate: ts})
		apply(t, pool, consumer.Commissions, eventsv1.TypeLedgerSaleRecorded, &eventsv1.LedgerSaleRecorded{SaleId: 9, ProgramId: 7, CustomerId: 1, AmountCents: 2500, Currency: "EUR", OccurredAt: ts})
		apply(t, pool, consumer.Commissions, eventsv1.TypeLedgerSaleRecorded, &eventsv1.LedgerSaleRecorded{SaleId: 10, ProgramId: 7, AmountCents: 999, Currency: "USD", OccurredAt: ts, IsTest: true})
		apply(t, pool, consumer.Commissions, eventsv1.TypeCommissionCreated, &eventsv1.CommissionCreated{CommissionId: 11, ProgramId: 7, Amount: 250, Currency: "EUR", CreatedAt: ts})
	}
	var clicks, leads, conversions, sales, revenue, commission int64
	var bucket time.Time
	if err := pool.QueryRow(context.Background(), `SELECT a.bucket, clicks, leads, conversions, sales, revenue_minor, commission_minor
		FROM activity_buckets a JOIN money_buckets m USING (program_id, bucket) WHERE program_id = 7`).
		Scan(&bucket, &clicks, &leads, &conversions, &sales, &revenue, &commission); err != nil {
		t.Fatal(err)
	}
	if !bucket.Equal(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)) || clicks != 1 || leads != 1 || conversions != 2 || sales != 1 || revenue != 2500 || commission != 250 {
		t.Fatalf("bucket %s: clicks %d leads %d conversions %d sales %d revenue %d commission %d", bucket, clicks, leads, conversions, sales, revenue, commission)
	}
	var tests int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM test_events WHERE program_id = 7 AND kind = 'click'`).Scan(&tests); err != nil || tests != 1 {
		t.Fatalf("test clicks kept: %d %v", tests, err)
	}
	// Sources and partners count once too: customer 1's lead, conversion
	// and EUR sale under the source of its click; customer 4 (no click
	// seen) under the empty source; no partner, no partner figures.
	type figures struct{ clicks, leads, conversions, revenue int64 }
	got := map[string]figures{}
	rows, err := pool.Query(context.Background(), `SELECT s.referrer || ' ' || s.landing_page, COALESCE(sum(b.clicks), 0), COALESCE(sum(b.leads), 0),
			COALESCE(sum(b.conversions), 0), COALESCE((SELECT sum(revenue_minor) FROM source_money m WHERE m.source_id = s.id), 0)
		FROM sources s LEFT JOIN source_buckets b ON b.source_id = s.id WHERE s.program_id = 7 GROUP BY s.id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var f figures
		if err := rows.Scan(&name, &f.clicks, &f.leads, &f.conversions, &f.revenue); err != nil {
			t.Fatal(err)
		}
		got[name] = f
	}
	if rows.Err() != nil || len(got) != 2 || got["google.com (unknown)"] != (figures{1, 1, 1, 2500}) || got["(direct) (unknown)"] != (figures{0, 0, 1, 0}) {
		t.Fatalf("sources: %+v %v", got, rows.Err())
	}
	var partnerRows int
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM partner_buckets) + (SELECT count(*) FROM partner_money)`).Scan(&partnerRows); err != nil || partnerRows != 0 {
		t.Fatalf("partner rows without a partner: %d %v", partnerRows, err)
	}
}

// Status keeps the latest 10 test events of a kind.
func TestTestEventsKeepTheLatestTen(t *testing.T) {
	pool := setup(t)
	for i := range 14 {
		at := timestamppb.New(t0.Add(time.Duration(i) * time.Minute))
		apply(t, pool, consumer.Tracking, eventsv1.TypeLeadRecorded, &eventsv1.LeadRecorded{EventId: int64(100 + i), ProgramId: 8, IsTest: true, ViaApiKey: true, Status: "settled", RecordedAt: at})
	}
	var n, oldest int64
	if err := pool.QueryRow(context.Background(), `SELECT count(*), min(event_id) FROM test_events WHERE program_id = 8 AND kind = 'lead'`).Scan(&n, &oldest); err != nil {
		t.Fatal(err)
	}
	if n != 10 || oldest != 104 {
		t.Fatalf("%d kept, oldest %d; want the latest 10 (104..113)", n, oldest)
	}
}

// A batch folded by TrackingBatch makes the figures Tracking makes event by
// event, and a batch applied again (a replay) changes nothing.
func TestTrackingBatchEqualsOneByOne(t *testing.T) {
	ts := func(m int) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(m) * time.Minute)) }
	var envs []*eventsv1.Envelope
	add := func(typ string, msg proto.Message) {
		payload, err := proto.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, &eventsv1.Envelope{Id: fmt.Sprint(len(envs)), Type: typ, Payload: payload, OccurredAt: ts(0)})
	}
	for i := range 40 {
		ref := []string{"", "https://google.com/x", "https://news.example/"}[i%3]
		add(eventsv1.TypeClickRecorded, &eventsv1.ClickRecorded{EventId: int64(100 + i), ProgramId: 7 + int64(i%2), CustomerId: int64(1 + i%9), NewCustomer: i < 9,
			PartnerId: int64(i % 4), ReferrerUrl: ref, AffiliateUrl: "https://brand.example/p?utm_source=s" + fmt.Sprint(i%2), ClickedAt: ts(i * 7)})
	}
	add(eventsv1.TypeClickRecorded, &eventsv1.ClickRecorded{EventId: 105, ProgramId: 8, CustomerId: 6, ClickedAt: ts(3)}) // a repeat
	add(eventsv1.TypeClickRecorded, &eventsv1.ClickRecorded{EventId: 900, ProgramId: 7, IsTest: true, ViaApiKey: true, ClickedAt: ts(5)})
	add(eventsv1.TypeLeadRecorded, &eventsv1.LeadRecorded{EventId: 901, ProgramId: 7, CustomerId: 3, PartnerId: 2, Status: "settled", RecordedAt: ts(50), SignupDate: ts(50)})
	add(eventsv1.TypeCustomerConverted, &eventsv1.CustomerConverted{ProgramId: 8, CustomerId: 2, PartnerId: 1, FirstPurchaseDate: ts(90)})

	snapshot := func(pool *pgxpool.Pool) string {
		var s string
		if err := pool.QueryRow(context.Background(), `SELECT concat_ws(E'\n',
			(SELECT string_agg(t::text, ',' ORDER BY t::text) FROM activity_buckets t),
			(SELECT string_agg(t::text, ',' ORDER BY t::text) FROM activity_days t),
			(SELECT string_agg(t::text, ',' ORDER BY t::text) FROM partner_buckets t),
			(SELECT string_agg(t::text, ',' ORDER BY t::text) FROM counted t),
			(SELECT string_agg(t::text, ',' ORDER BY t::text) FROM customers t),
			(SELECT string_agg(t::text, ',' ORDER BY t::text) FROM test_events t),
			(SELECT string_agg(r, ',' ORDER BY r) FROM (SELECT (b.program_id, b.bucket, b.clicks, b.leads, b.conversions, s.referrer, s.utm_source)::text AS r
				FROM source_buckets b JOIN sources s ON s.id = b.source_id) x),
			(SELECT string_agg(r, ',' ORDER BY r) FROM (SELECT (c.customer_id, s.referrer, s.utm_source)::text AS r
				FROM customer_sources c JOIN sources s ON s.id = c.source_id) x),
			(SELECT string_agg(r, ',' ORDER BY r) FROM (SELECT (m.program_id, m.bucket, m.currency, m.revenue_minor, s.referrer, s.utm_source, s.landing_page)::text AS r
				FROM source_money m JOIN sources s ON s.id = m.source_id) x),
			(SELECT count(*) FROM unsourced_sales))`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Sales of three customers applied before any click (the ledger's
	// topic ahead of tracking's): two in one bucket and currency.
	sales := func(pool *pgxpool.Pool) {
		for i, c := range []int64{1, 2, 4} {
			apply(t, pool, consumer.Commissions, eventsv1.TypeLedgerSaleRecorded, &eventsv1.LedgerSaleRecorded{
				SaleId: 50 + int64(i), ProgramId: 7, CustomerId: c, AmountCents: 1000 * (int64(i) + 1), Currency: []string{"EUR", "EUR", "USD"}[i], OccurredAt: ts(0)})
		}
	}
	oneByOne := setup(t)
	sales(oneByOne)
	for _, env := range envs {
		if err := pg.InTx(context.Background(), oneByOne, func(tx pgx.Tx) error { return consumer.Tracking(context.Background(), tx, env) }); err != nil {
			t.Fatal(err)
		}
	}
	batched := setup(t)
	sales(batched)
	for range 2 {
		if err := pg.InTx(context.Background(), batched, func(tx pgx.Tx) error { return consumer.TrackingBatch(context.Background(), tx, envs) }); err != nil {
			t.Fatal(err)
		}
	}
	want, got := snapshot(oneByOne), snapshot(batched)
	if got != want {
		t.Fatalf("batched:\n%s\n\none by one:\n%s", got, want)
	}
	var clicks int64
	if err := batched.QueryRow(context.Background(), `SELECT sum(clicks) FROM activity_buckets`).Scan(&clicks); err != nil || clicks != 40 {
		t.Fatalf("%d clicks counted (%v), want 40", clicks, err)
	}
	// Every sale moved under its customer's click: none left unsourced,
	// none on the empty source, the revenue whole.
	var unsourced, revenue int64
	if err := batched.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM unsourced_sales),
		(SELECT count(*) FROM source_money m JOIN sources s ON s.id = m.source_id WHERE s.landing_page = '(unknown)'),
		(SELECT sum(revenue_minor) FROM source_money)`).Scan(&unsourced, &clicks, &revenue); err != nil || unsourced != 0 || clicks != 0 || revenue != 6000 {
		t.Fatalf("%d unsourced rows, %d rows on the empty source, revenue %d (%v); want 0, 0, 6000", unsourced, clicks, revenue, err)
	}
}

// The ledger's sales and tracking's clicks come on two topics, in either
// order: a sale applied before the click that made its customer is booked
// under the empty source until that click arrives, then moved under the
// click's source. A customer no click ever names keeps it there.
func TestSaleBeforeItsClickMovesToTheClicksSource(t *testing.T) {
	pool := setup(t)
	ctx := context.Background()
	ts := timestamppb.New(t0)
	money := func() map[string]int64 {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT s.referrer || '/' || s.utm_source || '/' || m.currency, m.revenue_minor
			FROM source_money m JOIN sources s ON s.id = m.source_id WHERE m.program_id = 7`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		var k string
		var v int64
		if _, err := pgx.ForEachRow(rows, []any{&k, &v}, func() error { out[k] = v; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// Customer 1's sale first (twice: a redelivery counts once), then its click.
	for range 2 {
		apply(t, pool, consumer.Commissions, eventsv1.TypeLedgerSaleRecorded, &eventsv1.LedgerSaleRecorded{SaleId: 21, ProgramId: 7, CustomerId: 1, AmountCents: 2500, Currency: "EUR", OccurredAt: ts})
	}
	// Customer 2 never has a click (a lead without one).
	apply(t, pool, consumer.Commissions, eventsv1.TypeLedgerSaleRecorded, &eventsv1.LedgerSaleRecorded{SaleId: 22, ProgramId: 7, CustomerId: 2, AmountCents: 700, Currency: "EUR", OccurredAt: ts})
	if got := fmt.Sprint(money()); got != "map[(direct)/(none)/EUR:3200]" {
		t.Fatalf("before the click: %s", got)
	}
	for range 2 {
		apply(t, pool, consumer.Tracking, eventsv1.TypeClickRecorded, &eventsv1.ClickRecorded{EventId: 31, ProgramId: 7, CustomerId: 1, NewCustomer: true,
			ReferrerUrl: "https://www.google.com/", AffiliateUrl: "https://brand.example/?via=X&utm_source=news", ClickedAt: ts})
	}
	if got := fmt.Sprint(money()); got != "map[(direct)/(none)/EUR:700 google.com/news/EUR:2500]" {
		t.Fatalf("after the click: %s", got)
	}
	// A later sale of customer 1 goes straight to its source; a second
	// click of the customer moves nothing.
	apply(t, pool, consumer.Commissions, eventsv1.TypeLedgerSaleRecorded, &eventsv1.LedgerSaleRecorded{SaleId: 23, ProgramId: 7, CustomerId: 1, AmountCents: 100, Currency: "EUR", OccurredAt: ts})
	apply(t, pool, consumer.Tracking, eventsv1.TypeClickRecorded, &eventsv1.ClickRecorded{EventId: 32, ProgramId: 7, CustomerId: 1, ReferrerUrl: "https://bing.com/", ClickedAt: ts})
	if got := fmt.Sprint(money()); got != "map[(direct)/(none)/EUR:700 google.com/news/EUR:2600]" {
		t.Fatalf("after a later sale and click: %s", got)
	}
	// Customer 3's sale alone under the empty source, then its click: the
	// emptied row goes, it does not stay at zero.
	apply(t, pool, consumer.Commissions, eventsv1.TypeLedgerSaleRecorded, &eventsv1.LedgerSaleRecorded{SaleId: 24, ProgramId: 7, CustomerId: 3, AmountCents: 900, Currency: "USD", OccurredAt: ts})
	apply(t, pool, consumer.Tracking, eventsv1.TypeClickRecorded, &eventsv1.ClickRecorded{EventId: 33, ProgramId: 7, CustomerId: 3, NewCustomer: true, ReferrerUrl: "https://bing.com/", ClickedAt: ts})
	if got := fmt.Sprint(money()); got != "map[(direct)/(none)/EUR:700 bing.com/(none)/USD:900 google.com/news/EUR:2600]" {
		t.Fatalf("customer 3: %s", got)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM unsourced_sales`).Scan(&left); err != nil || left != 1 {
		t.Fatalf("%d unsourced rows (%v), want customer 2's", left, err)
	}
}

// A sale and its customer's click applied at the same time, by the two
// topics' consumers: whichever transaction commits second sees the other's
// row (the customer's source row is their meeting point), so the money
// ends under the click's source in both orders. The sale is two days after
// the click (a consumer catching up), so no day's figures row is shared.
func TestSaleAndClickAppliedConcurrently(t *testing.T) {
	ctx := context.Background()
	ts, later := timestamppb.New(t0), timestamppb.New(t0.Add(48*time.Hour))
	envelope := func(typ string, msg proto.Message) *eventsv1.Envelope {
		payload, err := proto.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		return &eventsv1.Envelope{Id: typ, Type: typ, Payload: payload, OccurredAt: ts}
	}
	sale := func(tx pgx.Tx) error {
		return consumer.Commissions(ctx, tx, envelope(eventsv1.TypeLedgerSaleRecorded,
			&eventsv1.LedgerSaleRecorded{SaleId: 41, ProgramId: 7, CustomerId: 1, AmountCents: 1500, Currency: "EUR", OccurredAt: later}))
	}
	click := func(tx pgx.Tx) error {
		return consumer.Tracking(ctx, tx, envelope(eventsv1.TypeClickRecorded, &eventsv1.ClickRecorded{EventId: 42, ProgramId: 7, CustomerId: 1, NewCustomer: true,
			ReferrerUrl: "https://www.google.com/", ClickedAt: ts}))
	}
	for _, saleFirst := range []bool{true, false} {
		pool := setup(t)
		first, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// On a failure, before the pool closes (a no-op once committed).
		defer func() { _ = first.Rollback(ctx) }()
		if saleFirst {
			err = sale(first)
		} else {
			err = click(first)
		}
		if err != nil {
			t.Fatal(err)
		}
		second := make(chan error, 1)
		go func() {
			second <- pg.InTx(ctx, pool, func(tx pgx.Tx) error {
				if saleFirst {
					return click(tx)
				}
				return sale(tx)
			})
		}()
		// The second waits on the first's row before the first commits.
		deadline := time.Now().Add(10 * time.Second)
		for {
			var waiting int
			if err := first.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if waiting > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sale first %v: the second transaction never waited on the first", saleFirst)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := first.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-second; err != nil {
			t.Fatal(err)
		}
		var where string
		var unsourced int
		if err := pool.QueryRow(ctx, `SELECT (SELECT string_agg(s.referrer || ':' || m.revenue_minor, ',') FROM source_money m JOIN sources s ON s.id = m.source_id),
			(SELECT count(*) FROM unsourced_sales)`).Scan(&where, &unsourced); err != nil {
			t.Fatal(err)
		}
		if where != "google.com:1500" || unsourced != 0 {
			t.Fatalf("sale first %v: money %q, %d unsourced rows; want all under google.com", saleFirst, where, unsourced)
		}
	}
}
