package pgstore_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/services/commissions/internal/processor"
	"github.com/svc-dev/svc/services/commissions/internal/processor/pgstore"
	"github.com/svc-dev/svc/services/commissions/migrations"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// The store against the real Postgres, on its own database: events once,
// programs by account, and payment references linked only to a recorded
// sale of the event's program.
func TestStore(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	if err := pg.Migrate(ctx, dsn, "commissions", migrations.FS, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	pool, err := pg.NewPool(ctx, dsn, pg.Options{Schema: "commissions", MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, q := range []string{
		`INSERT INTO programs (id, advertiser_id, commission_type, commission_rate, duration_months, hold_days, catalog_seq, updated_at,
			payment_tracking_mode, processor_status, processor_account_id)
			VALUES (1, 1, 'percent', '10', 0, 0, 1, now(), 'processor_connect', 'connected', 'acct_1'),
			       (2, 1, 'percent', '10', 0, 0, 1, now(), 's2s', 'connected', 'acct_2')`,
		`INSERT INTO sales (id, transaction_id, program_id, customer_id, partner_id, amount_cents, currency, is_test, source, reserved, occurred_at, created_at)
			VALUES (10, 'pi_recorded', 1, 1, 1, 100, 'USD', false, 'processor', false, now(), now()),
			       (11, 'pi_reserved', 1, 1, 1, 100, 'USD', false, 'processor', true, now(), now()),
			       (12, 'pi_other', 2, 1, 1, 100, 'USD', false, 'api', false, now(), now())`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s := pgstore.New(pool)
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("programs by account and by id, with their mode", func(t *testing.T) {
		p, ok, err := s.ProgramByAccount(ctx, "acct_2")
		if err != nil || !ok || p.ID != 2 || p.PaymentTrackingMode != "s2s" {
			t.Fatalf("%+v %v %v", p, ok, err)
		}
		if _, ok, err := s.ProgramByAccount(ctx, "acct_unknown"); ok || err != nil {
			t.Fatalf("unknown account: %v %v", ok, err)
		}
		if p, ok, err := s.Program(ctx, 1); !ok || err != nil || p.PaymentTrackingMode != "processor_connect" {
			t.Fatalf("%+v %v %v", p, ok, err)
		}
	})
	t.Run("an event once; references of a recorded sale of its program only", func(t *testing.T) {
		rec := processor.Record{
			Event:     processor.Event{ID: "evt_1", Type: processor.TypeCheckoutCompleted, AccountID: "acct_1", Livemode: true, Payload: []byte(`{"id":"evt_1"}`)},
			ProgramID: 1, Outcome: processor.OutcomeSaleRecorded, SaleID: 10, ReceivedAt: t0,
			Refs: []processor.PaymentRef{{Ref: "pi_recorded", Kind: processor.RefPaymentIntent}, {Ref: "cs_1", Kind: processor.RefCheckoutSession}},
		}
		if seen, err := s.EventSeen(ctx, "evt_1"); seen || err != nil {
			t.Fatalf("%v %v", seen, err)
		}
		if dup, err := s.Save(ctx, rec); dup || err != nil {
			t.Fatalf("%v %v", dup, err)
		}
		if seen, _ := s.EventSeen(ctx, "evt_1"); !seen {
			t.Fatal("not seen")
		}
		if dup, err := s.Save(ctx, rec); !dup || err != nil {
			t.Fatalf("second save: %v %v", dup, err)
		}
		if r, ok, err := s.SaleFor(ctx, 1, []string{"ch_unknown", "cs_1"}); !ok || err != nil || r != (processor.SaleRef{ID: 10, ProgramID: 1, TransactionID: "pi_recorded", Currency: "USD"}) {
			t.Fatalf("%+v %v %v", r, ok, err)
		}
		for _, r := range []processor.Record{
			{Event: processor.Event{ID: "evt_2", Type: processor.TypeInvoicePaid, Payload: []byte(`{}`)}, ProgramID: 1, SaleID: 11, ReceivedAt: t0,
				Outcome: processor.OutcomeDuplicateSale, Refs: []processor.PaymentRef{{Ref: "in_reserved", Kind: processor.RefInvoice}}},
			{Event: processor.Event{ID: "evt_3", Type: processor.TypeInvoicePaid, Payload: []byte(`{}`)}, ProgramID: 1, SaleID: 12, ReceivedAt: t0,
				Outcome: processor.OutcomeDuplicateSale, Refs: []processor.PaymentRef{{Ref: "in_other", Kind: processor.RefInvoice}}},
			{Event: processor.Event{ID: "evt_4", Type: processor.TypeInvoicePaid, Payload: []byte(`{}`)}, ProgramID: 1, SaleID: 10, ReceivedAt: t0,
				Outcome: processor.OutcomeDuplicateSale, Refs: []processor.PaymentRef{{Ref: "cs_1", Kind: processor.RefInvoice}}},
		} {
			if dup, err := s.Save(ctx, r); dup || err != nil {
				t.Fatalf("%s: %v %v", r.ID, dup, err)
			}
		}
		if n := count(`SELECT count(*) FROM payment_refs WHERE ref IN ('in_reserved', 'in_other')`); n != 0 {
			t.Fatalf("%d references linked to a reserved sale or another program's", n)
		}
		if n := count(`SELECT count(*) FROM payment_refs WHERE ref = 'cs_1' AND kind = 'checkout_session' AND sale_id = 10`); n != 1 {
			t.Fatal("a reference linked before lost its sale")
		}
		// The reserved sale can still be released (no reference holds it).
		if _, err := pool.Exec(ctx, `DELETE FROM sales WHERE id = 11`); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the sale of a refund: by reference, by transaction id, never reserved, test or of another program", func(t *testing.T) {
		for _, tc := range []struct {
			program int64
			refs    []string
			want    int64
		}{
			{1, []string{"pi_recorded"}, 10}, // its transaction id (no reference linked)
			{0, []string{"cs_1"}, 10},        // any program: the reference's
			{2, []string{"cs_1"}, 0},         // another program's reference
			{1, []string{"pi_reserved"}, 0},  // reserved: not recorded yet
			{1, []string{"pi_other"}, 0},     // another program's sale
			{2, []string{"pi_other"}, 12},
			{1, []string{"ch_nothing"}, 0},
		} {
			r, ok, err := s.SaleFor(ctx, tc.program, tc.refs)
			if err != nil || ok != (tc.want != 0) || r.ID != tc.want {
				t.Fatalf("program %d refs %v: %+v %v %v, want sale %d", tc.program, tc.refs, r, ok, err, tc.want)
			}
		}
	})
	t.Run("waiting events: kept with their references, listed once their payment is recorded, resolved once", func(t *testing.T) {
		save := func(id string, program int64, refs ...string) {
			t.Helper()
			rec := processor.Record{
				Event:     processor.Event{ID: id, Type: processor.TypeRefundCreated, Livemode: true, Payload: []byte(`{"id":"` + id + `","data":{"object":{"id":"re_` + id + `","amount":5}}}`)},
				ProgramID: program, Outcome: processor.OutcomeAwaitingPayment, Waiting: refs, ReceivedAt: t0,
			}
			if dup, err := s.Save(ctx, rec); dup || err != nil {
				t.Fatalf("%v %v", dup, err)
			}
		}
		save("evt_w1", 1, "ch_later", "pi_later")
		save("evt_w2", 1, "pi_recorded") // its payment is recorded (transaction id)
		save("evt_w3", 0, "cs_1")        // recorded, found through the reference
		save("evt_w4", 2, "pi_recorded") // names program 1's sale from program 2
		ids := func(rs []processor.Record) (out []string) {
			for _, r := range rs {
				out = append(out, r.ID)
			}
			return out
		}
		got, err := s.Waiting(ctx, []string{"pi_later"}, time.Time{}, 10)
		if err != nil || len(got) != 1 || got[0].ID != "evt_w1" || got[0].ProgramID != 1 || got[0].Type != processor.TypeRefundCreated ||
			string(got[0].Object) != `{"id": "re_evt_w1", "amount": 5}` || len(got[0].Waiting) != 2 {
			t.Fatalf("%+v %v", got, err)
		}
		// The backstop's grace: payments recorded after recordedBefore are
		// the delivery's that recorded them.
		if got, err := s.Waiting(ctx, nil, t0.Add(-time.Hour), 10); err != nil || len(got) != 0 {
			t.Fatalf("within the grace: %v %v", ids(got), err)
		}
		got, err = s.Waiting(ctx, nil, time.Now().Add(time.Hour), 10)
		if err != nil || len(got) != 2 || got[0].ID != "evt_w2" || got[1].ID != "evt_w3" {
			t.Fatalf("recorded payments: %v %v", ids(got), err)
		}
		if err := s.Resolve(ctx, "evt_w2", processor.OutcomeRefundApplied, 10); err != nil {
			t.Fatal(err)
		}
		if err := s.Resolve(ctx, "evt_w2", processor.OutcomeRefundSkipped, 0); err != nil {
			t.Fatal(err)
		}
		if n := count(`SELECT count(*) FROM processor_events WHERE event_id = 'evt_w2' AND outcome = 'refund_applied' AND sale_id = 10`); n != 1 {
			t.Fatal("not resolved once")
		}
		if got, _ := s.Waiting(ctx, nil, time.Now().Add(time.Hour), 10); len(got) != 1 || got[0].ID != "evt_w3" {
			t.Fatalf("after resolve: %v", ids(got))
		}
		if n, oldest, err := s.WaitingStats(ctx); err != nil || n != 3 || !oldest.Equal(t0) {
			t.Fatalf("stats: %d %v %v, want 3 since t0", n, oldest, err)
		}
	})
}
