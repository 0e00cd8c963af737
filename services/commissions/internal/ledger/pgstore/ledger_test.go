package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
	"github.com/svc-dev/svc/services/commissions/internal/ledger/pgstore"
	"github.com/svc-dev/svc/services/commissions/internal/money"
	"github.com/svc-dev/svc/services/commissions/migrations"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

type env struct {
	pool  *pgxpool.Pool
	store *pgstore.Store
	svc   *ledger.Service
	clock *platformtest.Clock
}

// open gives the test its own database with the commissions schema, the
// outbox tables and a service on an injected clock at t0.
func open(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	logger := slog.New(slog.DiscardHandler)
	if err := pg.Migrate(ctx, dsn, "commissions", migrations.FS, logger); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, dsn, "commissions", logger); err != nil {
		t.Fatal(err)
	}
	pool, err := pg.NewPool(ctx, dsn, pg.Options{Schema: "commissions", MaxConns: 24})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// Cleanups run last-in first-out: this one sees the pool still open,
	// after whatever the test did.
	t.Cleanup(func() { checkProgramMoney(t, pool) })
	e := &env{pool: pool, store: pgstore.New(pool), clock: platformtest.NewClock(t0)}
	e.svc = e.service(t, 0)
	return e
}

func (e *env) service(t *testing.T, batch int) *ledger.Service {
	t.Helper()
	svc, err := ledger.New(ledger.Config{Store: e.store, Now: e.clock.Now, ApproveBatch: batch})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

type terms struct {
	typ, rate, currency string
	duration, hold      int
}

// program puts a program in the catalog replica.
func (e *env) program(t *testing.T, id int64, p terms) {
	t.Helper()
	e.exec(t, `INSERT INTO programs (id, advertiser_id, commission_type, commission_rate, duration_months, hold_days,
			currency, lead_commission, catalog_seq, updated_at)
		VALUES ($1::bigint, $1::bigint + 1000, $2, $3, $4, $5, $6, '0', 1, now())`, id, p.typ, p.rate, p.duration, p.hold, p.currency)
}

func (e *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := e.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (e *env) count(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// events counts the outbox rows of each event type.
func (e *env) events(t *testing.T) map[string]int {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT event_type, count(*) FROM outbox WHERE topic = $1 GROUP BY event_type`, eventsv1.TopicCommissions)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var typ string
		var n int
		if err := rows.Scan(&typ, &n); err != nil {
			t.Fatal(err)
		}
		out[typ] = n
	}
	return out
}

func sameEvents(t *testing.T, got, want map[string]int) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outbox events = %v, want %v", got, want)
	}
}

func (e *env) sale(t *testing.T, in ledger.SaleInput) ledger.SaleResult {
	t.Helper()
	if in.Source == "" {
		in.Source = ledger.SourceAPI
	}
	if in.Currency == "" {
		in.Currency = "USD"
	}
	if in.PartnerID == 0 {
		in.PartnerID = 7
	}
	res, err := e.svc.RecordSale(context.Background(), in)
	if err != nil {
		t.Fatalf("record sale %s: %v", in.TransactionID, err)
	}
	return res
}

func (e *env) balance(t *testing.T, partner int64, cur money.Currency) int64 {
	t.Helper()
	bs, err := e.svc.Balances(context.Background(), partner)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Amount.Currency == cur {
			return b.Amount.Minor
		}
	}
	return 0
}

func (e *env) refund(t *testing.T, in ledger.RefundInput) ledger.RefundResult {
	t.Helper()
	r, err := e.svc.Refund(context.Background(), in)
	if err != nil {
		t.Fatalf("refund %+v: %v", in, err)
	}
	return r
}

func commissionAmount(t *testing.T, res ledger.SaleResult) money.Amount {
	t.Helper()
	if res.Commission == nil {
		t.Fatalf("sale %s: no commission (%s)", res.Sale.TransactionID, res.NoCommission)
	}
	return res.Commission.Amount
}

// TestSaleCommission checks each money rule end to end through the store.
func TestSaleCommission(t *testing.T) {
	e := open(t)
	ctx := context.Background()

	t.Run("percent pays on the customer's first sale only", func(t *testing.T) {
		e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 30})
		first := e.sale(t, ledger.SaleInput{TransactionID: "p-1", ProgramID: 1, CustomerID: 11, AmountCents: 10000})
		if got := commissionAmount(t, first); got != (money.Amount{Minor: 1000, Currency: money.USD}) {
			t.Fatalf("commission = %v", got)
		}
		second := e.sale(t, ledger.SaleInput{TransactionID: "p-2", ProgramID: 1, CustomerID: 11, AmountCents: 10000})
		if second.Commission != nil || second.NoCommission != string(money.ReasonAlreadyCommissioned) {
			t.Fatalf("second sale: %+v", second)
		}
		other := e.sale(t, ledger.SaleInput{TransactionID: "p-3", ProgramID: 1, CustomerID: 12, AmountCents: 2000})
		if got := commissionAmount(t, other); got.Minor != 200 {
			t.Fatalf("other customer's commission = %v", got)
		}
	})

	t.Run("recurring percent pays within duration_months of the first commissioned sale", func(t *testing.T) {
		e.program(t, 2, terms{typ: "recurring_percent", rate: "20", currency: "USD", duration: 2, hold: 30})
		start := t0.Add(-40 * day)
		for i, c := range []struct {
			at  time.Time
			due bool
		}{{start, true}, {money.AddMonths(start, 1), true}, {money.AddMonths(start, 2), false}} {
			res := e.sale(t, ledger.SaleInput{TransactionID: fmt.Sprintf("r-%d", i), ProgramID: 2, CustomerID: 21, AmountCents: 5000, OccurredAt: c.at})
			if (res.Commission != nil) != c.due {
				t.Fatalf("renewal %d at %s: commission %+v, reason %q", i, c.at, res.Commission, res.NoCommission)
			}
			if c.due && res.Commission.Amount.Minor != 1000 {
				t.Fatalf("renewal %d: %v", i, res.Commission.Amount)
			}
			if !c.due && res.NoCommission != string(money.ReasonDurationEnded) {
				t.Fatalf("renewal %d: reason %q", i, res.NoCommission)
			}
		}
	})

	t.Run("fixed pays in the program's currency whatever the sale's", func(t *testing.T) {
		e.program(t, 3, terms{typ: "fixed", rate: "5", currency: "EUR", hold: 30})
		res := e.sale(t, ledger.SaleInput{TransactionID: "f-1", ProgramID: 3, CustomerID: 31, AmountCents: 123456, Currency: "USD"})
		if got := commissionAmount(t, res); got != (money.Amount{Minor: 500, Currency: money.EUR}) {
			t.Fatalf("commission = %v", got)
		}
	})

	t.Run("VND rounds half up to whole dong; a tiny percent rounds to nothing", func(t *testing.T) {
		e.program(t, 4, terms{typ: "percent", rate: "12.5", currency: "VND", hold: 30})
		res := e.sale(t, ledger.SaleInput{TransactionID: "v-1", ProgramID: 4, CustomerID: 41, AmountCents: 1005, Currency: "vnd"})
		if got := commissionAmount(t, res); got != (money.Amount{Minor: 126, Currency: money.VND}) { // 125.625
			t.Fatalf("commission = %v", got)
		}
		tiny := e.sale(t, ledger.SaleInput{TransactionID: "v-2", ProgramID: 4, CustomerID: 42, AmountCents: 3, Currency: "VND"})
		if tiny.Commission != nil || tiny.NoCommission != string(money.ReasonRoundsToZero) {
			t.Fatalf("tiny sale: %+v", tiny)
		}
	})

	t.Run("hold 0 approves and credits at creation", func(t *testing.T) {
		e.program(t, 5, terms{typ: "percent", rate: "10", currency: "USD", hold: 0})
		res := e.sale(t, ledger.SaleInput{TransactionID: "h0-1", ProgramID: 5, CustomerID: 51, PartnerID: 501, AmountCents: 10000})
		c := res.Commission
		if c == nil || c.Status != money.StatusApproved || !c.Credited || c.ApprovedAt == nil || !c.ApprovedAt.Equal(t0) {
			t.Fatalf("commission = %+v", c)
		}
		if got := e.balance(t, 501, money.USD); got != 1000 {
			t.Fatalf("balance = %d", got)
		}
		// (ApproveDue approves the earlier subtests' commissions; not this one again.)
		if _, err := e.svc.ApproveDue(ctx, t0.Add(365*day)); err != nil {
			t.Fatal(err)
		}
		if got := e.balance(t, 501, money.USD); got != 1000 {
			t.Fatalf("balance after ApproveDue = %d", got)
		}
	})

	t.Run("hold 30 keeps it pending until the injected clock reaches hold_until", func(t *testing.T) {
		e.program(t, 6, terms{typ: "percent", rate: "10", currency: "USD", hold: 30})
		res := e.sale(t, ledger.SaleInput{TransactionID: "h30-1", ProgramID: 6, CustomerID: 61, PartnerID: 601, AmountCents: 10000})
		c := res.Commission
		if c == nil || c.Status != money.StatusPending || c.Credited || !c.HoldUntil.Equal(t0.Add(30*day)) {
			t.Fatalf("commission = %+v", c)
		}
		if n, err := e.svc.ApproveDue(ctx, t0.Add(30*day-time.Second)); err != nil || n != 0 {
			t.Fatalf("ApproveDue before the hold ends = %d, %v", n, err)
		}
		if got := e.balance(t, 601, money.USD); got != 0 {
			t.Fatalf("balance = %d", got)
		}
		if n, err := e.svc.ApproveDue(ctx, t0.Add(30*day)); err != nil || n < 1 {
			t.Fatalf("ApproveDue = %d, %v", n, err)
		}
		got, err := e.svc.Commission(ctx, c.ID)
		if err != nil || got.Status != money.StatusApproved || !got.Credited {
			t.Fatalf("after ApproveDue: %+v, %v", got, err)
		}
		if got := e.balance(t, 601, money.USD); got != 1000 {
			t.Fatalf("balance = %d", got)
		}
	})

	t.Run("a test sale earns nothing", func(t *testing.T) {
		res := e.sale(t, ledger.SaleInput{TransactionID: "t-1", ProgramID: 1, CustomerID: 19, AmountCents: 10000, Test: true})
		if res.Commission != nil || res.NoCommission != string(money.ReasonTestSale) {
			t.Fatalf("test sale: %+v", res)
		}
	})

	t.Run("a sale without partner is stored without commission", func(t *testing.T) {
		_, err := e.svc.RecordSale(ctx, ledger.SaleInput{TransactionID: "np-1", ProgramID: 1, CustomerID: 18, AmountCents: 100, Currency: "USD", Source: "api"})
		var nc *ledger.CommissionNotCreatedError
		if !errors.As(err, &nc) || nc.SaleID == 0 || !errors.Is(err, ledger.ErrPartnerRequired) || errkind.Of(err) != errkind.Invalid {
			t.Fatalf("err = %v", err)
		}
		s, err := e.svc.SaleByTransaction(ctx, 1, "np-1")
		if err != nil || s.ID != nc.SaleID || s.CommissionState != ledger.StateNoPartner {
			t.Fatalf("stored sale = %+v, %v", s, err)
		}
	})

	t.Run("unsupported currency is refused before anything is stored", func(t *testing.T) {
		_, err := e.svc.RecordSale(ctx, ledger.SaleInput{TransactionID: "gbp-1", ProgramID: 1, CustomerID: 17, PartnerID: 7, AmountCents: 100, Currency: "GBP", Source: "api"})
		if errkind.Of(err) != errkind.Unprocessable {
			t.Fatalf("err = %v", err)
		}
		if _, err := e.svc.SaleByTransaction(ctx, 0, "gbp-1"); !errors.Is(err, ledger.ErrSaleNotFound) {
			t.Fatalf("lookup: %v", err)
		}
	})
}

func TestUnknownProgramLeavesTheSaleToTheBackstop(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	_, err := e.svc.RecordSale(ctx, ledger.SaleInput{TransactionID: "late-1", ProgramID: 9, CustomerID: 91, PartnerID: 7, AmountCents: 10000, Currency: "USD", Source: "processor"})
	var nc *ledger.CommissionNotCreatedError
	if !errors.As(err, &nc) || !errors.Is(err, ledger.ErrProgramUnknown) || errkind.Of(err) != errkind.Internal {
		t.Fatalf("err = %v", err)
	}
	sameEvents(t, e.events(t), map[string]int{eventsv1.TypeLedgerSaleRecorded: 1})
	ids, err := e.svc.SalesWithoutCommission(ctx, t0.Add(time.Second), 10)
	if err != nil || len(ids) != 1 || ids[0] != nc.SaleID {
		t.Fatalf("SalesWithoutCommission = %v, %v", ids, err)
	}
	if _, err := e.svc.EnsureCommission(ctx, nc.SaleID); !errors.Is(err, ledger.ErrProgramUnknown) {
		t.Fatalf("EnsureCommission without terms: %v", err)
	}

	e.program(t, 9, terms{typ: "percent", rate: "10", currency: "USD", hold: 30})
	const n = 20
	results := make([]ledger.EnsureResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], errs[i] = e.svc.EnsureCommission(ctx, nc.SaleID) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || results[i].Commission == nil || results[i].Commission.ID != results[0].Commission.ID || results[i].State != ledger.StateCreated {
			t.Fatalf("EnsureCommission %d: %+v, %v", i, results[i], errs[i])
		}
	}
	if got := e.count(t, `SELECT count(*) FROM commissions`); got != 1 {
		t.Fatalf("%d commissions", got)
	}
	sameEvents(t, e.events(t), map[string]int{eventsv1.TypeLedgerSaleRecorded: 1, eventsv1.TypeCommissionCreated: 1})
	if ids, err := e.svc.SalesWithoutCommission(ctx, t0.Add(time.Second), 10); err != nil || len(ids) != 0 {
		t.Fatalf("SalesWithoutCommission after = %v, %v", ids, err)
	}
}

func TestDuplicateTransactionID(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 30})
	e.program(t, 2, terms{typ: "percent", rate: "10", currency: "USD", hold: 30})
	first := e.sale(t, ledger.SaleInput{TransactionID: "tx-1", ProgramID: 1, CustomerID: 1, AmountCents: 10000})
	before := e.events(t)
	sameEvents(t, before, map[string]int{eventsv1.TypeLedgerSaleRecorded: 1, eventsv1.TypeCommissionCreated: 1})

	// Global scope: another program's sale with the id is refused too.
	for _, prog := range []int64{1, 2} {
		_, err := e.svc.RecordSale(ctx, ledger.SaleInput{TransactionID: "tx-1", ProgramID: prog, CustomerID: 2, PartnerID: 7, AmountCents: 500, Currency: "USD", Source: "api"})
		var dup *ledger.DuplicateSaleError
		if !errors.As(err, &dup) || dup.SaleID != first.Sale.ID || errkind.Of(err) != errkind.Conflict {
			t.Fatalf("program %d: err = %v", prog, err)
		}
	}
	sameEvents(t, e.events(t), before)
	if got := e.count(t, `SELECT count(*) FROM sales`); got != 1 {
		t.Fatalf("%d sales", got)
	}
}

func TestConcurrentRecordSaleOfOneTransaction(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 0})
	const n = 100
	errs := make([]error, n)
	ids := make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := e.svc.RecordSale(ctx, ledger.SaleInput{TransactionID: "same", ProgramID: 1, CustomerID: int64(i + 1), PartnerID: 7, AmountCents: 10000, Currency: "USD", Source: "api"})
			errs[i], ids[i] = err, res.Sale.ID
		})
	}
	wg.Wait()
	var ok, conflicts int
	var winner int64
	for i, err := range errs {
		if err == nil {
			ok++
			winner = ids[i]
		}
	}
	for _, err := range errs {
		var dup *ledger.DuplicateSaleError
		if errors.As(err, &dup) {
			conflicts++
			if dup.SaleID != winner {
				t.Fatalf("conflict names sale %d, the winner is %d", dup.SaleID, winner)
			}
		}
	}
	if ok != 1 || conflicts != n-1 {
		t.Fatalf("%d successes, %d conflicts; errors: %v", ok, conflicts, errs)
	}
	if got := e.count(t, `SELECT count(*) FROM commissions`); got != 1 {
		t.Fatalf("%d commissions", got)
	}
	if got := e.balance(t, 7, money.USD); got != 1000 {
		t.Fatalf("balance = %d", got)
	}
	sameEvents(t, e.events(t), map[string]int{eventsv1.TypeLedgerSaleRecorded: 1, eventsv1.TypeCommissionCreated: 1, eventsv1.TypeBalanceChanged: 1})
}

func TestConcurrentRefundsOfOneSale(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "7.5", currency: "USD", hold: 0})
	res := e.sale(t, ledger.SaleInput{TransactionID: "big", ProgramID: 1, CustomerID: 1, PartnerID: 8, AmountCents: 10001})
	commission := commissionAmount(t, res).Minor // 750.075 -> 750
	if commission != 750 {
		t.Fatalf("commission = %d", commission)
	}
	const n = 50
	results := make([]ledger.RefundResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = e.svc.Refund(ctx, ledger.RefundInput{ProgramID: 1, TransactionID: "big", AmountCents: 333, RefundID: fmt.Sprintf("re_%d", i), Reason: "refund"})
		})
	}
	wg.Wait()
	var deductions int64
	outcomes := map[string]int{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("refund %d: %v", i, errs[i])
		}
		outcomes[results[i].Outcome]++
		deductions += results[i].Deduction.Minor
	}
	// 10001 / 333: 30 refunds of 333, the 31st takes the last 11 and
	// reverses; the other 19 find it reversed.
	if outcomes["refunded"] != 30 || outcomes["reversed"] != 1 || outcomes["skipped"] != 19 {
		t.Fatalf("outcomes = %v", outcomes)
	}
	if deductions != commission {
		t.Fatalf("deductions add up to %d, commission %d", deductions, commission)
	}
	s, err := e.svc.SaleByTransaction(ctx, 1, "big")
	if err != nil || s.RefundedCents != 10001 {
		t.Fatalf("sale = %+v, %v", s, err)
	}
	c, err := e.svc.Commission(ctx, res.Commission.ID)
	if err != nil || c.Status != money.StatusReversed || c.Refunded != commission {
		t.Fatalf("commission = %+v, %v", c, err)
	}
	if got := e.balance(t, 8, money.USD); got != 0 {
		t.Fatalf("balance = %d", got)
	}
	if got := e.count(t, `SELECT sum(amount_cents) FROM refunds`); got != 10001 {
		t.Fatalf("refunds add up to %d", got)
	}
	if got := e.count(t, `SELECT sum(delta) FROM balance_entries WHERE kind = 'deduction'`); got != -commission {
		t.Fatalf("deduction entries add up to %d", got)
	}
	ev := e.events(t)
	if ev[eventsv1.TypeRefundRecorded] != 31 || ev[eventsv1.TypeNotificationCreated] != 31 || ev[eventsv1.TypeCommissionStatusChanged] != 31 {
		t.Fatalf("events = %v", ev)
	}
}

// TestRefund walks the spec's refund table (Commission status, POST /track/refund).
func TestRefund(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 30})
	e.program(t, 2, terms{typ: "percent", rate: "10", currency: "USD", hold: 0})
	var partner int64 = 100
	newSale := func(t *testing.T, prog int64, amount int64) (string, ledger.SaleResult, int64) {
		t.Helper()
		partner++
		tx := fmt.Sprintf("s-%d", partner)
		return tx, e.sale(t, ledger.SaleInput{TransactionID: tx, ProgramID: prog, CustomerID: partner, PartnerID: partner, AmountCents: amount}), partner
	}

	t.Run("pending partial refund cancels it whole with no balance change", func(t *testing.T) {
		tx, res, p := newSale(t, 1, 10000)
		r := e.refund(t, ledger.RefundInput{ProgramID: 1, TransactionID: tx, AmountCents: 3000, RefundID: "a", Reason: "damaged"})
		if r.Outcome != "refunded" || r.Deduction.Minor != 300 || r.Debit.Minor != 0 || r.CommissionID != res.Commission.ID {
			t.Fatalf("refund = %+v", r)
		}
		c, _ := e.svc.Commission(ctx, res.Commission.ID)
		if c.Status != money.StatusRefunded || c.Credited || c.Reason != "damaged" {
			t.Fatalf("commission = %+v", c)
		}
		if n, err := e.svc.ApproveDue(ctx, t0.Add(60*day)); err != nil || n != 0 {
			t.Fatalf("ApproveDue approved %d cancelled commissions: %v", n, err)
		}
		if e.balance(t, p, money.USD) != 0 || e.count(t, `SELECT count(*) FROM balance_entries WHERE partner_id = $1`, p) != 0 {
			t.Fatal("the balance moved")
		}
	})

	t.Run("approved partial refund deducts the refunded fraction from the balance", func(t *testing.T) {
		tx, _, p := newSale(t, 2, 10000)
		r := e.refund(t, ledger.RefundInput{ProgramID: 2, TransactionID: tx, AmountCents: 2500, RefundID: "a"})
		if r.Outcome != "refunded" || r.Deduction.Minor != 250 || r.Debit.Minor != 250 {
			t.Fatalf("refund = %+v", r)
		}
		if got := e.balance(t, p, money.USD); got != 750 {
			t.Fatalf("balance = %d", got)
		}
		// The rest reverses it, deducting what is left exactly.
		r = e.refund(t, ledger.RefundInput{ProgramID: 2, TransactionID: tx})
		if r.Outcome != "reversed" || r.Deduction.Minor != 750 || r.Applied != 7500 {
			t.Fatalf("full refund = %+v", r)
		}
		if got := e.balance(t, p, money.USD); got != 0 {
			t.Fatalf("balance = %d", got)
		}
		r = e.refund(t, ledger.RefundInput{ProgramID: 2, TransactionID: tx, AmountCents: 100, RefundID: "z"})
		if r.Outcome != "skipped" || r.SkipReason != money.SkipAlreadyReversed {
			t.Fatalf("after reversal = %+v", r)
		}
	})

	t.Run("a refund_id applied before is skipped and notifies once", func(t *testing.T) {
		tx, _, p := newSale(t, 2, 10000)
		before := e.events(t)
		first := e.refund(t, ledger.RefundInput{ProgramID: 2, TransactionID: tx, AmountCents: 1000, RefundID: "re_1", Reason: "chargeback"})
		again := e.refund(t, ledger.RefundInput{ProgramID: 2, TransactionID: tx, AmountCents: 1000, RefundID: "re_1", Reason: "chargeback"})
		if first.Outcome != "refunded" || again.Outcome != "skipped" || again.SkipReason != ledger.SkipAlreadyApplied || again.CommissionID != first.CommissionID {
			t.Fatalf("first %+v, again %+v", first, again)
		}
		if got := e.balance(t, p, money.USD); got != 900 {
			t.Fatalf("balance = %d", got)
		}
		ns, err := e.svc.Notifications(ctx, ledger.RecipientPartner, p)
		if err != nil || len(ns) != 1 || ns[0].Kind != ledger.NotifyCommissionRefunded || ns[0].Payload["reason"] != "chargeback" ||
			fmt.Sprint(ns[0].Payload["deduction"]) != "100" || ns[0].Payload["transaction_id"] != tx {
			t.Fatalf("notifications = %+v, %v", ns, err)
		}
		after := e.events(t)
		for typ, n := range map[string]int{eventsv1.TypeRefundRecorded: 1, eventsv1.TypeNotificationCreated: 1, eventsv1.TypeCommissionStatusChanged: 1, eventsv1.TypeBalanceChanged: 1} {
			if after[typ]-before[typ] != n {
				t.Fatalf("%s: %d new events, want %d", typ, after[typ]-before[typ], n)
			}
		}
		// Another id applies.
		if r := e.refund(t, ledger.RefundInput{ProgramID: 2, TransactionID: tx, AmountCents: 1000, RefundID: "re_2"}); r.Outcome != "refunded" {
			t.Fatalf("re_2 = %+v", r)
		}
	})

	t.Run("without refund_id the same amount again is a retry, another amount applies", func(t *testing.T) {
		tx, _, p := newSale(t, 2, 10000)
		a := e.refund(t, ledger.RefundInput{ProgramID: 2, TransactionID: tx, AmountCents: 1000})
		b := e.refund(t, ledger.RefundInput{ProgramID: 2, TransactionID: tx, AmountCents: 1000})
		c := e.refund(t, ledger.RefundInput{ProgramID: 2, TransactionID: tx, AmountCents: 2000})
		if a.Outcome != "refunded" || b.Outcome != "skipped" || b.SkipReason != ledger.SkipAlreadyApplied || c.Outcome != "refunded" {
			t.Fatalf("a %+v, b %+v, c %+v", a, b, c)
		}
		if got := e.balance(t, p, money.USD); got != 700 {
			t.Fatalf("balance = %d", got)
		}
	})

	t.Run("amount 0 refunds all that is left and ignores refund_id", func(t *testing.T) {
		tx, _, _ := newSale(t, 2, 10000)
		e.refund(t, ledger.RefundInput{ProgramID: 2, TransactionID: tx, AmountCents: 4000, RefundID: "x"})
		r := e.refund(t, ledger.RefundInput{ProgramID: 2, TransactionID: tx, RefundID: "x"})
		if r.Outcome != "reversed" || r.Applied != 6000 || r.Deduction.Minor != 600 {
			t.Fatalf("refund = %+v", r)
		}
	})

	t.Run("a refund beyond the sale is capped", func(t *testing.T) {
		tx, _, p := newSale(t, 2, 10000)
		r := e.refund(t, ledger.RefundInput{ProgramID: 2, TransactionID: tx, AmountCents: 25000, RefundID: "big"})
		if r.Outcome != "reversed" || r.Applied != 10000 || r.Deduction.Minor != 1000 {
			t.Fatalf("refund = %+v", r)
		}
		if got := e.balance(t, p, money.USD); got != 0 {
			t.Fatalf("balance = %d", got)
		}
	})

	t.Run("the sale lookup is limited to the program", func(t *testing.T) {
		tx, _, _ := newSale(t, 2, 10000)
		before := e.events(t)
		_, err := e.svc.Refund(ctx, ledger.RefundInput{ProgramID: 1, TransactionID: tx})
		if !errors.Is(err, ledger.ErrSaleNotFound) || errkind.Of(err) != errkind.NotFound {
			t.Fatalf("err = %v", err)
		}
		sameEvents(t, e.events(t), before)
	})

	t.Run("a sale without commission answers no_commission", func(t *testing.T) {
		e.sale(t, ledger.SaleInput{TransactionID: "test-sale", ProgramID: 2, CustomerID: 5, AmountCents: 1000, Test: true})
		r := e.refund(t, ledger.RefundInput{ProgramID: 2, TransactionID: "test-sale", AmountCents: 400})
		if r.Outcome != ledger.OutcomeNoCommission || r.Applied != 400 {
			t.Fatalf("refund = %+v", r)
		}
		s, _ := e.svc.SaleByTransaction(ctx, 2, "test-sale")
		if s.RefundedCents != 400 {
			t.Fatalf("refunded = %d", s.RefundedCents)
		}
	})
}

func TestRefundBalanceAndWithdrawals(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 0})
	const p = 42
	e.sale(t, ledger.SaleInput{TransactionID: "a", ProgramID: 1, CustomerID: 1, PartnerID: p, AmountCents: 10000}) // 1000
	e.sale(t, ledger.SaleInput{TransactionID: "b", ProgramID: 1, CustomerID: 2, PartnerID: p, AmountCents: 5000})  // 500
	if got := e.balance(t, p, money.USD); got != 1500 {
		t.Fatalf("balance = %d", got)
	}

	// Withdrawals: more than available, or nothing, is refused and writes nothing.
	before := e.events(t)
	for _, amt := range []int64{1501, -1} {
		if _, err := e.svc.OpenWithdrawal(ctx, p, "USD", amt); !errors.Is(err, ledger.ErrInvalidAmount) || errkind.Of(err) != errkind.Invalid {
			t.Fatalf("OpenWithdrawal(%d): %v", amt, err)
		}
	}
	if _, err := e.svc.OpenWithdrawal(ctx, 999, "USD", 0); !errors.Is(err, ledger.ErrInvalidAmount) {
		t.Fatalf("OpenWithdrawal of an empty balance: %v", err)
	}
	sameEvents(t, e.events(t), before)

	w1, err := e.svc.OpenWithdrawal(ctx, p, "USD", 400)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := e.svc.OpenWithdrawal(ctx, p, "USD", 0) // all available: 1100
	if err != nil || w2.Amount.Minor != 1100 {
		t.Fatalf("w2 = %+v, %v", w2, err)
	}
	if _, err := e.svc.OpenWithdrawal(ctx, p, "USD", 1); !errors.Is(err, ledger.ErrInvalidAmount) {
		t.Fatalf("nothing left available: %v", err)
	}

	// Half of sale a: -500, balance 1000; open 1500 -> the newest (w2) is
	// reduced by 500.
	r := e.refund(t, ledger.RefundInput{ProgramID: 1, TransactionID: "a", AmountCents: 5000, RefundID: "r1"})
	if r.Debit.Minor != 500 {
		t.Fatalf("refund = %+v", r)
	}
	ws, _ := e.svc.Withdrawals(ctx, p)
	if len(ws) != 2 || ws[0].ID != w2.ID || ws[0].Amount.Minor != 600 || ws[0].Status != "open" || ws[1].Amount.Minor != 400 {
		t.Fatalf("withdrawals = %+v", ws)
	}

	// Pay w1: balance 600.
	if _, err := e.svc.PayWithdrawal(ctx, w1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.PayWithdrawal(ctx, w1.ID); !errors.Is(err, ledger.ErrWithdrawalNotOpen) || errkind.Of(err) != errkind.Conflict {
		t.Fatalf("paying twice: %v", err)
	}
	if _, err := e.svc.PayWithdrawal(ctx, 99999); errkind.Of(err) != errkind.NotFound {
		t.Fatalf("unknown withdrawal: %v", err)
	}
	if got := e.balance(t, p, money.USD); got != 600 {
		t.Fatalf("balance after payout = %d", got)
	}

	// The rest of sale a: -500 -> 100; w2 (600 open) reduced to 100. Sale
	// a's commission (500 net) is not paid out by w1 (400): no warning.
	r = e.refund(t, ledger.RefundInput{ProgramID: 1, TransactionID: "a", RefundID: "r2"})
	if r.Outcome != "reversed" || r.Debit.Minor != 500 {
		t.Fatalf("refund = %+v", r)
	}
	ws, _ = e.svc.Withdrawals(ctx, p)
	if ws[0].Amount.Minor != 100 || ws[0].Status != "open" {
		t.Fatalf("w2 = %+v", ws[0])
	}
	if ns, _ := e.svc.Notifications(ctx, ledger.RecipientAdvertiser, 1001); len(ns) != 0 {
		t.Fatalf("advertiser warned of a commission not paid out: %+v", ns)
	}

	// Sale b (500): the paid 400 covers a (net 0) and not b. Pay w2 (100):
	// paid 500 covers b. Refunding b then warns the advertiser and the
	// balance goes negative.
	if _, err := e.svc.PayWithdrawal(ctx, w2.ID); err != nil {
		t.Fatal(err)
	}
	if got := e.balance(t, p, money.USD); got != 0 {
		t.Fatalf("balance = %d", got)
	}
	// Nothing available: a new withdrawal is refused.
	if _, err := e.svc.OpenWithdrawal(ctx, p, "USD", 0); !errors.Is(err, ledger.ErrInvalidAmount) {
		t.Fatalf("open with a zero balance: %v", err)
	}
	r = e.refund(t, ledger.RefundInput{ProgramID: 1, TransactionID: "b", Reason: "fraud"})
	if r.Outcome != "reversed" || r.Debit.Minor != 500 {
		t.Fatalf("refund = %+v", r)
	}
	if got := e.balance(t, p, money.USD); got != -500 {
		t.Fatalf("balance = %d, want -500", got)
	}
	ns, err := e.svc.Notifications(ctx, ledger.RecipientAdvertiser, 1001)
	if err != nil || len(ns) != 1 || ns[0].Kind != ledger.NotifyRefundReview || ns[0].Payload["reason"] != "fraud" {
		t.Fatalf("advertiser notifications = %+v, %v", ns, err)
	}
	pn, _ := e.svc.Notifications(ctx, ledger.RecipientPartner, p)
	if len(pn) != 3 || pn[0].Kind != ledger.NotifyCommissionReversed || pn[2].Kind != ledger.NotifyCommissionRefunded {
		t.Fatalf("partner notifications = %+v", pn)
	}
	// The journal adds up to the balance.
	if got := e.count(t, `SELECT sum(delta) FROM balance_entries WHERE partner_id = $1`, p); got != -500 {
		t.Fatalf("journal = %d", got)
	}
}

func TestNegativeBalanceCancelsOpenWithdrawals(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "fixed", rate: "10", currency: "EUR", hold: 0})
	e.sale(t, ledger.SaleInput{TransactionID: "a", ProgramID: 1, CustomerID: 1, PartnerID: 5, AmountCents: 100})
	e.sale(t, ledger.SaleInput{TransactionID: "b", ProgramID: 1, CustomerID: 2, PartnerID: 5, AmountCents: 100})
	paid, _ := e.svc.OpenWithdrawal(ctx, 5, "EUR", 1500)
	if _, err := e.svc.PayWithdrawal(ctx, paid.ID); err != nil {
		t.Fatal(err)
	}
	older, _ := e.svc.OpenWithdrawal(ctx, 5, "EUR", 300)
	newer, _ := e.svc.OpenWithdrawal(ctx, 5, "EUR", 200)
	// Balance 500, open 500. Refunding b (1000) leaves -500: both open
	// withdrawals are cancelled, newest first.
	e.refund(t, ledger.RefundInput{ProgramID: 1, TransactionID: "b"})
	if got := e.balance(t, 5, money.EUR); got != -500 {
		t.Fatalf("balance = %d", got)
	}
	ws, _ := e.svc.Withdrawals(ctx, 5)
	for _, w := range ws {
		if (w.ID == older.ID || w.ID == newer.ID) && (w.Status != "cancelled" || w.Amount.Minor != 0) {
			t.Fatalf("withdrawal = %+v", w)
		}
	}
	bs, _ := e.svc.Balances(ctx, 5)
	if len(bs) != 1 || bs[0].Open != 0 || bs[0].Available != 0 || bs[0].Amount.Minor != -500 {
		t.Fatalf("balances = %+v", bs)
	}
}

func TestConcurrentApproveDue(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "fixed", rate: "1", currency: "USD", hold: 30})
	const sales = 120
	for i := range sales {
		e.sale(t, ledger.SaleInput{TransactionID: fmt.Sprintf("s%d", i), ProgramID: 1, CustomerID: int64(i + 1), PartnerID: int64(i%4 + 1), AmountCents: 1000})
	}
	before := e.events(t)
	a, b := e.service(t, 7), e.service(t, 7)
	var na, nb int
	var errA, errB error
	var wg sync.WaitGroup
	wg.Go(func() { na, errA = a.ApproveDue(ctx, t0.Add(30*day)) })
	wg.Go(func() { nb, errB = b.ApproveDue(ctx, t0.Add(30*day)) })
	wg.Wait()
	if errA != nil || errB != nil || na+nb != sales {
		t.Fatalf("approved %d + %d (%v, %v), want %d", na, nb, errA, errB, sales)
	}
	if got := e.count(t, `SELECT count(*) FROM commissions WHERE status = 'approved' AND credited`); got != sales {
		t.Fatalf("%d approved", got)
	}
	if got := e.count(t, `SELECT count(DISTINCT commission_id) FROM balance_entries WHERE kind = 'credit'`); got != sales {
		t.Fatalf("%d commissions credited", got)
	}
	for p := int64(1); p <= 4; p++ {
		if got := e.balance(t, p, money.USD); got != 100*sales/4 {
			t.Fatalf("partner %d balance = %d", p, got)
		}
	}
	after := e.events(t)
	if after[eventsv1.TypeCommissionStatusChanged]-before[eventsv1.TypeCommissionStatusChanged] != sales ||
		after[eventsv1.TypeBalanceChanged]-before[eventsv1.TypeBalanceChanged] != sales {
		t.Fatalf("events %v -> %v", before, after)
	}
	if n, err := a.ApproveDue(ctx, t0.Add(31*day)); err != nil || n != 0 {
		t.Fatalf("again: %d, %v", n, err)
	}
}

// faultyStore is the real store whose transactions fail at their first
// withdrawal update (the refund's last write) or notification: what a use
// case wrote before must roll back with it.
type faultyStore struct{ *pgstore.Store }

func (s faultyStore) Atomic(ctx context.Context, fn func(ledger.Tx) error) error {
	return s.Store.Atomic(ctx, func(tx ledger.Tx) error { return fn(faultyTx{tx}) })
}

type faultyTx struct{ ledger.Tx }

var errInjected = errors.New("injected failure")

func (faultyTx) UpdateWithdrawal(context.Context, ledger.Withdrawal, ledger.WithdrawalChange) error {
	return errInjected
}

func TestRefundIsOneTransaction(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 0})
	res := e.sale(t, ledger.SaleInput{TransactionID: "a", ProgramID: 1, CustomerID: 1, PartnerID: 3, AmountCents: 10000})
	w, err := e.svc.OpenWithdrawal(ctx, 3, "USD", 1000)
	if err != nil {
		t.Fatal(err)
	}
	before := e.events(t)
	faulty, err := ledger.New(ledger.Config{Store: faultyStore{e.store}, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	// The refund gets as far as the sale, refund, commission and balance
	// writes, then fails at the withdrawal: none of them, nor their
	// events, stay.
	if _, err := faulty.Refund(ctx, ledger.RefundInput{ProgramID: 1, TransactionID: "a", RefundID: "r"}); !errors.Is(err, errInjected) {
		t.Fatalf("err = %v", err)
	}
	sameEvents(t, e.events(t), before)
	s, _ := e.svc.SaleByTransaction(ctx, 1, "a")
	c, _ := e.svc.Commission(ctx, res.Commission.ID)
	ws, _ := e.svc.Withdrawals(ctx, 3)
	if s.RefundedCents != 0 || c.Status != money.StatusApproved || c.Refunded != 0 || e.balance(t, 3, money.USD) != 1000 ||
		ws[0].ID != w.ID || ws[0].Amount.Minor != 1000 || ws[0].Status != "open" || e.count(t, `SELECT count(*) FROM refunds`) != 0 {
		t.Fatalf("a write survived: sale %+v, commission %+v, withdrawals %+v", s, c, ws)
	}
	// The same refund then applies once, in full.
	if r := e.refund(t, ledger.RefundInput{ProgramID: 1, TransactionID: "a", RefundID: "r"}); r.Outcome != "reversed" || r.Debit.Minor != 1000 {
		t.Fatalf("refund = %+v", r)
	}
	after := e.events(t)
	for typ, n := range map[string]int{eventsv1.TypeRefundRecorded: 1, eventsv1.TypeCommissionStatusChanged: 1, eventsv1.TypeBalanceChanged: 1,
		eventsv1.TypeWithdrawalChanged: 1, eventsv1.TypeNotificationCreated: 1} {
		if after[typ]-before[typ] != n {
			t.Fatalf("%s: %d new events, want %d", typ, after[typ]-before[typ], n)
		}
	}
}

// refundNotifyFixture is program 1 paying 10 % with hold days, and its
// sale "a" of 100.00 USD by partner 3.
func refundNotifyFixture(t *testing.T, hold int) *env {
	t.Helper()
	e := open(t)
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: hold})
	e.sale(t, ledger.SaleInput{TransactionID: "a", ProgramID: 1, CustomerID: 1, PartnerID: 3, AmountCents: 10000})
	return e
}

// notifying is a ledger over store that keeps the last notification
// error it reports in *notifyErr.
func (e *env) notifying(t *testing.T, store ledger.Store, notifyErr *error) *ledger.Service {
	t.Helper()
	svc, err := ledger.New(ledger.Config{Store: store, Now: e.clock.Now, OnNotifyError: func(err error) { *notifyErr = err }})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// Notifications ride with the refund's commit behind a savepoint: one that
// cannot be written (here every notification breaks a constraint) changes
// neither the refund nor its answer, stays pending, and NotifyPending sends
// it once.
func TestRefundNotificationsAfterTheRefund(t *testing.T) {
	e := refundNotifyFixture(t, 0)
	ctx := context.Background()
	var notifyErr error
	svc := e.notifying(t, e.store, &notifyErr)
	e.exec(t, `ALTER TABLE notifications ADD CONSTRAINT refuse_all CHECK (false) NOT VALID`)
	before := e.events(t)
	r, err := svc.Refund(ctx, ledger.RefundInput{ProgramID: 1, TransactionID: "a", AmountCents: 2500, RefundID: "r1"})
	var pgErr *pgconn.PgError
	if err != nil || r.Outcome != "refunded" || r.Deduction.Minor != 250 || !errors.As(notifyErr, &pgErr) || pgErr.ConstraintName != "refuse_all" {
		t.Fatalf("refund = %+v, %v; notify error %v", r, err, notifyErr)
	}
	e.exec(t, `ALTER TABLE notifications DROP CONSTRAINT refuse_all`)
	// The refund's own events are written; the notifications' are not.
	after := e.events(t)
	if after[eventsv1.TypeNotificationCreated] != before[eventsv1.TypeNotificationCreated] || after[eventsv1.TypeRefundRecorded] <= before[eventsv1.TypeRefundRecorded] {
		t.Fatalf("outbox events %v after the refund, %v before: want the refund's and no notification's", after, before)
	}
	if n := e.count(t, `SELECT count(*) FROM notifications`); n != 0 {
		t.Fatalf("%d notifications", n)
	}
	if n := e.count(t, `SELECT count(*) FROM refunds WHERE pending_notifications IS NOT NULL`); n != 1 {
		t.Fatalf("%d refunds with pending notifications, want 1", n)
	}
	// Too recent for the backstop's grace: nothing sent.
	if n, err := e.svc.NotifyPending(ctx, e.clock.Now().Add(-time.Minute), 10); n != 0 || err != nil {
		t.Fatalf("NotifyPending = %d, %v", n, err)
	}
	for i := 0; i < 2; i++ { // the second run finds nothing left
		n, err := e.svc.NotifyPending(ctx, e.clock.Now().Add(time.Second), 10)
		if err != nil || n != 1-i {
			t.Fatalf("run %d: NotifyPending = %d, %v", i, n, err)
		}
	}
	ns, err := e.svc.Notifications(ctx, ledger.RecipientPartner, 3)
	if err != nil || len(ns) != 1 || ns[0].Kind != ledger.NotifyCommissionRefunded || fmt.Sprint(ns[0].Payload["deduction"]) != "250" {
		t.Fatalf("notifications %+v, %v", ns, err)
	}
	// Sending them again (the request's own send racing the backstop)
	// fails on their ids, given when the refund was recorded: nothing is
	// written twice.
	var refundID int64
	if err := e.pool.QueryRow(ctx, `SELECT id FROM refunds WHERE refund_id = 'r1'`).Scan(&refundID); err != nil {
		t.Fatal(err)
	}
	err = e.store.Atomic(ctx, func(tx ledger.Tx) error {
		if err := tx.ClearRefundNotifications(ctx, refundID); err != nil {
			return err
		}
		return tx.InsertNotification(ctx, &ns[0])
	})
	if err == nil {
		t.Fatal("the same notification was stored twice")
	}
	if n := e.count(t, `SELECT count(*) FROM notifications`); n != 1 {
		t.Fatalf("%d notifications after sending one twice", n)
	}
	// A refund whose notifications were sent at once leaves none pending.
	e.refund(t, ledger.RefundInput{ProgramID: 1, TransactionID: "a", AmountCents: 2500, RefundID: "r2"})
	if n := e.count(t, `SELECT count(*) FROM refunds WHERE pending_notifications IS NOT NULL`); n != 0 {
		t.Fatalf("%d refunds with pending notifications, want 0", n)
	}
}

// A refund of a commission still in its hold moves no balance, so its row
// is sent with the commit: stored without its pending notifications when
// they are written with it, with them (the savepoint's fallback) when they
// cannot be, for the backstop to send once.
func TestRefundNotificationsOfAHeldCommission(t *testing.T) {
	e := refundNotifyFixture(t, 30)
	ctx := context.Background()
	var notifyErr error
	svc := e.notifying(t, e.store, &notifyErr)
	state := func() [3]int64 {
		return [3]int64{e.count(t, `SELECT count(*) FROM refunds`), e.count(t, `SELECT count(*) FROM refunds WHERE pending_notifications IS NOT NULL`),
			e.count(t, `SELECT count(*) FROM notifications`)}
	}
	if r, err := svc.Refund(ctx, ledger.RefundInput{ProgramID: 1, TransactionID: "a", AmountCents: 1000, RefundID: "r1"}); err != nil || r.Outcome != "refunded" || notifyErr != nil {
		t.Fatalf("refund = %+v, %v; notify error %v", r, err, notifyErr)
	}
	if got := state(); got != [3]int64{1, 0, 1} {
		t.Fatalf("refunds, pending, notifications = %v, want [1 0 1]", got)
	}
	e.exec(t, `ALTER TABLE notifications ADD CONSTRAINT refuse_all CHECK (false) NOT VALID`)
	if r, err := svc.Refund(ctx, ledger.RefundInput{ProgramID: 1, TransactionID: "a", AmountCents: 1000, RefundID: "r2"}); err != nil || r.Outcome != "refunded" || notifyErr == nil {
		t.Fatalf("refund = %+v, %v; notify error %v", r, err, notifyErr)
	}
	e.exec(t, `ALTER TABLE notifications DROP CONSTRAINT refuse_all`)
	if got := state(); got != [3]int64{2, 1, 1} {
		t.Fatalf("refunds, pending, notifications = %v, want [2 1 1]", got)
	}
	if n, err := e.svc.NotifyPending(ctx, e.clock.Now().Add(time.Second), 10); err != nil || n != 1 {
		t.Fatalf("NotifyPending = %d, %v", n, err)
	}
	if got := state(); got != [3]int64{2, 0, 2} {
		t.Fatalf("refunds, pending, notifications = %v after the backstop, want [2 0 2]", got)
	}
}

// Inside a caller's transaction (Store.Within) the notifications follow
// the refund's writes behind a savepoint of their own: failing, they alone
// are undone and the caller's transaction still commits the refund.
func TestRefundNotificationsWithinACallersTransaction(t *testing.T) {
	e := refundNotifyFixture(t, 0)
	ctx := context.Background()
	for _, refuse := range []bool{true, false} {
		if refuse {
			e.exec(t, `ALTER TABLE notifications ADD CONSTRAINT refuse_all CHECK (false) NOT VALID`)
		}
		var notifyErr error
		err := pg.InTx(ctx, e.pool, func(tx pgx.Tx) error {
			r, err := e.notifying(t, e.store.Within(tx), &notifyErr).Refund(ctx, ledger.RefundInput{ProgramID: 1, TransactionID: "a", AmountCents: 1000, RefundID: fmt.Sprint("r-", refuse)})
			if err == nil && r.Outcome != "refunded" {
				err = fmt.Errorf("outcome %q", r.Outcome)
			}
			if err != nil {
				return err
			}
			// The caller's transaction goes on after a failed savepoint.
			_, err = tx.Exec(ctx, `SELECT 1`)
			return err
		})
		if err != nil {
			t.Fatalf("refuse %v: %v", refuse, err)
		}
		if refuse != (notifyErr != nil) {
			t.Fatalf("refuse %v: notify error %v", refuse, notifyErr)
		}
		if refuse {
			e.exec(t, `ALTER TABLE notifications DROP CONSTRAINT refuse_all`)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM refunds`); n != 2 {
		t.Fatalf("%d refunds, want 2", n)
	}
	if n := e.count(t, `SELECT count(*) FROM refunds WHERE pending_notifications IS NOT NULL`); n != 1 {
		t.Fatalf("%d refunds with pending notifications, want the refused one", n)
	}
	if n := e.count(t, `SELECT count(*) FROM notifications`); n != 1 {
		t.Fatalf("%d notifications, want the second refund's", n)
	}
}

func TestLeadCommission(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "VND", hold: 0})
	e.exec(t, `UPDATE programs SET lead_commission = '20000' WHERE id = 1`)
	e.program(t, 2, terms{typ: "percent", rate: "10", currency: "USD", hold: 30})

	const n = 10
	results := make([]ledger.LeadResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = e.svc.RecordLead(ctx, ledger.LeadInput{ProgramID: 1, CustomerID: 5, PartnerID: 9})
		})
	}
	wg.Wait()
	for i := range n {
		c := results[i].Commission
		if errs[i] != nil || c == nil || c.ID != results[0].Commission.ID || c.Amount != (money.Amount{Minor: 20000, Currency: money.VND}) || c.Kind != ledger.KindLead {
			t.Fatalf("lead %d: %+v, %v", i, results[i], errs[i])
		}
	}
	if got := e.balance(t, 9, money.VND); got != 20000 {
		t.Fatalf("balance = %d (credited once, hold 0)", got)
	}
	for _, c := range []struct {
		in     ledger.LeadInput
		reason money.Reason
	}{
		{ledger.LeadInput{ProgramID: 1, CustomerID: 6, PartnerID: 9, Test: true}, money.ReasonTestLead},
		{ledger.LeadInput{ProgramID: 2, CustomerID: 6, PartnerID: 9}, money.ReasonNoLeadCommission},
	} {
		res, err := e.svc.RecordLead(ctx, c.in)
		if err != nil || res.Commission != nil || res.NoCommission != string(c.reason) {
			t.Fatalf("%+v: %+v, %v", c.in, res, err)
		}
	}
	sameEvents(t, e.events(t), map[string]int{eventsv1.TypeCommissionCreated: 1, eventsv1.TypeBalanceChanged: 1})
}

// checkProgramMoney holds every ledger test to the running totals'
// invariant (migration 00010): program_money equals what its triggers sum
// up from the rows (the view program_money_from_rows, 00012), whatever
// sales, refunds, approvals, reversals and payouts the test made.
func checkProgramMoney(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		WITH want AS (SELECT * FROM program_money_from_rows)
		SELECT COALESCE(w.program_id, m.program_id), COALESCE(w.partner_id, m.partner_id), COALESCE(w.currency, m.currency),
			COALESCE(w.earned, 0), COALESCE(w.paid, 0), COALESCE(w.open, 0), COALESCE(m.earned, 0), COALESCE(m.paid, 0), COALESCE(m.open, 0)
		FROM want w FULL JOIN program_money m USING (program_id, partner_id, currency)
		WHERE (COALESCE(w.earned, 0), COALESCE(w.paid, 0), COALESCE(w.open, 0)) IS DISTINCT FROM (COALESCE(m.earned, 0), COALESCE(m.paid, 0), COALESCE(m.open, 0))`)
	if err != nil {
		t.Errorf("check program_money: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var prog, partner, we, wp, wo, me, mp, mo int64
		var cur string
		if err := rows.Scan(&prog, &partner, &cur, &we, &wp, &wo, &me, &mp, &mo); err != nil {
			t.Errorf("check program_money: %v", err)
			return
		}
		t.Errorf("program_money of program %d, partner %d, %s: earned/paid/open %d/%d/%d, the rows sum to %d/%d/%d", prog, partner, cur, me, mp, mo, we, wp, wo)
	}
	if err := rows.Err(); err != nil {
		t.Errorf("check program_money: %v", err)
	}
}

// One brand's clawback is not another's to bear. A partner in two
// programs: program 1 pays its commission out, then a refund takes it
// back, leaving the partner's whole balance negative. Program 2's open
// payout stays whole, can be paid, and program 2 can open the next one;
// only program 1's own payouts would have shrunk.
func TestARefundNeverTouchesAnotherProgramsPayouts(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 0})
	e.program(t, 2, terms{typ: "percent", rate: "10", currency: "USD", hold: 0})
	e.sale(t, ledger.SaleInput{TransactionID: "b-1", ProgramID: 1, CustomerID: 1, AmountCents: 20000}) // 2000 in program 1
	e.sale(t, ledger.SaleInput{TransactionID: "a-1", ProgramID: 2, CustomerID: 2, AmountCents: 10000}) // 1000 in program 2
	a, err := e.svc.OpenProgramWithdrawal(ctx, 2, 7, "USD", 300)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.svc.OpenProgramWithdrawal(ctx, 1, 7, "USD", 0)
	if err != nil || b.Amount.Minor != 2000 {
		t.Fatalf("program 1's payout: %+v %v", b, err)
	}
	if _, err := e.svc.PayProgramWithdrawal(ctx, 1, b.ID, "tr_b"); err != nil {
		t.Fatal(err)
	}
	if r := e.refund(t, ledger.RefundInput{ProgramID: 1, TransactionID: "b-1"}); r.Outcome != "reversed" || r.Debit.Minor != 2000 {
		t.Fatalf("program 1's refund: %+v", r)
	}
	var status string
	var amount int64
	if err := e.pool.QueryRow(ctx, `SELECT status, amount FROM withdrawals WHERE id = $1`, a.ID).Scan(&status, &amount); err != nil {
		t.Fatal(err)
	}
	if status != "open" || amount != 300 {
		t.Fatalf("program 2's payout after program 1's refund: %s %d, want open 300", status, amount)
	}
	if bs, err := e.svc.Balances(ctx, 7); err != nil || len(bs) != 1 || bs[0].Amount.Minor != -1000 {
		t.Fatalf("the partner's whole balance: %+v %v, want -1000", bs, err)
	}
	if w, err := e.svc.OpenProgramWithdrawal(ctx, 2, 7, "USD", 0); err != nil || w.Amount.Minor != 700 {
		t.Fatalf("program 2's next payout: %+v %v, want the 700 it still owes", w, err)
	}
	if _, err := e.svc.PayProgramWithdrawal(ctx, 2, a.ID, "tr_a"); err != nil {
		t.Fatalf("paying program 2's payout: %v", err)
	}
	checkProgramMoney(t, e.pool)
}

// A program's payouts move its running totals (program_money) through
// every state: opened, shrunk while open by a refund that leaves the
// partner's balance short (FitWithdrawals), paid and cancelled; a payout's
// cap reads them, and the admin API's program-less withdrawal leaves them
// alone. After each step the totals equal the rows (checkProgramMoney).
func TestProgramPayoutsMoveTheRunningTotals(t *testing.T) {
	e := open(t)
	ctx := context.Background()
	e.program(t, 1, terms{typ: "percent", rate: "10", currency: "USD", hold: 0})
	e.program(t, 2, terms{typ: "percent", rate: "10", currency: "USD", hold: 0})
	e.sale(t, ledger.SaleInput{TransactionID: "pm-1", ProgramID: 1, CustomerID: 1, AmountCents: 10000})
	e.sale(t, ledger.SaleInput{TransactionID: "pm-2", ProgramID: 2, CustomerID: 2, AmountCents: 5000})
	funds := func(program int64) [3]int64 {
		t.Helper()
		checkProgramMoney(t, e.pool)
		var f [3]int64
		if err := e.pool.QueryRow(ctx, `SELECT earned, paid, open FROM program_money WHERE program_id = $1 AND partner_id = 7 AND currency = 'USD'`, program).
			Scan(&f[0], &f[1], &f[2]); err != nil {
			t.Fatal(err)
		}
		return f
	}
	if f := funds(1); f != [3]int64{1000, 0, 0} {
		t.Fatalf("after the sale: %v", f)
	}
	// Program 1 may pay out only what program 1 earned.
	if _, err := e.svc.OpenProgramWithdrawal(ctx, 1, 7, "USD", 1001); !errors.Is(err, ledger.ErrInvalidAmount) {
		t.Fatalf("a payout over program 1's money: %v", err)
	}
	w, err := e.svc.OpenProgramWithdrawal(ctx, 1, 7, "USD", 0)
	if err != nil || w.Amount.Minor != 1000 {
		t.Fatalf("open all: %+v %v", w, err)
	}
	if f := funds(1); f != [3]int64{1000, 0, 1000} {
		t.Fatalf("after opening: %v", f)
	}
	w2, err := e.svc.OpenProgramWithdrawal(ctx, 2, 7, "USD", 0)
	if err != nil || w2.Amount.Minor != 500 {
		t.Fatalf("open program 2's: %+v %v", w2, err)
	}
	// The program-less admin withdrawal has nothing left to take, and
	// would not be in the totals.
	if _, err := e.svc.OpenWithdrawal(ctx, 7, "USD", 1); !errors.Is(err, ledger.ErrInvalidAmount) {
		t.Fatalf("an admin withdrawal beyond the balance: %v", err)
	}
	// A refund of 40% in program 1 leaves program 1 owing 600 against its
	// open payout of 1000: that payout shrinks to 600. Program 2's payout
	// is another brand's and stays whole.
	e.refund(t, ledger.RefundInput{ProgramID: 1, TransactionID: "pm-1", AmountCents: 4000})
	f1, f2 := funds(1), funds(2)
	if f1 != [3]int64{600, 0, 600} || f2 != [3]int64{500, 0, 500} {
		t.Fatalf("after the refund: %v %v, want [600 0 600] [500 0 500]", f1, f2)
	}
	if _, err := e.svc.PayProgramWithdrawal(ctx, 1, w.ID, "tr_1"); err != nil {
		t.Fatal(err)
	}
	if f := funds(1); f != [3]int64{600, f1[2], 0} {
		t.Fatalf("after paying: %v, want [600 %d 0]", f, f1[2])
	}
	if _, err := e.svc.CancelProgramWithdrawal(ctx, 2, w2.ID); err != nil {
		t.Fatal(err)
	}
	if f := funds(2); f != [3]int64{500, 0, 0} {
		t.Fatalf("after cancelling: %v", f)
	}
}
