// Package pgstore is the Postgres implementation of ledger.Store, over the
// commissions schema (migrations 00003 and 00005) and the catalog replica's programs.
// Every write of a transaction stores the event of its change in the outbox
// (topic commissions.events.v1) in the same transaction:
//
//	InsertSale          LedgerSaleRecorded
//	InsertCommission    CommissionCreated (only when it creates one)
//	UpdateCommission    CommissionStatusChanged
//	InsertRefund        RefundRecorded
//	PostEntry           BalanceChanged
//	InsertWithdrawal,
//	UpdateWithdrawal    WithdrawalChanged
//	InsertNotification  NotificationCreated
//	InsertDispute,
//	CloseDispute        none yet (no dispute event in the contract)
//
// Locks are always taken in one order: sale, dispute, customer (an advisory
// lock), commission, balance, withdrawals.
//
// Round trips: the events of a transaction, and the writes whose answer
// nothing reads (SetCommissionState, SetSaleRefunded, UpdateCommission), are
// not sent when they are made but kept, in order, and sent in one pipelined
// batch when the use case's function returns, just before COMMIT: the writes
// first, then every event in one outbox INSERT (outbox.QueueMany), so the
// outbox ids still come after the row locks of the writes they describe.
// Each of those writes targets a row the transaction has locked before (the
// sale by its UPDATE, INSERT or FOR UPDATE, the commission by FOR UPDATE),
// so sending it later changes no lock order, and no read in the same
// transaction looks at what it changes. Kept writes of one kind (a
// group's refunds, commissions, sales) go as one statement (writes.go).
// The events go without NOTIFY
// (outbox.QueueMany): a notifying transaction holds Postgres's notification
// lock through its commit's WAL flush, so every sale and refund committed
// one at a time; the relay polls instead (server.Spec's RelayPollInterval).
package pgstore

import (
	"bytes"
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
	"github.com/svc-dev/svc/services/commissions/internal/money"
)

// Source is the Envelope.source of the ledger's events.
const Source = "commissions"

// Store implements ledger.Store.
type Store struct {
	pool *pgxpool.Pool
	// within, when set, is the transaction Atomic runs in (Within).
	within pgx.Tx
	// reserve commits concurrent reservations together (ReserveSale).
	reserve *pg.Group[*ledger.Sale, int64]
}

var _ ledger.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*pg.GroupOptions[*ledger.Sale])

// ObserveReservations tells observe how many reservations each
// transaction stored, and its error (nil: committed): metrics.
func ObserveReservations(observe func(calls int, err error)) Option {
	return func(o *pg.GroupOptions[*ledger.Sale]) { o.Observe = observe }
}

// New returns a store over a pool whose search_path is the commissions
// schema (pg.Options.Schema).
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{pool: pool}
	var group pg.GroupOptions[*ledger.Sale]
	for _, o := range opts {
		o(&group)
	}
	s.reserve = pg.NewGroup(s.reserveSales, group)
	return s
}

// Within is the store whose Atomic runs inside t instead of a transaction
// of its own: a consumer's use case commits with its inbox row, once.
func (s *Store) Within(t pgx.Tx) *Store { return &Store{pool: s.pool, within: t, reserve: s.reserve} }

// Atomic runs fn in one transaction, then sends the writes and events fn
// left pending (see the package comment) with the commit. BEGIN rides with
// the transaction's first statement and COMMIT with its last batch
// (pg.InPipeTx), unless the store runs Within a caller's transaction.
func (s *Store) Atomic(ctx context.Context, fn func(ledger.Tx) error) error {
	run := func(q pg.Querier, final finalSender) error {
		x := &tx{tx: q, final: final}
		if err := fn(x); err != nil {
			return err
		}
		return x.flush(ctx)
	}
	if s.within != nil {
		return run(s.within, nil)
	}
	// Generic plans: every ledger statement is checked under its generic
	// plan (deploy/devstack/plans), and "auto" kept planning some on every
	// run (the completion's program and history: 280 µs a sale).
	return pg.InPipeTxWithOptions(ctx, s.pool, pg.PipeOptions{GenericPlans: true}, func(t *pg.PipeTx) error { return run(t, t) })
}

// finalSender sends a transaction's last batch with its COMMIT.
type finalSender interface {
	SendFinal(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	SendFinalOptional(ctx context.Context, b *pgx.Batch, opt pg.Optional, read func(pgx.BatchResults) error) (optErr, err error)
}

// tx implements ledger.Tx.
type tx struct {
	tx pg.Querier
	// final, when set, sends flush's batch with the COMMIT.
	final finalSender
	// later are the pending writes, envs the pending events: sent by
	// flush.
	later *pg.Writes
	envs  []*eventsv1.Envelope
	// inputs are DecisionInputs read ahead by CompleteSale, in its round
	// trip; DecisionInputs answers them once, for the same program and
	// customer.
	inputs *decisionInputs
	// ahead is what LockSaleForRefund read ahead for the refund's next
	// reads; refundIDs and noteIDs are ids it took for InsertRefund.
	ahead              *refundAhead
	refundIDs, noteIDs []int64
	// commissionIDs are ids completeWithInputs took for the sale's
	// commission.
	commissionIDs []int64
	// completions are completeWithInputs' pending UPDATEs (rows of
	// completeSales), by sale id, until sent: SetCommissionState of such a
	// sale sets its state there rather than updating the row a second
	// time.
	completions map[int64][]any
	// optional are writes that ride with the commit behind a savepoint
	// (NotifyRefundAtCommit), with their events optEnvs; when they fail,
	// they alone are undone, the fallback writes go instead and each of
	// optionalFailed is told after the commit.
	optional       *pg.Writes
	optEnvs        []*eventsv1.Envelope
	fallback       *pgx.Batch
	optionalFailed []func(error)
	// refundInserts are InsertRefund's pending INSERTs (rows of
	// insertRefunds), by refund id, until sent: NotifyRefundAtCommit takes
	// a refund's pending notifications out of its row when they are
	// written with the commit.
	refundInserts map[int64][]any
	// refundLocks are what ReadAheadRefunds read, until LockSaleForRefund
	// answers them.
	refundLocks map[ledger.RefundLock]refundLocked
	// completionReads are what ReadAheadCompletions read, by sale id,
	// until CompleteSale answers them.
	completionReads map[int64]completionRead
}

// refundAhead answers SaleCommission and RefundApplied once each, for the
// sale LockSaleForRefund locked.
type refundAhead struct {
	saleID                      int64
	commission                  ledger.Commission
	hasCommission, commissionOK bool
	refundID                    string
	requested                   int64
	applied, appliedOK          bool
}

type decisionInputs struct {
	programID, customerID int64
	prog                  ledger.Program
	hist                  money.History
	err                   error
}

var _ ledger.Tx = (*tx)(nil)

// deferExec keeps a write whose answer nothing reads for flush; what names it
// in an error ("record commission state of sale 3").
func (t *tx) deferExec(what, sql string, args ...any) {
	if t.later == nil {
		t.later = &pg.Writes{}
	}
	t.later.Exec(what, sql, args...)
}

// deferRow keeps one row of a bulk write for flush (pg.Writes) and returns its
// values, which the caller may change until then.
func (t *tx) deferRow(b *pg.BulkWrite, what string, values ...any) []any {
	if t.later == nil {
		t.later = &pg.Writes{}
	}
	return t.later.Row(b, what, values...)
}

// sendDeferred sends the pending writes (not the events) now: for a
// statement whose foreign key needs a row a pending write inserts.
func (t *tx) sendDeferred(ctx context.Context) error {
	if t.later.Empty() {
		return nil
	}
	b := &pgx.Batch{}
	what, err := t.later.Queue(b)
	if err != nil {
		return err
	}
	t.later, t.completions, t.refundInserts = nil, nil, nil
	br := t.tx.SendBatch(ctx, b)
	if err := readWrites(br, what); err != nil {
		_ = br.Close()
		return err
	}
	return br.Close()
}

// readWrites reads the results of the writes what names, in order; the
// first error is named after its write.
func readWrites(br pgx.BatchResults, what []string) error {
	for _, w := range what {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
	}
	return nil
}

// flush sends the pending writes, then the pending events in one outbox
// INSERT, then the optional writes behind a savepoint, with the COMMIT in
// one round trip (pg.PipeTx.SendFinalOptional); inside a caller's
// transaction (Within), the optional writes follow in a round trip of
// their own.
func (t *tx) flush(ctx context.Context) error {
	if t.later.Empty() && len(t.envs) == 0 && t.optional.Empty() && len(t.optEnvs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	what, err := t.later.Queue(b)
	if err != nil {
		return err
	}
	if len(t.envs) > 0 {
		if err := outbox.QueueMany(ctx, b, eventsv1.TopicCommissions, t.envs); err != nil {
			return err
		}
		what = append(what, fmt.Sprintf("enqueue %d events", len(t.envs)))
	}
	opt := pg.Optional{Fallback: t.fallback}
	if !t.optional.Empty() || len(t.optEnvs) > 0 {
		opt.Batch = &pgx.Batch{}
		if _, err := t.optional.Queue(opt.Batch); err != nil {
			return err
		}
		if len(t.optEnvs) > 0 {
			if err := outbox.QueueMany(ctx, opt.Batch, eventsv1.TopicCommissions, t.optEnvs); err != nil {
				return err
			}
		}
	}
	failed := t.optionalFailed
	t.later, t.envs, t.completions, t.refundInserts = nil, nil, nil, nil
	t.optional, t.optEnvs, t.fallback, t.optionalFailed = nil, nil, nil, nil
	// A write's own error is returned named after it; any other (the
	// batch, the commit) as the pending writes'.
	var writeErr error
	read := func(br pgx.BatchResults) error {
		writeErr = readWrites(br, what)
		return writeErr
	}
	var optErr error
	if t.final != nil {
		optErr, err = t.final.SendFinalOptional(ctx, b, opt, read)
	} else {
		br := t.tx.SendBatch(ctx, b)
		err = read(br)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err == nil && opt.Batch != nil {
			optErr, err = t.sendOptionalWithin(ctx, opt)
		}
	}
	switch {
	case err != nil && err == writeErr:
		return err
	case err != nil:
		return fmt.Errorf("pending writes: %w", err)
	}
	if optErr != nil {
		for _, f := range failed {
			f(optErr)
		}
	}
	return nil
}

// sendOptionalWithin sends opt behind a savepoint in a caller's
// transaction. The savepoint statements go in the simple protocol: after a
// failed batch pgx cannot prepare that batch's statements again until the
// transaction ends.
func (t *tx) sendOptionalWithin(ctx context.Context, opt pg.Optional) (optErr, err error) {
	if _, err := t.tx.Exec(ctx, "SAVEPOINT ledger_optional"); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	br := t.tx.SendBatch(ctx, opt.Batch)
	for range opt.Batch.Len() {
		if _, optErr = br.Exec(); optErr != nil {
			break
		}
	}
	if cerr := br.Close(); optErr == nil {
		optErr = cerr
	}
	end := "RELEASE SAVEPOINT ledger_optional"
	if optErr != nil {
		end = "ROLLBACK TO SAVEPOINT ledger_optional"
	}
	if _, err := t.tx.Exec(ctx, end); err != nil {
		return optErr, fmt.Errorf("%s: %w", strings.ToLower(end), err)
	}
	if optErr != nil && opt.Fallback != nil && opt.Fallback.Len() > 0 {
		if err := t.tx.SendBatch(ctx, opt.Fallback).Close(); err != nil {
			return optErr, fmt.Errorf("fallback of the optional writes: %w", err)
		}
	}
	return optErr, nil
}

// publish keeps one event for the outbox (written by flush).
func (t *tx) publish(_ context.Context, typ string, programID int64, at time.Time, msg proto.Message) error {
	payload, err := proto.Marshal(msg)
	if err != nil {
		return fmt.Errorf("marshal %s: %w", typ, err)
	}
	t.envs = append(t.envs, &eventsv1.Envelope{Type: typ, OccurredAt: timestamppb.New(at), ProgramId: programID, Source: Source, Payload: payload})
	return nil
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

const (
	programSQL = `SELECT advertiser_id, commission_type, commission_rate, duration_months, hold_days, currency, lead_commission
		FROM programs WHERE id = $1`
	lockCustomerSQL = `SELECT pg_advisory_xact_lock($1)`
	historySQL      = `SELECT min(s.occurred_at) FROM commissions c JOIN sales s ON s.id = c.sale_id
		WHERE c.kind = 'sale' AND c.program_id = $1 AND c.customer_id = $2`
)

func scanProgram(row pgx.Row, id int64) (ledger.Program, error) {
	p := ledger.Program{ID: id}
	err := row.Scan(&p.AdvertiserID, &p.Terms.CommissionType, &p.Terms.CommissionRate,
		&p.Terms.DurationMonths, &p.HoldDays, &p.Terms.Currency, &p.Terms.LeadCommission)
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Program{}, fmt.Errorf("program %d not in the catalog replica: %w", id, ledger.ErrProgramUnknown)
	}
	if err != nil {
		return ledger.Program{}, fmt.Errorf("load program %d: %w", id, err)
	}
	return p, nil
}

// customerLockKey is the advisory lock key of (program, customer).
func customerLockKey(programID, customerID int64) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("commissions.customer:" + strconv.FormatInt(programID, 10) + ":" + strconv.FormatInt(customerID, 10)))
	return int64(h.Sum64())
}

func scanHistory(row pgx.Row, customerID int64) (money.History, error) {
	var first *time.Time
	if err := row.Scan(&first); err != nil {
		return money.History{}, fmt.Errorf("history of customer %d: %w", customerID, err)
	}
	if first == nil {
		return money.History{}, nil
	}
	return money.History{FirstCommissionedAt: first.UTC(), HasSaleCommission: true}, nil
}

// Program reads the replica's program.
func (t *tx) Program(ctx context.Context, id int64) (ledger.Program, error) {
	return scanProgram(t.tx.QueryRow(ctx, programSQL, id), id)
}

// LockCustomer takes a transaction advisory lock on (program, customer).
func (t *tx) LockCustomer(ctx context.Context, programID, customerID int64) error {
	if _, err := t.tx.Exec(ctx, lockCustomerSQL, customerLockKey(programID, customerID)); err != nil {
		return fmt.Errorf("lock customer %d of program %d: %w", customerID, programID, err)
	}
	return nil
}

// CustomerHistory: the time of the customer's first sale with a commission,
// and whether one exists (any status).
func (t *tx) CustomerHistory(ctx context.Context, programID, customerID int64) (money.History, error) {
	return scanHistory(t.tx.QueryRow(ctx, historySQL, programID, customerID), customerID)
}

// DecisionInputs is Program, LockCustomer and CustomerHistory pipelined in
// one round trip (Postgres runs them in that order).
func (t *tx) DecisionInputs(ctx context.Context, programID, customerID int64) (ledger.Program, money.History, error) {
	if in := t.inputs; in != nil {
		t.inputs = nil
		if in.programID == programID && in.customerID == customerID {
			return in.prog, in.hist, in.err
		}
	}
	b := &pgx.Batch{}
	queueDecisionInputs(b, programID, customerID)
	br := t.tx.SendBatch(ctx, b)
	defer br.Close()
	prog, hist, err := readDecisionInputs(br, programID, customerID)
	if err != nil && !errors.Is(err, ledger.ErrProgramUnknown) {
		return prog, hist, err
	}
	if cerr := br.Close(); cerr != nil {
		return ledger.Program{}, money.History{}, fmt.Errorf("decision inputs of customer %d: %w", customerID, cerr)
	}
	return prog, hist, err
}

func queueDecisionInputs(b *pgx.Batch, programID, customerID int64) {
	b.Queue(programSQL, programID)
	b.Queue(lockCustomerSQL, customerLockKey(programID, customerID))
	b.Queue(historySQL, programID, customerID)
}

// readDecisionInputs reads what queueDecisionInputs queued; an unknown
// program is ledger.ErrProgramUnknown with the history still read.
func readDecisionInputs(br pgx.BatchResults, programID, customerID int64) (ledger.Program, money.History, error) {
	prog, progErr := scanProgram(br.QueryRow(), programID)
	if progErr != nil && !errors.Is(progErr, ledger.ErrProgramUnknown) {
		return ledger.Program{}, money.History{}, progErr
	}
	if _, err := br.Exec(); err != nil {
		return ledger.Program{}, money.History{}, fmt.Errorf("lock customer %d of program %d: %w", customerID, programID, err)
	}
	hist, err := scanHistory(br.QueryRow(), customerID)
	if err != nil {
		return ledger.Program{}, money.History{}, err
	}
	return prog, hist, progErr
}

const saleColumns = `id, transaction_id, program_id, customer_id, customer_click_id, partner_id, amount_cents, currency, refunded_cents,
	is_test, source, COALESCE(commission_state, ''), reserved, COALESCE(attribution_ref::text, ''), occurred_at, created_at`

func scanSale(row pgx.Row) (ledger.Sale, error) {
	var s ledger.Sale
	var cur, ref string
	err := row.Scan(&s.ID, &s.TransactionID, &s.ProgramID, &s.CustomerID, &s.CustomerClickID, &s.PartnerID, &s.Amount.Minor, &cur, &s.RefundedCents,
		&s.Test, &s.Source, &s.CommissionState, &s.Reserved, &ref, &s.OccurredAt, &s.CreatedAt)
	if ref != "" {
		s.AttributionRef = []byte(ref)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Sale{}, ledger.ErrSaleNotFound
	}
	s.Amount.Currency = money.Currency(cur)
	s.OccurredAt, s.CreatedAt = s.OccurredAt.UTC(), s.CreatedAt.UTC()
	return s, err
}

// InsertSale inserts s; a transaction id already recorded (by a committed
// transaction, or one that commits while this one waits on the unique
// key) is a *ledger.DuplicateSaleError naming that sale.
func (t *tx) InsertSale(ctx context.Context, s *ledger.Sale) error {
	if err := insertSale(ctx, t.tx, s); err != nil {
		return err
	}
	if s.Reserved {
		// Its event is written when it is completed (CompleteSale).
		return nil
	}
	return t.publishSale(ctx, s)
}

// ReserveSale inserts a reserved sale in one statement of its own (no
// event to write with it, so no transaction: one round trip), with the
// reservations of the concurrent sales (pg.Group): one statement and one
// commit for all of them.
func (s *Store) ReserveSale(ctx context.Context, sale *ledger.Sale) error {
	if !sale.Reserved {
		return fmt.Errorf("reserve sale %q: not marked reserved: %w", sale.TransactionID, ledger.ErrInvalidInput)
	}
	id, err := s.reserve.Do(ctx, sale)
	if err != nil {
		return err
	}
	sale.ID = id
	return nil
}

// reserveSales inserts reserved sales in one statement (a call alone
// too: one statement for the plan test to see): each gets its id, or a *ledger.DuplicateSaleError
// naming the sale that holds its transaction id, recorded before or first
// of the group.
func (s *Store) reserveSales(ctx context.Context, sales []*ledger.Sale) ([]pg.GroupResult[int64], error) {
	res := make([]pg.GroupResult[int64], len(sales))
	n := len(sales)
	txns, programs, amounts := make([]string, n), make([]int64, n), make([]int64, n)
	customers, partners, clicks := make([]int64, n), make([]int64, n), make([]string, n)
	currencies, sources, refs := make([]string, n), make([]string, n), make([]*string, n)
	occurred, created := make([]time.Time, n), make([]time.Time, n)
	for i, sl := range sales {
		if sl.Test {
			return nil, fmt.Errorf("reserve sale %q: a test sale is never reserved: %w", sl.TransactionID, ledger.ErrInvalidInput)
		}
		txns[i], programs[i], amounts[i] = sl.TransactionID, sl.ProgramID, sl.Amount.Minor
		customers[i], partners[i], clicks[i] = sl.CustomerID, sl.PartnerID, sl.CustomerClickID
		currencies[i], sources[i], occurred[i], created[i] = string(sl.Amount.Currency), sl.Source, sl.OccurredAt, sl.CreatedAt
		if sl.AttributionRef != nil {
			r := string(sl.AttributionRef)
			refs[i] = &r
		}
	}
	// WITH ORDINALITY keeps the group's order, so that of two calls with
	// one transaction id the first is the one recorded, as one after the
	// other would have it.
	rows, err := s.pool.Query(ctx, `INSERT INTO sales (transaction_id, program_id, customer_id, partner_id, amount_cents, currency,
			is_test, source, reserved, attribution_ref, occurred_at, created_at, customer_click_id)
		SELECT t, p, cu, pa, a, c, false, src, true, r::jsonb, o, cr, cl
		FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::text[],
				$9::timestamptz[], $10::timestamptz[], $11::text[])
			WITH ORDINALITY AS u(t, p, cu, pa, a, c, src, r, o, cr, cl, n)
		ORDER BY n
		ON CONFLICT (is_test, transaction_id) DO NOTHING RETURNING id, transaction_id`,
		txns, programs, customers, partners, amounts, currencies, sources, refs, occurred, created, clicks)
	if err != nil {
		return nil, fmt.Errorf("store %d reserved sales: %w", n, err)
	}
	ids := make(map[string]int64, n)
	for rows.Next() {
		var id int64
		var txn string
		if err := rows.Scan(&id, &txn); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store %d reserved sales: %w", n, err)
		}
		ids[txn] = id
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store %d reserved sales: %w", n, err)
	}
	var dups []string
	for i, sl := range sales {
		if id, ok := ids[sl.TransactionID]; ok {
			res[i].Out = id
			delete(ids, sl.TransactionID) // a second call with the id is a duplicate of this one
			continue
		}
		dups = append(dups, sl.TransactionID)
	}
	if len(dups) == 0 {
		return res, nil
	}
	// The ids the duplicates stand behind, in one statement.
	prev := make(map[string]int64, len(dups))
	rows, err = s.pool.Query(ctx, `SELECT id, transaction_id FROM sales WHERE transaction_id = ANY($1::text[]) AND NOT is_test`, dups)
	if err != nil {
		return nil, fmt.Errorf("load duplicate sales: %w", err)
	}
	for rows.Next() {
		var id int64
		var txn string
		if err := rows.Scan(&id, &txn); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load duplicate sales: %w", err)
		}
		prev[txn] = id
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load duplicate sales: %w", err)
	}
	for i, sl := range sales {
		if res[i].Out != 0 {
			continue
		}
		id, ok := prev[sl.TransactionID]
		if !ok {
			res[i].Err = fmt.Errorf("load duplicate sale %q: %w", sl.TransactionID, pgx.ErrNoRows)
			continue
		}
		res[i].Err = &ledger.DuplicateSaleError{SaleID: id}
	}
	return res, nil
}

// ReleaseSale deletes a sale still reserved, in one statement.
func (s *Store) ReleaseSale(ctx context.Context, id int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM sales WHERE id = $1 AND reserved`, id)
	if err != nil {
		return false, fmt.Errorf("release sale %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// queryRower is a pool, a connection or a transaction.
type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func insertSale(ctx context.Context, q queryRower, s *ledger.Sale) error {
	var ref *string
	if s.AttributionRef != nil {
		r := string(s.AttributionRef)
		ref = &r
	}
	err := q.QueryRow(ctx, `INSERT INTO sales (transaction_id, program_id, customer_id, partner_id, amount_cents, currency,
			is_test, source, reserved, attribution_ref, occurred_at, created_at, customer_click_id)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10::jsonb,$11,$12,$13)
		ON CONFLICT (is_test, transaction_id) DO NOTHING RETURNING id`,
		s.TransactionID, s.ProgramID, s.CustomerID, s.PartnerID, s.Amount.Minor, string(s.Amount.Currency),
		s.Test, s.Source, s.Reserved, ref, s.OccurredAt, s.CreatedAt, s.CustomerClickID).Scan(&s.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		var prev int64
		if err := q.QueryRow(ctx, `SELECT id FROM sales WHERE transaction_id = $1 AND is_test = $2`, s.TransactionID, s.Test).Scan(&prev); err != nil {
			return fmt.Errorf("load duplicate sale %q: %w", s.TransactionID, err)
		}
		return &ledger.DuplicateSaleError{SaleID: prev}
	}
	if err != nil {
		return fmt.Errorf("store sale %q: %w", s.TransactionID, err)
	}
	return nil
}

// CompleteSale turns a reserved sale into a recorded one with its
// attribution, filling s from the row, and writes its event; a sale no
// longer reserved is ledger.ErrSaleNotFound. The UPDATE locks the row, so
// it also serves as the lock (one round trip for both).
//
// With s.ProgramID set (the caller knows the sale's program), the sale is
// locked with its DecisionInputs (program, customer lock, history) read in
// the same round trip, answered by the next DecisionInputs call, and the
// UPDATE rides with the commit (completeWithInputs).
func (t *tx) CompleteSale(ctx context.Context, s *ledger.Sale) error {
	const completeSQL = `UPDATE sales SET reserved = false, customer_id = $2, partner_id = $3, customer_click_id = $4
		WHERE id = $1 AND reserved RETURNING ` + saleColumns
	var done ledger.Sale
	var err error
	if s.ProgramID == 0 || s.CustomerID == 0 {
		done, err = scanSale(t.tx.QueryRow(ctx, completeSQL, s.ID, s.CustomerID, s.PartnerID, s.CustomerClickID))
	} else {
		done, err = t.completeWithInputs(ctx, s)
	}
	if errors.Is(err, ledger.ErrSaleNotFound) {
		return fmt.Errorf("complete sale %d: not reserved: %w", s.ID, ledger.ErrSaleNotFound)
	}
	if err != nil {
		return fmt.Errorf("complete sale %d: %w", s.ID, err)
	}
	*s = done
	return t.publishSale(ctx, s)
}

// completeWithInputs locks the reserved sale and reads its decision inputs
// in one batch of two statements; the inputs are kept for DecisionInputs.
// The first statement locks the sale (FOR UPDATE), then the customer's
// advisory lock (the lock order: sale, then customer); the second, with a
// snapshot taken after both, reads the program, the customer's history and
// the id the commission will take (InsertCommission then rides with the
// commit). The completion's UPDATE itself rides with the commit too, and
// takes the commission state SetCommissionState gives it before then: the
// sale gets one new row version, not two.
func (t *tx) completeWithInputs(ctx context.Context, s *ledger.Sale) (ledger.Sale, error) {
	r, ok := t.completionReads[s.ID]
	if ok && r.programID == s.ProgramID && r.customerID == s.CustomerID {
		delete(t.completionReads, s.ID)
	} else {
		rs, err := t.lockForCompletions(ctx, []ledger.Sale{*s})
		if err != nil {
			return ledger.Sale{}, err
		}
		r = rs[0]
	}
	if r.err != nil {
		return r.sale, r.err
	}
	done, in := r.sale, r.inputs
	if in.err == nil {
		t.commissionIDs = append(t.commissionIDs, r.commissionID)
	}
	t.inputs = &in
	// The completion rides with the commit, with the commission state
	// when the decision sets one before then (one row version, not two).
	done.Reserved, done.CustomerID, done.PartnerID, done.CustomerClickID = false, s.CustomerID, s.PartnerID, s.CustomerClickID
	if t.completions == nil {
		t.completions = map[int64][]any{}
	}
	t.completions[s.ID] = t.deferRow(completeSales, fmt.Sprintf("complete sale %d", s.ID),
		s.ID, s.CustomerID, s.PartnerID, s.CustomerClickID, nil)
	return done, nil
}

// completionRead is what completeWithInputs read for one sale.
type completionRead struct {
	programID, customerID int64
	sale                  ledger.Sale
	inputs                decisionInputs
	commissionID          int64
	err                   error
}

// ReadAheadCompletions does completeWithInputs' locks and reads for each
// of sales (ID, ProgramID and CustomerID set) in one round trip, in their
// order; CompleteSale of each then answers from them.
func (t *tx) ReadAheadCompletions(ctx context.Context, sales []ledger.Sale) error {
	rs, err := t.lockForCompletions(ctx, sales)
	if err != nil {
		return err
	}
	if t.completionReads == nil {
		t.completionReads = make(map[int64]completionRead, len(sales))
	}
	for i := range sales {
		t.completionReads[sales[i].ID] = rs[i]
	}
	return nil
}

// lockForCompletions does completeWithInputs' locks and reads for every one
// of sales (distinct ids and customers) in one round trip of two
// statements, whatever their number. The first locks each sale (FOR
// UPDATE, by its primary key alone: "AND reserved" beside the id let the
// planner read the whole index of reserved sales instead, which grows
// while tracking cannot answer; LIMIT keeps the planner from moving the
// outer condition in) and, when it is still
// reserved, its customer's advisory lock, sale by sale in their order (the
// lock order: sale, then customer); the second, with a
// snapshot taken after all of them, reads each sale's program, its
// customer's history and the id its commission will take. A sale no
// longer reserved has ledger.ErrSaleNotFound; any other failure is the
// error.
func (t *tx) lockForCompletions(ctx context.Context, sales []ledger.Sale) ([]completionRead, error) {
	n := len(sales)
	ids, locks, programs, customers := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	out := make([]completionRead, n)
	for i, s := range sales {
		ids[i], locks[i], programs[i], customers[i] = s.ID, customerLockKey(s.ProgramID, s.CustomerID), s.ProgramID, s.CustomerID
		out[i] = completionRead{programID: s.ProgramID, customerID: s.CustomerID, err: ledger.ErrSaleNotFound,
			inputs: decisionInputs{programID: s.ProgramID, customerID: s.CustomerID, err: ledger.ErrProgramUnknown}}
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT k.i, pg_advisory_xact_lock(k.lock)::text, s.*
		FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS k(id, lock, i)
		CROSS JOIN LATERAL (SELECT `+saleColumns+` FROM sales WHERE id = k.id LIMIT 1 FOR UPDATE) s WHERE s.reserved`, ids, locks)
	b.Queue(`SELECT k.i, p.advertiser_id, p.commission_type, p.commission_rate, p.duration_months, p.hold_days, p.currency,
			p.lead_commission, (SELECT min(s.occurred_at) FROM commissions c JOIN sales s ON s.id = c.sale_id
				WHERE c.kind = 'sale' AND c.program_id = k.p AND c.customer_id = k.c), nextval('commissions_id_seq')
		FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS k(p, c, i) JOIN programs p ON p.id = k.p`, programs, customers)
	br := t.tx.SendBatch(ctx, b)
	err := readCompletions(br, out)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("lock %d sales to complete: %w", n, err)
	}
	for i := range out {
		if in := &out[i].inputs; in.err == ledger.ErrProgramUnknown {
			in.err = fmt.Errorf("program %d not in the catalog replica: %w", in.programID, ledger.ErrProgramUnknown)
		}
	}
	return out, nil
}

// readCompletions reads lockForCompletions' results into out.
func readCompletions(br pgx.BatchResults, out []completionRead) error {
	err := readPlaces(br, len(out), func(row pgx.Row) (ledger.Sale, error) {
		var locked string
		return scanSale(leading(row, &locked))
	}, func(i int, s ledger.Sale) error {
		out[i].sale, out[i].err = s, nil
		return nil
	})
	if err != nil {
		return fmt.Errorf("sales: %w", err)
	}
	type inputs struct {
		prog         ledger.Program
		first        *time.Time
		commissionID int64
	}
	err = readPlaces(br, len(out), func(row pgx.Row) (in inputs, err error) {
		in.prog, err = scanProgram(withExtra(row, &in.first, &in.commissionID), 0)
		return in, err
	}, func(i int, in inputs) error {
		r := &out[i]
		in.prog.ID = r.programID
		r.inputs.prog, r.inputs.err, r.commissionID = in.prog, nil, in.commissionID
		if in.first != nil {
			r.inputs.hist = money.History{FirstCommissionedAt: in.first.UTC(), HasSaleCommission: true}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("programs: %w", err)
	}
	return nil
}

// extraColumn scans a row into a scan function's destinations and the
// extra columns after them.
type extraColumn struct {
	pgx.Row
	extra []any
}

func withExtra(row pgx.Row, extra ...any) extraColumn { return extraColumn{row, extra} }

func (r extraColumn) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.extra...)...) }

func (t *tx) publishSale(ctx context.Context, s *ledger.Sale) error {
	return t.publish(ctx, eventsv1.TypeLedgerSaleRecorded, s.ProgramID, s.CreatedAt, &eventsv1.LedgerSaleRecorded{
		SaleId: s.ID, TransactionId: s.TransactionID, ProgramId: s.ProgramID, CustomerId: s.CustomerID, PartnerId: s.PartnerID,
		AmountCents: s.Amount.Minor, Currency: string(s.Amount.Currency), IsTest: s.Test, Source: s.Source, OccurredAt: ts(s.OccurredAt),
	})
}

// LockSale reads and locks a sale by id.
func (t *tx) LockSale(ctx context.Context, id int64) (ledger.Sale, error) {
	s, err := scanSale(t.tx.QueryRow(ctx, `SELECT `+saleColumns+` FROM sales WHERE id = $1 FOR UPDATE`, id))
	if err != nil && !errors.Is(err, ledger.ErrSaleNotFound) {
		return s, fmt.Errorf("lock sale %d: %w", id, err)
	}
	return s, err
}

// LockSaleByTransaction reads and locks the sale of a transaction id, in
// programID (0: any).
func (t *tx) LockSaleByTransaction(ctx context.Context, programID int64, transactionID string) (ledger.Sale, error) {
	s, err := scanSale(t.tx.QueryRow(ctx, `SELECT `+saleColumns+` FROM sales
		WHERE transaction_id = $1 AND ($2::bigint = 0 OR program_id = $2::bigint) AND NOT reserved
		ORDER BY is_test LIMIT 1 FOR UPDATE`, transactionID, programID))
	if err != nil && !errors.Is(err, ledger.ErrSaleNotFound) {
		return s, fmt.Errorf("lock sale %q: %w", transactionID, err)
	}
	return s, err
}

const (
	// refundKeys are a group's refunds as rows k (t: transaction id, p:
	// program id or 0, rid: refund id or '', r: requested cents, i: the
	// refund's place from 1), and refundSale the sale each names, as
	// LockSaleByTransaction finds it.
	refundKeys = `unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[]) WITH ORDINALITY AS k(t, p, rid, r, i)`
	refundSale = `SELECT id FROM sales WHERE transaction_id = k.t AND (k.p = 0 OR program_id = k.p) AND NOT reserved
		ORDER BY is_test LIMIT 1`
	refundNextIDs = `nextval('refunds_id_seq'), nextval('notifications_id_seq'), nextval('notifications_id_seq')`
)

// LockSaleForRefund locks the sale as LockSaleByTransaction and, in the
// same round trip, reads ahead its commission (locked after it, as
// SaleCommission would), whether the refund was applied (requested > 0)
// and the ids of the refund row and of its notifications (a refund sends
// at most two): unused ids are a gap in a sequence, nothing more. A lock
// ReadAheadRefunds took is answered without a round trip.
func (t *tx) LockSaleForRefund(ctx context.Context, programID int64, transactionID, refundID string, requested int64) (ledger.Sale, error) {
	k := ledger.RefundLock{ProgramID: programID, TransactionID: transactionID, RefundID: refundID, Requested: requested}
	if l, ok := t.refundLocks[k]; ok {
		delete(t.refundLocks, k)
		return t.useRefundLock(l)
	}
	ls, err := t.lockForRefunds(ctx, []ledger.RefundLock{k})
	if err != nil {
		return ledger.Sale{}, err
	}
	return t.useRefundLock(ls[0])
}

// ReadAheadRefunds takes LockSaleForRefund's locks and reads of each
// refund in one round trip, in their order; each LockSaleForRefund call
// for one of them then answers from them.
func (t *tx) ReadAheadRefunds(ctx context.Context, refunds []ledger.RefundLock) error {
	ls, err := t.lockForRefunds(ctx, refunds)
	if err != nil {
		return err
	}
	if t.refundLocks == nil {
		t.refundLocks = make(map[ledger.RefundLock]refundLocked, len(refunds))
	}
	for i, k := range refunds {
		t.refundLocks[k] = ls[i]
	}
	return nil
}

// refundLocked is what LockSaleForRefund read for one refund.
type refundLocked struct {
	sale               ledger.Sale
	err                error
	ahead              *refundAhead
	refundIDs, noteIDs []int64
}

func (t *tx) useRefundLock(l refundLocked) (ledger.Sale, error) {
	if l.err != nil {
		return l.sale, l.err
	}
	t.ahead, t.refundIDs, t.noteIDs = l.ahead, l.refundIDs, l.noteIDs
	return l.sale, nil
}

// lockForRefunds does LockSaleForRefund's locks and reads for every one of
// refunds (distinct transaction ids) in one round trip of at most three
// statements, whatever their number: the sales locked in the refunds'
// order with the ids their rows will take, then their commissions locked,
// then which refunds were applied already. A refund whose sale is not
// found has ledger.ErrSaleNotFound; any other failure is the error.
func (t *tx) lockForRefunds(ctx context.Context, refunds []ledger.RefundLock) ([]refundLocked, error) {
	n := len(refunds)
	ts, ps, rids, rs := make([]string, n), make([]int64, n), make([]string, n), make([]int64, n)
	anyRequested := false
	for i, k := range refunds {
		ts[i], ps[i], rids[i], rs[i] = k.TransactionID, k.ProgramID, k.RefundID, k.Requested
		anyRequested = anyRequested || k.Requested > 0
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT k.i, `+refundNextIDs+`, s.* FROM `+refundKeys+`
		CROSS JOIN LATERAL (SELECT `+saleColumns+` FROM sales
			WHERE transaction_id = k.t AND (k.p = 0 OR program_id = k.p) AND NOT reserved ORDER BY is_test LIMIT 1 FOR UPDATE) s`,
		ts, ps, rids, rs)
	b.Queue(`SELECT k.i, c.* FROM `+refundKeys+` CROSS JOIN LATERAL (`+refundSale+`) s
		CROSS JOIN LATERAL (SELECT `+commissionColumns+` FROM commissions WHERE sale_id = s.id AND kind = 'sale' FOR UPDATE) c`,
		ts, ps, rids, rs)
	if anyRequested {
		// RefundApplied's two questions, each on its partial index, as
		// scalar subqueries in the select list: run per refund by
		// sale_id. As EXISTS (in WHERE, or even here) the generic plan
		// hashed the whole partial index instead, a scan that grows with
		// the refunds without a refund id (the plan test's smallPartial).
		b.Queue(`SELECT k.i, CASE WHEN k.rid <> ''
				THEN (SELECT true FROM refunds WHERE sale_id = s.id AND refund_id = k.rid LIMIT 1) IS NOT NULL
				ELSE (SELECT true FROM refunds
					WHERE sale_id = s.id AND refund_id IS NULL AND requested_cents = k.r AND requested_cents > 0 LIMIT 1) IS NOT NULL END
			FROM `+refundKeys+` CROSS JOIN LATERAL (`+refundSale+`) s WHERE k.r > 0`,
			ts, ps, rids, rs)
	}
	br := t.tx.SendBatch(ctx, b)
	out, err := readRefundLocks(br, refunds, anyRequested)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("lock %d sales for refunds: %w", n, err)
	}
	return out, nil
}

// readRefundLocks reads lockForRefunds' results.
func readRefundLocks(br pgx.BatchResults, refunds []ledger.RefundLock, applied bool) ([]refundLocked, error) {
	out := make([]refundLocked, len(refunds))
	for i := range out {
		out[i].err = ledger.ErrSaleNotFound
	}
	type locked struct {
		sale                    ledger.Sale
		refundSeq, note1, note2 int64
	}
	err := readPlaces(br, len(out), func(row pgx.Row) (l locked, err error) {
		l.sale, err = scanSale(leading(row, &l.refundSeq, &l.note1, &l.note2))
		return l, err
	}, func(i int, l locked) error {
		k := refunds[i]
		out[i] = refundLocked{sale: l.sale, refundIDs: []int64{l.refundSeq}, noteIDs: []int64{l.note1, l.note2},
			ahead: &refundAhead{saleID: l.sale.ID, refundID: k.RefundID, requested: k.Requested, commissionOK: true, appliedOK: k.Requested > 0}}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sales: %w", err)
	}
	err = readPlaces(br, len(out), scanCommission, func(i int, c ledger.Commission) error {
		l := &out[i]
		if l.ahead == nil || l.ahead.hasCommission || c.SaleID != l.sale.ID {
			return fmt.Errorf("commission %d of sale %d read for refund %d", c.ID, c.SaleID, i+1)
		}
		l.ahead.commission, l.ahead.hasCommission = c, true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("commissions: %w", err)
	}
	if !applied {
		return out, nil
	}
	err = readPlaces(br, len(out), func(row pgx.Row) (done bool, err error) {
		return done, row.Scan(&done)
	}, func(i int, done bool) error {
		if out[i].ahead == nil {
			return fmt.Errorf("refund %d has no sale", i+1)
		}
		out[i].ahead.applied = done
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("refunds applied: %w", err)
	}
	return out, nil
}

// readPlaces reads the next of br's results, whose rows each start with
// the place of the call they answer (k.i: 1 … n): scan reads the rest of a
// row, put keeps it for the call at index place-1.
func readPlaces[T any](br pgx.BatchResults, n int, scan func(pgx.Row) (T, error), put func(i int, v T) error) error {
	rows, _ := br.Query()
	defer rows.Close()
	for rows.Next() {
		var place int64
		v, err := scan(leading(rows, &place))
		if err != nil {
			return err
		}
		if place < 1 || place > int64(n) {
			return fmt.Errorf("a row for call %d of %d", place, n)
		}
		if err := put(int(place-1), v); err != nil {
			return err
		}
	}
	return rows.Err()
}

// leadingColumns scans a row's first columns into lead and the rest into a
// scan function's destinations.
type leadingColumns struct {
	pgx.Row
	lead []any
}

func leading(row pgx.Row, lead ...any) leadingColumns { return leadingColumns{row, lead} }

func (r leadingColumns) Scan(dest ...any) error { return r.Row.Scan(slices.Concat(r.lead, dest)...) }

// SetCommissionState is sent with the transaction's last batch (flush):
// the sale is locked already and nothing reads the state back.
func (t *tx) SetCommissionState(_ context.Context, saleID int64, state string) error {
	if row, ok := t.completions[saleID]; ok {
		row[4] = state
		if state == "" {
			row[4] = nil
		}
		return nil
	}
	t.deferExec(fmt.Sprintf("record commission state of sale %d", saleID),
		`UPDATE sales SET commission_state = $2 WHERE id = $1`, saleID, state)
	return nil
}

// SetSaleRefunded is sent with the transaction's last batch (flush): the
// sale is locked already and nothing reads the total back.
func (t *tx) SetSaleRefunded(_ context.Context, saleID, refunded int64) error {
	t.deferRow(setSalesRefunded, fmt.Sprintf("record refunded total of sale %d", saleID), saleID, refunded)
	return nil
}

const commissionColumns = `id, COALESCE(sale_id, 0), program_id, partner_id, customer_id, customer_click_id, kind, status, amount, currency,
	refunded_amount, credited, reason, hold_until, approved_at, created_at`

func scanCommission(row pgx.Row) (ledger.Commission, error) {
	var c ledger.Commission
	var status, cur string
	err := row.Scan(&c.ID, &c.SaleID, &c.ProgramID, &c.PartnerID, &c.CustomerID, &c.CustomerClickID, &c.Kind, &status, &c.Amount.Minor, &cur,
		&c.Refunded, &c.Credited, &c.Reason, &c.HoldUntil, &c.ApprovedAt, &c.CreatedAt)
	c.Status, c.Amount.Currency = money.Status(status), money.Currency(cur)
	c.HoldUntil, c.CreatedAt = c.HoldUntil.UTC(), c.CreatedAt.UTC()
	if c.ApprovedAt != nil {
		at := c.ApprovedAt.UTC()
		c.ApprovedAt = &at
	}
	return c, err
}

func scanCommissions(rows pgx.Rows, err error) ([]ledger.Commission, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ledger.Commission
	for rows.Next() {
		c, err := scanCommission(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// InsertCommission inserts c unless its sale (or its lead) has one. A sale
// commission whose id completeWithInputs took rides with the commit: its
// sale was reserved until this transaction's completion locked it, so it
// cannot have one yet (if it did, the commit fails on the key).
func (t *tx) InsertCommission(ctx context.Context, c *ledger.Commission) (bool, error) {
	var saleID any
	if c.SaleID != 0 {
		saleID = c.SaleID
	}
	const insert = `INSERT INTO commissions (sale_id, program_id, partner_id, customer_id, kind, status, amount, currency,
			credited, reason, hold_until, approved_at, created_at, updated_at, customer_click_id, id)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$13,$14,`
	args := []any{saleID, c.ProgramID, c.PartnerID, c.CustomerID, c.Kind, string(c.Status), c.Amount.Minor, string(c.Amount.Currency),
		c.Credited, c.Reason, c.HoldUntil, c.ApprovedAt, c.CreatedAt, c.CustomerClickID}
	if c.Kind == ledger.KindSale && c.SaleID != 0 && len(t.commissionIDs) > 0 {
		c.ID, t.commissionIDs = t.commissionIDs[0], t.commissionIDs[1:]
		t.deferRow(insertCommissions, fmt.Sprintf("store commission of sale %d", c.SaleID), c.ID, saleID, c.ProgramID, c.PartnerID,
			c.CustomerID, c.Kind, string(c.Status), c.Amount.Minor, string(c.Amount.Currency), c.Credited, c.Reason, c.HoldUntil,
			c.ApprovedAt, c.CreatedAt, c.CreatedAt, c.CustomerClickID)
	} else {
		err := t.tx.QueryRow(ctx, insert+`nextval('commissions_id_seq')) ON CONFLICT DO NOTHING RETURNING id`, args...).Scan(&c.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("store commission of sale %d: %w", c.SaleID, err)
		}
	}
	if t.ahead != nil {
		t.ahead.commissionOK = false // read before this commission existed
	}
	return true, t.publish(ctx, eventsv1.TypeCommissionCreated, c.ProgramID, c.CreatedAt, &eventsv1.CommissionCreated{
		CommissionId: c.ID, SaleId: c.SaleID, ProgramId: c.ProgramID, PartnerId: c.PartnerID, CustomerId: c.CustomerID,
		Kind: c.Kind, Status: string(c.Status), Amount: c.Amount.Minor, Currency: string(c.Amount.Currency),
		HoldUntil: ts(c.HoldUntil), CreatedAt: ts(c.CreatedAt),
	})
}

// LeadCommission reads the lead commission of a customer in a program.
func (t *tx) LeadCommission(ctx context.Context, programID, customerID int64) (ledger.Commission, bool, error) {
	c, err := scanCommission(t.tx.QueryRow(ctx, `SELECT `+commissionColumns+` FROM commissions
		WHERE program_id = $1 AND customer_id = $2 AND kind = 'lead'`, programID, customerID))
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Commission{}, false, nil
	}
	if err != nil {
		return ledger.Commission{}, false, fmt.Errorf("load lead commission of customer %d: %w", customerID, err)
	}
	return c, true, nil
}

// SaleCommission reads and locks the commission of a sale (or answers what
// LockSaleForRefund read ahead, once).
func (t *tx) SaleCommission(ctx context.Context, saleID int64) (ledger.Commission, bool, error) {
	if a := t.ahead; a != nil && a.commissionOK && a.saleID == saleID {
		a.commissionOK = false
		return a.commission, a.hasCommission, nil
	}
	c, err := scanCommission(t.tx.QueryRow(ctx, `SELECT `+commissionColumns+` FROM commissions
		WHERE sale_id = $1 AND kind = 'sale' FOR UPDATE`, saleID))
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Commission{}, false, nil
	}
	if err != nil {
		return ledger.Commission{}, false, fmt.Errorf("lock commission of sale %d: %w", saleID, err)
	}
	return c, true, nil
}

// UpdateCommission writes the mutable fields of c, with the transaction's
// last batch (flush): every caller locked c before (SaleCommission,
// DuePending) and nothing reads it back.
func (t *tx) UpdateCommission(ctx context.Context, c ledger.Commission, ch ledger.StatusChange) error {
	t.deferRow(updateCommissions, fmt.Sprintf("update commission %d", c.ID),
		c.ID, string(c.Status), c.Refunded, c.Credited, c.Reason, c.ApprovedAt, ch.At)
	return t.publish(ctx, eventsv1.TypeCommissionStatusChanged, c.ProgramID, ch.At, &eventsv1.CommissionStatusChanged{
		CommissionId: c.ID, SaleId: c.SaleID, ProgramId: c.ProgramID, PartnerId: c.PartnerID,
		FromStatus: string(ch.From), ToStatus: string(c.Status), Amount: c.Amount.Minor, RefundedAmount: c.Refunded,
		Currency: string(c.Amount.Currency), Deduction: ch.Deduction, Credited: c.Credited, Reason: c.Reason, ChangedAt: ts(ch.At),
	})
}

// noOpenDispute is the condition on commissions (the table's own name) that
// its sale has no open dispute (a lead commission has no sale).
const noOpenDispute = `NOT EXISTS (SELECT 1 FROM disputes d WHERE d.sale_id = commissions.sale_id AND d.status = 'open')`

// DuePending locks pending commissions whose hold ended, skipping locked ones
// and those whose sale has an open dispute.
//
// The dispute check runs twice. The locking SELECT judges it in the
// statement's snapshot: a dispute committed after that snapshot, by an
// OpenDispute that held the commission's lock and released it before this
// statement reached the row, would be missed (it only locked the row, so
// Postgres does not re-check it). Once the rows are locked, a second
// statement (a fresh snapshot under READ COMMITTED) drops those whose sale
// has an open dispute by now; any later OpenDispute waits for this
// transaction's locks and finds the commission approved.
func (t *tx) DuePending(ctx context.Context, now time.Time, limit int) ([]ledger.Commission, error) {
	cs, err := scanCommissions(t.tx.Query(ctx, `SELECT `+commissionColumns+` FROM commissions
		WHERE status = 'pending' AND hold_until <= $1 AND `+noOpenDispute+`
		ORDER BY hold_until, id LIMIT $2 FOR UPDATE OF commissions SKIP LOCKED`, now, limit))
	if err != nil {
		return nil, fmt.Errorf("lock due commissions: %w", err)
	}
	var sales []int64
	for _, c := range cs {
		if c.SaleID != 0 {
			sales = append(sales, c.SaleID)
		}
	}
	if len(sales) == 0 {
		return cs, nil
	}
	rows, err := t.tx.Query(ctx, `SELECT DISTINCT sale_id FROM disputes WHERE status = 'open' AND sale_id = ANY($1)`, sales)
	if err != nil {
		return nil, fmt.Errorf("disputes of due commissions: %w", err)
	}
	disputed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("disputes of due commissions: %w", err)
	}
	if len(disputed) == 0 {
		return cs, nil
	}
	return slices.DeleteFunc(cs, func(c ledger.Commission) bool { return slices.Contains(disputed, c.SaleID) }), nil
}

// CreditedCommissions lists the partner's credited commissions in c, oldest first.
func (t *tx) CreditedCommissions(ctx context.Context, partnerID int64, c money.Currency) ([]ledger.Commission, error) {
	cs, err := scanCommissions(t.tx.Query(ctx, `SELECT `+commissionColumns+` FROM commissions
		WHERE partner_id = $1 AND currency = $2 AND credited ORDER BY created_at, id`, partnerID, string(c)))
	if err != nil {
		return nil, fmt.Errorf("credited commissions of partner %d: %w", partnerID, err)
	}
	return cs, nil
}

// ProgramCreditedCommissions lists the partner's credited commissions of
// one program in c, oldest first (commissions_program_credited serves the
// predicate; the few rows are sorted).
func (t *tx) ProgramCreditedCommissions(ctx context.Context, programID, partnerID int64, c money.Currency) ([]ledger.Commission, error) {
	cs, err := scanCommissions(t.tx.Query(ctx, `SELECT `+commissionColumns+` FROM commissions
		WHERE program_id = $1 AND partner_id = $2 AND currency = $3 AND credited ORDER BY created_at, id`, programID, partnerID, string(c)))
	if err != nil {
		return nil, fmt.Errorf("credited commissions of partner %d in program %d: %w", partnerID, programID, err)
	}
	return cs, nil
}

// RefundApplied: a refund of the sale with that refund id, or, without
// one, with the same requested amount and no refund id.
func (t *tx) RefundApplied(ctx context.Context, saleID int64, refundID string, requested int64) (bool, error) {
	if a := t.ahead; a != nil && a.appliedOK && a.saleID == saleID && a.refundID == refundID && a.requested == requested {
		a.appliedOK = false
		return a.applied, nil
	}
	var found bool
	var err error
	if refundID != "" {
		err = t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM refunds WHERE sale_id = $1 AND refund_id = $2)`, saleID, refundID).Scan(&found)
	} else {
		err = t.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM refunds WHERE sale_id = $1 AND refund_id IS NULL AND requested_cents = $2)`,
			saleID, requested).Scan(&found)
	}
	if err != nil {
		return false, fmt.Errorf("look up refund of sale %d: %w", saleID, err)
	}
	return found, nil
}

// InsertRefund stores r; s is the sale after it.
func (t *tx) InsertRefund(ctx context.Context, r *ledger.Refund, s ledger.Sale) error {
	var commissionID, refundID, cur any
	if r.CommissionID != 0 {
		commissionID, cur = r.CommissionID, string(r.Currency)
	}
	if r.RefundID != "" {
		refundID = r.RefundID
	}
	if err := t.notificationIDs(ctx, r.Notifications); err != nil {
		return err
	}
	// The pending notifications are encoded only if they are written:
	// NotifyRefundAtCommit usually takes them out of the row, and then only
	// its fallback (the notifications could not be written) needs them.
	var pending any
	if len(r.Notifications) > 0 {
		pending = pendingJSON(toPending(r.Notifications))
	}
	args := []any{r.SaleID, commissionID, refundID, r.Requested, r.Applied, r.Deduction, r.Debited, cur, r.Reason, pending, r.CreatedAt}
	if len(t.refundIDs) > 0 {
		// The id was taken ahead: the row rides with the commit.
		r.ID, t.refundIDs = t.refundIDs[0], t.refundIDs[1:]
		if t.refundInserts == nil {
			t.refundInserts = map[int64][]any{}
		}
		t.refundInserts[r.ID] = t.deferRow(insertRefunds, fmt.Sprintf("store refund of sale %d", r.SaleID), append([]any{r.ID}, args...)...)
	} else if err := t.tx.QueryRow(ctx, `INSERT INTO refunds (sale_id, commission_id, refund_id, requested_cents, amount_cents, deduction,
			debited, currency, reason, pending_notifications, created_at, id)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10::jsonb,$11,nextval('refunds_id_seq')) RETURNING id`, args...).Scan(&r.ID); err != nil {
		return fmt.Errorf("store refund of sale %d: %w", r.SaleID, err)
	}
	return t.publish(ctx, eventsv1.TypeRefundRecorded, s.ProgramID, r.CreatedAt, &eventsv1.RefundRecorded{
		RefundId: r.ID, SaleId: s.ID, TransactionId: s.TransactionID, ProgramId: s.ProgramID, CommissionId: r.CommissionID,
		ExternalRefundId: r.RefundID, RequestedCents: r.Requested, AmountCents: r.Applied, SaleRefundedCents: s.RefundedCents,
		SaleCurrency: string(s.Amount.Currency), Deduction: r.Deduction, Debited: r.Debited, Currency: string(r.Currency),
		Reason: r.Reason, CreatedAt: ts(r.CreatedAt),
	})
}

// notificationIDs gives each of ns without an id the id it will be stored
// with: taken ahead by LockSaleForRefund, else from the sequence now.
func (t *tx) notificationIDs(ctx context.Context, ns []ledger.Notification) error {
	need := 0
	for i := range ns {
		if ns[i].ID != 0 {
			continue
		}
		if len(t.noteIDs) > 0 {
			ns[i].ID, t.noteIDs = t.noteIDs[0], t.noteIDs[1:]
			continue
		}
		need++
	}
	if need == 0 {
		return nil
	}
	rows, err := t.tx.Query(ctx, `SELECT nextval('notifications_id_seq') FROM generate_series(1, $1)`, need)
	if err != nil {
		return fmt.Errorf("notification ids: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("notification ids: %w", err)
	}
	for i := range ns {
		if ns[i].ID == 0 && len(ids) > 0 {
			ns[i].ID, ids = ids[0], ids[1:]
		}
	}
	return nil
}

// pendingNotification is a notification as refunds.pending_notifications
// keeps it.
type pendingNotification struct {
	// ID is the id the notification is stored with (0 in rows written
	// before ids were given ahead: it gets one when sent).
	ID            int64          `json:"id,omitempty"`
	RecipientKind string         `json:"recipient_kind"`
	RecipientID   int64          `json:"recipient_id"`
	Kind          string         `json:"kind"`
	Payload       map[string]any `json:"payload"`
	ProgramID     int64          `json:"program_id"`
	CreatedAt     time.Time      `json:"created_at"`
}

// pendingJSON is pending_notifications' value, encoded when it is sent
// (driver.Valuer: in any protocol) or queued (pg.Writes), not before.
type pendingJSON []pendingNotification

func (p pendingJSON) Value() (driver.Value, error) {
	raw, err := json.Marshal([]pendingNotification(p))
	return string(raw), err
}

func toPending(ns []ledger.Notification) []pendingNotification {
	out := make([]pendingNotification, 0, len(ns))
	for _, n := range ns {
		out = append(out, pendingNotification{ID: n.ID, RecipientKind: n.RecipientKind, RecipientID: n.RecipientID, Kind: n.Kind,
			Payload: n.Payload, ProgramID: n.ProgramID, CreatedAt: n.CreatedAt})
	}
	return out
}

// TakeRefundNotifications clears a refund's pending notifications and
// returns them; the UPDATE locks the row, so two senders never both get
// them.
func (t *tx) TakeRefundNotifications(ctx context.Context, refundID int64) ([]ledger.Notification, error) {
	var raw []byte
	err := t.tx.QueryRow(ctx, `WITH taken AS (
			SELECT id, pending_notifications FROM refunds WHERE id = $1 AND pending_notifications IS NOT NULL FOR UPDATE)
		UPDATE refunds r SET pending_notifications = NULL FROM taken WHERE r.id = taken.id
		RETURNING taken.pending_notifications`, refundID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("take notifications of refund %d: %w", refundID, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // amounts stay integers
	var pending []pendingNotification
	if err := dec.Decode(&pending); err != nil {
		return nil, fmt.Errorf("notifications of refund %d: %w", refundID, err)
	}
	out := make([]ledger.Notification, 0, len(pending))
	for _, p := range pending {
		out = append(out, ledger.Notification{ID: p.ID, RecipientKind: p.RecipientKind, RecipientID: p.RecipientID, Kind: p.Kind,
			Payload: p.Payload, ProgramID: p.ProgramID, CreatedAt: p.CreatedAt.UTC()})
	}
	return out, nil
}

// RefundsToNotify lists refunds created before olderThan with pending
// notifications, oldest first.
func (s *Store) RefundsToNotify(ctx context.Context, olderThan time.Time, limit int) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM refunds WHERE pending_notifications IS NOT NULL AND created_at < $1
		ORDER BY created_at, id LIMIT $2`, olderThan, limit)
	if err != nil {
		return nil, fmt.Errorf("refunds to notify: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("refunds to notify: %w", err)
	}
	return ids, nil
}

// PostEntry appends e and moves the balance (created at zero when new).
// BalanceChanged is keyed 0: balances are not per program, and one key
// keeps all their changes in one order.
func (t *tx) PostEntry(ctx context.Context, e ledger.Entry) (money.Amount, error) {
	// The entry's refund may be a pending insert (InsertRefund).
	if err := t.sendDeferred(ctx); err != nil {
		return money.Amount{}, err
	}
	cur := string(e.Delta.Currency)
	var bal int64
	err := t.tx.QueryRow(ctx, `INSERT INTO balances (partner_id, currency, balance, updated_at) VALUES ($1,$2,$3,$4)
		ON CONFLICT (partner_id, currency) DO UPDATE SET balance = balances.balance + EXCLUDED.balance, updated_at = EXCLUDED.updated_at
		RETURNING balance`, e.PartnerID, cur, e.Delta.Minor, e.At).Scan(&bal)
	if err != nil {
		return money.Amount{}, fmt.Errorf("move balance of partner %d: %w", e.PartnerID, err)
	}
	var id int64
	err = t.tx.QueryRow(ctx, `INSERT INTO balance_entries (partner_id, currency, delta, kind, commission_id, refund_id, withdrawal_id,
			balance_after, created_at)
		VALUES ($1,$2,$3,$4,NULLIF($5, 0),NULLIF($6, 0),NULLIF($7, 0),$8,$9) RETURNING id`,
		e.PartnerID, cur, e.Delta.Minor, e.Kind, e.CommissionID, e.RefundID, e.WithdrawalID, bal, e.At).Scan(&id)
	if err != nil {
		return money.Amount{}, fmt.Errorf("journal %s of partner %d: %w", e.Kind, e.PartnerID, err)
	}
	out := money.Amount{Minor: bal, Currency: e.Delta.Currency}
	return out, t.publish(ctx, eventsv1.TypeBalanceChanged, 0, e.At, &eventsv1.BalanceChanged{
		EntryId: id, PartnerId: e.PartnerID, Currency: cur, Delta: e.Delta.Minor, Balance: bal, Kind: e.Kind,
		CommissionId: e.CommissionID, WithdrawalId: e.WithdrawalID, ProgramId: e.ProgramID, CreatedAt: ts(e.At),
	})
}

// LockBalance reads and locks a balance; a partner without one has zero
// (and nothing to lock: the first PostEntry creates the row).
func (t *tx) LockBalance(ctx context.Context, partnerID int64, c money.Currency) (money.Amount, error) {
	out := money.Amount{Currency: c}
	err := t.tx.QueryRow(ctx, `SELECT balance FROM balances WHERE partner_id = $1 AND currency = $2 FOR UPDATE`,
		partnerID, string(c)).Scan(&out.Minor)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return out, fmt.Errorf("lock balance of partner %d: %w", partnerID, err)
	}
	return out, nil
}

const withdrawalColumns = `id, partner_id, COALESCE(program_id, 0), reference, currency, amount, requested_amount, status, created_at, updated_at`

func scanWithdrawal(row pgx.Row) (ledger.Withdrawal, error) {
	var w ledger.Withdrawal
	var cur string
	err := row.Scan(&w.ID, &w.PartnerID, &w.ProgramID, &w.Reference, &cur, &w.Amount.Minor, &w.Requested, &w.Status, &w.CreatedAt, &w.UpdatedAt)
	w.Amount.Currency = money.Currency(cur)
	w.CreatedAt, w.UpdatedAt = w.CreatedAt.UTC(), w.UpdatedAt.UTC()
	return w, err
}

func scanWithdrawals(rows pgx.Rows, err error) ([]ledger.Withdrawal, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ledger.Withdrawal
	for rows.Next() {
		w, err := scanWithdrawal(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// OpenWithdrawals lists and locks the open withdrawals, oldest first.
func (t *tx) OpenWithdrawals(ctx context.Context, partnerID int64, c money.Currency) ([]ledger.Withdrawal, error) {
	ws, err := scanWithdrawals(t.tx.Query(ctx, `SELECT `+withdrawalColumns+` FROM withdrawals
		WHERE partner_id = $1 AND currency = $2 AND status = 'open' ORDER BY id FOR UPDATE`, partnerID, string(c)))
	if err != nil {
		return nil, fmt.Errorf("open withdrawals of partner %d: %w", partnerID, err)
	}
	return ws, nil
}

// PaidTotal sums the partner's paid withdrawals in c.
func (t *tx) PaidTotal(ctx context.Context, partnerID int64, c money.Currency) (int64, error) {
	var n int64
	err := t.tx.QueryRow(ctx, `SELECT COALESCE(sum(amount), 0)::bigint FROM withdrawals
		WHERE partner_id = $1 AND currency = $2 AND status = 'paid'`, partnerID, string(c)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("paid withdrawals of partner %d: %w", partnerID, err)
	}
	return n, nil
}

// ProgramFunds reads the partner's running totals in the program
// (program_money's key, migration 00010): the net of its credited
// commissions there and the program's paid and open payouts, in c.
func (t *tx) ProgramFunds(ctx context.Context, programID, partnerID int64, c money.Currency) (ledger.ProgramFunds, error) {
	var f ledger.ProgramFunds
	err := t.tx.QueryRow(ctx, `SELECT earned, paid, open FROM program_money WHERE program_id = $1 AND partner_id = $2 AND currency = $3`,
		programID, partnerID, string(c)).Scan(&f.Earned, &f.Paid, &f.Open)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("funds of partner %d in program %d: %w", partnerID, programID, err)
	}
	return f, nil
}

// CommissionPaid writes the commission's paid event; nothing is stored
// (paid out is derived from the paid withdrawals, see ledger.paidOut).
func (t *tx) CommissionPaid(ctx context.Context, c ledger.Commission, w ledger.Withdrawal, paidAt time.Time) error {
	return t.publish(ctx, eventsv1.TypeCommissionPaid, c.ProgramID, paidAt, &eventsv1.CommissionPaid{
		CommissionId: c.ID, SaleId: c.SaleID, ProgramId: c.ProgramID, PartnerId: c.PartnerID, Kind: c.Kind, Status: string(c.Status),
		Amount: c.Amount.Minor, RefundedAmount: c.Refunded, Currency: string(c.Amount.Currency),
		WithdrawalId: w.ID, WithdrawalProgramId: w.ProgramID, PaidAt: ts(paidAt),
	})
}

func (t *tx) withdrawalEvent(ctx context.Context, w ledger.Withdrawal, ch ledger.WithdrawalChange) error {
	return t.publish(ctx, eventsv1.TypeWithdrawalChanged, 0, w.UpdatedAt, &eventsv1.WithdrawalChanged{
		WithdrawalId: w.ID, PartnerId: w.PartnerID, Currency: string(w.Amount.Currency), Amount: w.Amount.Minor,
		RequestedAmount: w.Requested, Status: w.Status, Change: string(ch), ChangedAt: ts(w.UpdatedAt),
	})
}

func (t *tx) InsertWithdrawal(ctx context.Context, w *ledger.Withdrawal) error {
	err := t.tx.QueryRow(ctx, `INSERT INTO withdrawals (partner_id, program_id, currency, amount, requested_amount, status, created_at, updated_at)
		VALUES ($1,NULLIF($2, 0),$3,$4,$5,$6,$7,$8) RETURNING id`,
		w.PartnerID, w.ProgramID, string(w.Amount.Currency), w.Amount.Minor, w.Requested, w.Status, w.CreatedAt, w.UpdatedAt).Scan(&w.ID)
	if err != nil {
		return fmt.Errorf("store withdrawal of partner %d: %w", w.PartnerID, err)
	}
	return t.withdrawalEvent(ctx, *w, ledger.WithdrawalOpened)
}

// LockWithdrawal locks the partner's balance, then the withdrawal: the
// order every use case takes them in.
func (t *tx) LockWithdrawal(ctx context.Context, id int64) (ledger.Withdrawal, error) {
	var partner int64
	var cur string
	err := t.tx.QueryRow(ctx, `SELECT partner_id, currency FROM withdrawals WHERE id = $1`, id).Scan(&partner, &cur)
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Withdrawal{}, fmt.Errorf("withdrawal %d: %w", id, ledger.ErrWithdrawalNotFound)
	}
	if err != nil {
		return ledger.Withdrawal{}, fmt.Errorf("load withdrawal %d: %w", id, err)
	}
	if _, err := t.LockBalance(ctx, partner, money.Currency(cur)); err != nil {
		return ledger.Withdrawal{}, err
	}
	w, err := scanWithdrawal(t.tx.QueryRow(ctx, `SELECT `+withdrawalColumns+` FROM withdrawals WHERE id = $1 FOR UPDATE`, id))
	if err != nil {
		return ledger.Withdrawal{}, fmt.Errorf("lock withdrawal %d: %w", id, err)
	}
	return w, nil
}

func (t *tx) UpdateWithdrawal(ctx context.Context, w ledger.Withdrawal, ch ledger.WithdrawalChange) error {
	if _, err := t.tx.Exec(ctx, `UPDATE withdrawals SET amount = $2, status = $3, updated_at = $4, reference = $5 WHERE id = $1`,
		w.ID, w.Amount.Minor, w.Status, w.UpdatedAt, w.Reference); err != nil {
		return fmt.Errorf("update withdrawal %d: %w", w.ID, err)
	}
	return t.withdrawalEvent(ctx, w, ch)
}

func (t *tx) InsertNotification(ctx context.Context, n *ledger.Notification) error {
	payload, err := json.Marshal(n.Payload)
	if err != nil {
		return fmt.Errorf("encode notification: %w", err)
	}
	if n.ID != 0 {
		t.deferRow(insertNotifications, fmt.Sprintf("store notification %d", n.ID),
			n.ID, n.RecipientKind, n.RecipientID, n.Kind, string(payload), n.CreatedAt)
	} else {
		err = t.tx.QueryRow(ctx, `INSERT INTO notifications (recipient_kind, recipient_id, kind, payload, created_at)
			VALUES ($1,$2,$3,$4,$5) RETURNING id`, n.RecipientKind, n.RecipientID, n.Kind, string(payload), n.CreatedAt).Scan(&n.ID)
		if err != nil {
			return fmt.Errorf("store notification: %w", err)
		}
	}
	return t.publish(ctx, eventsv1.TypeNotificationCreated, n.ProgramID, n.CreatedAt, &eventsv1.NotificationCreated{
		NotificationId: n.ID, RecipientKind: n.RecipientKind, RecipientId: n.RecipientID, Kind: n.Kind,
		PayloadJson: string(payload), CreatedAt: ts(n.CreatedAt),
	})
}

// refundPendingArg is the index of pending_notifications' value in
// an insertRefunds row.
const refundPendingArg = 10

// NotifyRefundAtCommit queues the refund's pending column cleared, its
// notifications and their events as the transaction's optional writes
// (flush). Every note must have its id (InsertRefund gives them):
// an insert that had to read one back could not wait for the commit.
func (t *tx) NotifyRefundAtCommit(ctx context.Context, refundID int64, notes []ledger.Notification, failed func(error)) error {
	for _, n := range notes {
		if n.ID == 0 {
			return fmt.Errorf("notifications of refund %d: one has no id", refundID)
		}
	}
	// The refund's row not sent yet is stored without its pending
	// notifications; they are written only if the notifications cannot
	// be (the fallback). A row stored already has them cleared instead.
	var err error
	row, taken := t.refundInserts[refundID]
	if taken {
		pending := row[refundPendingArg]
		row[refundPendingArg] = nil
		if t.fallback == nil {
			t.fallback = &pgx.Batch{}
		}
		t.fallback.Queue(`UPDATE refunds SET pending_notifications = $2::jsonb WHERE id = $1`, refundID, pending)
	}
	// The statements below queue where deferExec and publish put them:
	// swap the optional writes and events in for the time of the calls
	// (flush sends the events in one outbox INSERT).
	later, envs := t.later, t.envs
	t.later, t.envs = t.optional, t.optEnvs
	if !taken {
		err = t.ClearRefundNotifications(ctx, refundID)
	}
	for i := 0; err == nil && i < len(notes); i++ {
		n := notes[i]
		err = t.InsertNotification(ctx, &n)
	}
	t.optional, t.optEnvs = t.later, t.envs
	t.later, t.envs = later, envs
	if err != nil {
		return err
	}
	t.optionalFailed = append(t.optionalFailed, failed)
	return nil
}

// ClearRefundNotifications is sent with the transaction's last batch
// (flush), before the notifications' inserts.
func (t *tx) ClearRefundNotifications(_ context.Context, refundID int64) error {
	t.deferExec(fmt.Sprintf("clear notifications of refund %d", refundID),
		`UPDATE refunds SET pending_notifications = NULL WHERE id = $1`, refundID)
	return nil
}

// SaleByTransaction reads a sale by transaction id in programID (0: any).
func (s *Store) SaleByTransaction(ctx context.Context, programID int64, transactionID string) (ledger.Sale, error) {
	sale, err := scanSale(s.pool.QueryRow(ctx, `SELECT `+saleColumns+` FROM sales
		WHERE transaction_id = $1 AND ($2::bigint = 0 OR program_id = $2::bigint) AND NOT reserved
		ORDER BY is_test LIMIT 1`, transactionID, programID))
	if err != nil && !errors.Is(err, ledger.ErrSaleNotFound) {
		return sale, fmt.Errorf("load sale %q: %w", transactionID, err)
	}
	return sale, err
}

// LookupKeyByHash finds a program API key in the catalog replica (the sale
// and refund routes' apikey.Store).
func (s *Store) LookupKeyByHash(ctx context.Context, hash []byte) (apikey.Key, error) {
	return catalogsync.LookupAPIKey(ctx, s.pool, hash)
}

// TestSaleByTransaction reads the test sale of a transaction id.
func (s *Store) TestSaleByTransaction(ctx context.Context, transactionID string) (ledger.Sale, error) {
	sale, err := scanSale(s.pool.QueryRow(ctx, `SELECT `+saleColumns+` FROM sales
		WHERE transaction_id = $1 AND is_test`, transactionID))
	if err != nil && !errors.Is(err, ledger.ErrSaleNotFound) {
		return sale, fmt.Errorf("load test sale %q: %w", transactionID, err)
	}
	return sale, err
}

// ReservedSales lists up to limit sales reserved before olderThan, oldest
// first.
func (s *Store) ReservedSales(ctx context.Context, olderThan time.Time, limit int) ([]ledger.Sale, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+saleColumns+` FROM sales WHERE reserved AND created_at < $1
		ORDER BY created_at, id LIMIT $2`, olderThan, limit)
	if err != nil {
		return nil, fmt.Errorf("reserved sales: %w", err)
	}
	defer rows.Close()
	var out []ledger.Sale
	for rows.Next() {
		sale, err := scanSale(rows)
		if err != nil {
			return nil, fmt.Errorf("reserved sales: %w", err)
		}
		out = append(out, sale)
	}
	return out, rows.Err()
}

// Commission reads a commission.
func (s *Store) Commission(ctx context.Context, id int64) (ledger.Commission, error) {
	c, err := scanCommission(s.pool.QueryRow(ctx, `SELECT `+commissionColumns+` FROM commissions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, fmt.Errorf("commission %d: %w", id, ledger.ErrCommissionNotFound)
	}
	if err != nil {
		return c, fmt.Errorf("load commission %d: %w", id, err)
	}
	return c, nil
}

// SalesWithoutCommission lists undecided sales created before olderThan.
func (s *Store) SalesWithoutCommission(ctx context.Context, olderThan time.Time, limit int) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM sales WHERE commission_state IS NULL AND NOT reserved AND created_at < $1
		ORDER BY created_at, id LIMIT $2`, olderThan, limit)
	if err != nil {
		return nil, fmt.Errorf("sales without commission: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("sales without commission: %w", err)
	}
	return ids, nil
}

// Balances lists the partner's balances with their open withdrawals.
func (s *Store) Balances(ctx context.Context, partnerID int64) ([]ledger.Balance, error) {
	rows, err := s.pool.Query(ctx, `SELECT b.currency, b.balance,
			COALESCE((SELECT sum(w.amount) FROM withdrawals w
				WHERE w.partner_id = b.partner_id AND w.currency = b.currency AND w.status = 'open'), 0)::bigint
		FROM balances b WHERE b.partner_id = $1 ORDER BY b.currency`, partnerID)
	if err != nil {
		return nil, fmt.Errorf("balances of partner %d: %w", partnerID, err)
	}
	defer rows.Close()
	var out []ledger.Balance
	for rows.Next() {
		b := ledger.Balance{PartnerID: partnerID}
		var cur string
		if err := rows.Scan(&cur, &b.Amount.Minor, &b.Open); err != nil {
			return nil, fmt.Errorf("balances of partner %d: %w", partnerID, err)
		}
		b.Amount.Currency = money.Currency(cur)
		b.Available = max(b.Amount.Minor-b.Open, 0)
		out = append(out, b)
	}
	return out, rows.Err()
}

// Withdrawals lists the partner's withdrawals, newest first.
func (s *Store) Withdrawals(ctx context.Context, partnerID int64) ([]ledger.Withdrawal, error) {
	ws, err := scanWithdrawals(s.pool.Query(ctx, `SELECT `+withdrawalColumns+` FROM withdrawals
		WHERE partner_id = $1 ORDER BY id DESC`, partnerID))
	if err != nil {
		return nil, fmt.Errorf("withdrawals of partner %d: %w", partnerID, err)
	}
	return ws, nil
}

// Notifications lists a recipient's latest notifications, newest first.
func (s *Store) Notifications(ctx context.Context, recipientKind string, recipientID int64, limit int) ([]ledger.Notification, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, kind, payload, created_at FROM notifications
		WHERE recipient_kind = $1 AND recipient_id = $2 ORDER BY id DESC LIMIT $3`, recipientKind, recipientID, limit)
	if err != nil {
		return nil, fmt.Errorf("notifications of %s %d: %w", recipientKind, recipientID, err)
	}
	defer rows.Close()
	var out []ledger.Notification
	for rows.Next() {
		n := ledger.Notification{RecipientKind: recipientKind, RecipientID: recipientID}
		var payload []byte
		if err := rows.Scan(&n.ID, &n.Kind, &payload, &n.CreatedAt); err != nil {
			return nil, fmt.Errorf("notifications of %s %d: %w", recipientKind, recipientID, err)
		}
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.UseNumber() // amounts stay integers, never float64
		if err := dec.Decode(&n.Payload); err != nil {
			return nil, fmt.Errorf("notification %d payload: %w", n.ID, err)
		}
		n.CreatedAt = n.CreatedAt.UTC()
		out = append(out, n)
	}
	return out, rows.Err()
}

// SaleByID reads a sale without locking it.
func (s *Store) SaleByID(ctx context.Context, id int64) (ledger.Sale, error) {
	sale, err := scanSale(s.pool.QueryRow(ctx, `SELECT `+saleColumns+` FROM sales WHERE id = $1`, id))
	if err != nil && !errors.Is(err, ledger.ErrSaleNotFound) {
		return sale, fmt.Errorf("load sale %d: %w", id, err)
	}
	return sale, err
}

// SaleCommissionIDs lists the ids of a sale's commissions, oldest first.
func (s *Store) SaleCommissionIDs(ctx context.Context, saleID int64) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM commissions WHERE sale_id = $1 ORDER BY id`, saleID)
	if err != nil {
		return nil, fmt.Errorf("commissions of sale %d: %w", saleID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("commissions of sale %d: %w", saleID, err)
	}
	return ids, nil
}

// OldestDueSince is the earliest hold_until of the pending commissions due
// at now (the partial index commissions_due serves it), leaving out those
// under an open dispute: they are not late, they wait for the dispute.
func (s *Store) OldestDueSince(ctx context.Context, now time.Time) (time.Time, bool, error) {
	var since *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT min(hold_until) FROM commissions
		WHERE status = 'pending' AND hold_until <= $1 AND `+noOpenDispute, now).Scan(&since); err != nil {
		return time.Time{}, false, fmt.Errorf("oldest due commission: %w", err)
	}
	if since == nil {
		return time.Time{}, false, nil
	}
	return since.UTC(), true, nil
}

// CountSalesWithoutCommission counts the undecided sales created before
// olderThan (the partial index sales_undecided serves it).
func (s *Store) CountSalesWithoutCommission(ctx context.Context, olderThan time.Time) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM sales
		WHERE commission_state IS NULL AND NOT reserved AND created_at < $1`, olderThan).Scan(&n); err != nil {
		return 0, fmt.Errorf("count sales without commission: %w", err)
	}
	return n, nil
}

const disputeColumns = `dispute_id, sale_id, status, opened_at, closed_at`

func scanDispute(row pgx.Row) (ledger.Dispute, error) {
	var d ledger.Dispute
	err := row.Scan(&d.DisputeID, &d.SaleID, &d.Status, &d.OpenedAt, &d.ClosedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Dispute{}, ledger.ErrDisputeNotFound
	}
	d.OpenedAt = d.OpenedAt.UTC()
	if d.ClosedAt != nil {
		at := d.ClosedAt.UTC()
		d.ClosedAt = &at
	}
	return d, err
}

// Dispute reads a dispute without locking it.
func (s *Store) Dispute(ctx context.Context, disputeID string) (ledger.Dispute, error) {
	d, err := scanDispute(s.pool.QueryRow(ctx, `SELECT `+disputeColumns+` FROM disputes WHERE dispute_id = $1`, disputeID))
	if err != nil && !errors.Is(err, ledger.ErrDisputeNotFound) {
		return d, fmt.Errorf("load dispute %q: %w", disputeID, err)
	}
	if err != nil {
		return d, fmt.Errorf("dispute %q: %w", disputeID, err)
	}
	return d, nil
}

// InsertDispute stores d unless its dispute id is stored already.
func (t *tx) InsertDispute(ctx context.Context, d *ledger.Dispute) (bool, error) {
	tag, err := t.tx.Exec(ctx, `INSERT INTO disputes (dispute_id, sale_id, status, opened_at, closed_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (dispute_id) DO NOTHING`, d.DisputeID, d.SaleID, d.Status, d.OpenedAt, d.ClosedAt)
	if err != nil {
		return false, fmt.Errorf("store dispute %q of sale %d: %w", d.DisputeID, d.SaleID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// LockDispute reads and locks a dispute.
func (t *tx) LockDispute(ctx context.Context, disputeID string) (ledger.Dispute, error) {
	d, err := scanDispute(t.tx.QueryRow(ctx, `SELECT `+disputeColumns+` FROM disputes WHERE dispute_id = $1 FOR UPDATE`, disputeID))
	if err != nil && !errors.Is(err, ledger.ErrDisputeNotFound) {
		return d, fmt.Errorf("lock dispute %q: %w", disputeID, err)
	}
	if err != nil {
		return d, fmt.Errorf("dispute %q: %w", disputeID, err)
	}
	return d, nil
}

// CloseDispute writes a locked dispute's status and closing time.
func (t *tx) CloseDispute(ctx context.Context, d ledger.Dispute) error {
	if _, err := t.tx.Exec(ctx, `UPDATE disputes SET status = $2, closed_at = $3 WHERE dispute_id = $1`,
		d.DisputeID, d.Status, d.ClosedAt); err != nil {
		return fmt.Errorf("close dispute %q: %w", d.DisputeID, err)
	}
	return nil
}

// ProcessorRefunds sums the processor refunds recorded for the sale.
func (t *tx) ProcessorRefunds(ctx context.Context, saleID int64, refundID string) (int64, bool, error) {
	var total int64
	var seen bool
	if err := t.tx.QueryRow(ctx, `SELECT COALESCE(sum(amount_cents), 0)::bigint, COALESCE(bool_or(refund_id = $2), false)
		FROM processor_refunds WHERE sale_id = $1`, saleID, refundID).Scan(&total, &seen); err != nil {
		return 0, false, fmt.Errorf("processor refunds of sale %d: %w", saleID, err)
	}
	return total, seen, nil
}

// RecordProcessorRefund is sent with the transaction's last batch (flush):
// the sale is locked and nothing in the transaction reads it back.
func (t *tx) RecordProcessorRefund(_ context.Context, saleID int64, refundID string, amount int64, at time.Time) error {
	t.deferExec(fmt.Sprintf("record processor refund %q of sale %d", refundID, saleID),
		`INSERT INTO processor_refunds (sale_id, refund_id, amount_cents, created_at) VALUES ($1, $2, $3, $4)`,
		saleID, refundID, amount, at)
	return nil
}
