package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PipeTx is a transaction whose BEGIN rides with its first statement and
// whose COMMIT rides with its last batch (SendFinal): a transaction of n
// round trips of statements costs n round trips instead of n+2. On a busy
// host every round trip is a wake-up of the client and of the backend, and
// the hot write paths are a few statements each, so BEGIN and COMMIT alone
// were a third of their round trips.
//
// It has the statement methods of pgx.Tx (Exec, Query, QueryRow,
// SendBatch); nested transactions are not offered. It is only used inside
// InPipeTx, which ends it.
type PipeTx struct {
	conn  *pgx.Conn
	opts  PipeOptions
	begun bool
	// ended: SendFinal's COMMIT was sent; committed: its results read
	// without error.
	ended, committed bool
}

// PipeOptions configures a PipeTx.
type PipeOptions struct {
	Tx pgx.TxOptions
	// GenericPlans runs the transaction's statements on their generic
	// plans (plan_cache_mode, set locally with BEGIN): for hot
	// transactions whose statements the plan test checks generic, and
	// which "auto" would keep planning on every run when their custom
	// plans look cheaper.
	//
	// It also turns sequential scans off for the transaction
	// (enable_seqscan, the same way): a generic plan is made once per
	// connection from the statistics of that moment, and a table last
	// analysed while (nearly) empty makes a sequential scan look cheapest;
	// the plan then outlives the table's growth until the next ANALYZE.
	// Measured: refunds read by sequential scan 30 million rows in one
	// ten-second benchmark run. Every statement of these transactions has
	// an index serving its predicate (the plan test), so without
	// sequential scans the planner takes it at any size.
	GenericPlans bool
}

// InPipeTx runs fn in a PipeTx on a connection of pool: when fn returns nil
// the transaction commits (unless fn already committed it with SendFinal),
// otherwise it is rolled back. fn's own error is returned as is, like InTx.
// A transaction in which fn ran no statement never reaches the server.
func InPipeTx(ctx context.Context, pool *pgxpool.Pool, fn func(*PipeTx) error) error {
	return InPipeTxWithOptions(ctx, pool, PipeOptions{}, fn)
}

// InPipeTxWithOptions is InPipeTx with explicit options.
func InPipeTxWithOptions(ctx context.Context, pool *pgxpool.Pool, opts PipeOptions, fn func(*PipeTx) error) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin tx: %w", err)
	}
	defer c.Release()
	t := &PipeTx{conn: c.Conn(), opts: opts}
	if err := fn(t); err != nil {
		if rbErr := t.rollback(context.WithoutCancel(ctx)); rbErr != nil {
			return errors.Join(err, fmt.Errorf("rollback tx: %w", rbErr))
		}
		return err
	}
	if t.ended && !t.committed {
		// fn dropped the final batch's error, or never read it.
		err := errors.New("commit tx: the final batch did not commit")
		if rbErr := t.rollback(context.WithoutCancel(ctx)); rbErr != nil {
			err = errors.Join(err, fmt.Errorf("rollback tx: %w", rbErr))
		}
		return err
	}
	if t.ended || !t.begun {
		return nil
	}
	tag, err := t.conn.Exec(ctx, "commit")
	if err == nil && tag.String() != "COMMIT" {
		err = pgx.ErrTxCommitRollback
	}
	if err != nil {
		if rbErr := t.rollback(context.WithoutCancel(ctx)); rbErr != nil {
			err = errors.Join(err, fmt.Errorf("rollback tx: %w", rbErr))
		}
		return fmt.Errorf("commit tx: %w", err)
	}
	return nil
}

// rollback ends whatever the server still holds open (a failed final batch
// leaves its transaction aborted; a failed COMMIT has ended it already).
func (t *PipeTx) rollback(ctx context.Context) error {
	if !t.begun || t.conn.IsClosed() || t.conn.PgConn().TxStatus() == 'I' {
		return nil
	}
	_, err := t.conn.Exec(ctx, "rollback")
	return err
}

// batch is b, begun with BEGIN when the transaction has not started yet;
// skip is how many results that added in front of b's.
func (t *PipeTx) batch(b *pgx.Batch) (*pgx.Batch, int) {
	if t.ended {
		panic("pg.PipeTx used after SendFinal")
	}
	if t.begun {
		return b, 0
	}
	t.begun = true
	nb := &pgx.Batch{}
	nb.BeginTx(t.opts.Tx)
	skip := 1
	if t.opts.GenericPlans {
		nb.Queue("SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true)")
		skip++
	}
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	return nb, skip
}

func (t *PipeTx) send(ctx context.Context, b *pgx.Batch, final bool) pgx.BatchResults {
	nb, skip := t.batch(b)
	if final {
		if nb == b {
			nb = &pgx.Batch{QueuedQueries: append([]*pgx.QueuedQuery(nil), b.QueuedQueries...)}
		}
		nb.Queue("commit")
		t.ended = true
	}
	br := t.conn.SendBatch(ctx, nb)
	r := &pipeResults{BatchResults: br, skip: skip, left: b.Len()}
	if final {
		r.final = t
	}
	return r
}

// SendBatch sends b in the transaction (with BEGIN in front when it is the
// first statement).
func (t *PipeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.send(ctx, b, false)
}

// SendFinal sends b and COMMIT in one round trip: the transaction's last
// statements. Its results are read as SendBatch's; Close reports a failed
// commit (pgx.ErrTxCommitRollback when an earlier error had aborted the
// transaction). Nothing may be sent in the transaction afterwards.
func (t *PipeTx) SendFinal(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.send(ctx, b, true)
}

// optionalSavepoint guards SendFinalOptional's optional statements.
const optionalSavepoint = "pipe_optional"

// Optional are statements SendFinalOptional writes with a transaction
// when it can: Batch behind a savepoint; when one of them fails, Fallback
// instead (after the savepoint is rolled back), for what the transaction
// must then record, such as the work left for a retry.
type Optional struct {
	Batch, Fallback *pgx.Batch
}

// SendFinalOptional ends the transaction with b, then opt.Batch behind a
// savepoint, then COMMIT, in one round trip: opt.Batch is written with the
// transaction when it can be, and when one of its statements fails only it
// is rolled back (ROLLBACK TO SAVEPOINT, opt.Fallback, COMMIT: more round
// trips, on that path only) and its error is optErr. read reads b's
// results, as a caller of SendFinal would (it must not Close them); an
// error from it, from b or from opt.Fallback fails the whole transaction
// as SendFinal's would. Nothing may be sent in the transaction afterwards.
//
// It is for writes that follow a change but must never undo it, such as
// the notifications of a refund: one transaction and one commit where two
// were, and still no way for the follower to fail the change.
func (t *PipeTx) SendFinalOptional(ctx context.Context, b *pgx.Batch, opt Optional, read func(pgx.BatchResults) error) (optErr, err error) {
	if opt.Batch == nil || opt.Batch.Len() == 0 {
		br := t.SendFinal(ctx, b)
		err := read(br)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return nil, err
	}
	if optErr, err := t.prepareOptional(ctx, opt.Batch); err != nil || optErr != nil {
		if err != nil {
			return nil, err
		}
		return optErr, t.sendFinalFallback(ctx, b, opt.Fallback, read)
	}
	nb := &pgx.Batch{QueuedQueries: append([]*pgx.QueuedQuery(nil), b.QueuedQueries...)}
	nb.Queue("SAVEPOINT " + optionalSavepoint)
	nb.QueuedQueries = append(nb.QueuedQueries, opt.Batch.QueuedQueries...)
	nb.Queue("RELEASE SAVEPOINT " + optionalSavepoint)
	sent, skip := t.batch(nb)
	sent.Queue("commit")
	t.ended = true
	br := t.conn.SendBatch(ctx, sent)
	defer func() {
		if cerr := br.Close(); err == nil && optErr == nil && cerr != nil {
			err = cerr
		}
	}()
	for range skip {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	cr := &countedResults{BatchResults: br, left: b.Len()}
	if err := read(cr); err != nil {
		return nil, err
	}
	if err := cr.Close(); err != nil {
		return nil, err
	}
	if _, err := br.Exec(); err != nil { // SAVEPOINT
		return nil, err
	}
	for range opt.Batch.Len() {
		if _, optErr = br.Exec(); optErr != nil {
			break
		}
	}
	if optErr == nil {
		if _, err := br.Exec(); err != nil { // RELEASE
			return nil, err
		}
		if err := checkCommit(br.Exec()); err != nil {
			return nil, err
		}
		t.committed = true
		return nil, nil
	}
	// The server skipped the rest of the batch, COMMIT included: the
	// transaction is open and aborted. Undo opt only, write its fallback,
	// then commit. ROLLBACK and COMMIT go in the simple protocol: pgx
	// invalidated the failed batch's prepared statements (COMMIT's among
	// them) and cannot deallocate them while the transaction is aborted,
	// so preparing one again would fail.
	_ = br.Close()
	if _, err := t.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+optionalSavepoint); err != nil {
		return optErr, fmt.Errorf("roll back to the savepoint: %w", err)
	}
	if opt.Fallback != nil && opt.Fallback.Len() > 0 {
		if err := t.conn.SendBatch(ctx, opt.Fallback).Close(); err != nil {
			return optErr, fmt.Errorf("fallback of the optional statements: %w", err)
		}
	}
	if err := checkCommit(t.conn.Exec(ctx, "commit")); err != nil {
		return optErr, err
	}
	t.committed = true
	return optErr, nil
}

// preparedKey names, in a connection's CustomData, the set of optional
// statements prepareOptional prepared on it.
const preparedKey = "pg.optionalPrepared"

// prepareOptional prepares b's statements on the connection before they are
// sent behind SendFinalOptional's savepoint. pgx prepares the statements of a
// batch that are new to the connection in a round trip of their own ahead of
// the batch, and a statement failing there (its table gone, a column
// renamed) would abort the transaction before the savepoint exists, failing
// the change the savepoint protects. Prepared here, by their text (which is
// how a batch finds them), they can only fail when they run, behind it.
// Inside an open transaction the preparation gets a savepoint of its own.
// Only a connection's first final batch with these statements pays the round
// trips. A preparation that fails is optErr.
func (t *PipeTx) prepareOptional(ctx context.Context, b *pgx.Batch) (optErr, err error) {
	data := t.conn.PgConn().CustomData()
	prepared, _ := data[preparedKey].(map[string]struct{})
	var todo []string
	for _, q := range b.QueuedQueries {
		if _, ok := prepared[q.SQL]; !ok {
			todo = append(todo, q.SQL)
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}
	if t.begun {
		// The simple protocol throughout: nothing is prepared for these.
		if _, err := t.conn.Exec(ctx, "SAVEPOINT "+prepareSavepoint); err != nil {
			return nil, fmt.Errorf("savepoint before preparing: %w", err)
		}
	}
	for _, sql := range todo {
		if _, optErr = t.conn.Prepare(ctx, sql, sql); optErr != nil {
			break
		}
		if prepared == nil {
			prepared = map[string]struct{}{}
			data[preparedKey] = prepared
		}
		prepared[sql] = struct{}{}
	}
	if !t.begun {
		return optErr, nil
	}
	undo := "RELEASE SAVEPOINT " + prepareSavepoint
	if optErr != nil {
		undo = "ROLLBACK TO SAVEPOINT " + prepareSavepoint
	}
	if _, err := t.conn.Exec(ctx, undo); err != nil {
		return optErr, fmt.Errorf("end the preparing savepoint: %w", err)
	}
	return optErr, nil
}

// prepareSavepoint guards prepareOptional's preparations.
const prepareSavepoint = "pipe_prepare"

// sendFinalFallback ends the transaction with b, fallback and COMMIT, when
// the optional statements could not be prepared.
func (t *PipeTx) sendFinalFallback(ctx context.Context, b, fallback *pgx.Batch, read func(pgx.BatchResults) error) error {
	nb := &pgx.Batch{QueuedQueries: append([]*pgx.QueuedQuery(nil), b.QueuedQueries...)}
	if fallback != nil {
		nb.QueuedQueries = append(nb.QueuedQueries, fallback.QueuedQueries...)
	}
	br := t.SendFinal(ctx, nb)
	err := read(&countedResults{BatchResults: br, left: b.Len()})
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkCommit reads a COMMIT's answer: an aborted transaction's COMMIT
// answers ROLLBACK without an error, which is reported as one.
func checkCommit(tag pgconn.CommandTag, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("commit tx: %w", err)
	case tag.String() != "COMMIT":
		return fmt.Errorf("commit tx: %w", pgx.ErrTxCommitRollback)
	}
	return nil
}

// countedResults are the first left results of a batch: SendFinalOptional
// hands them to its reader, which must not close the batch.
type countedResults struct {
	pgx.BatchResults
	left int
}

func (r *countedResults) Exec() (pgconn.CommandTag, error) {
	if r.left == 0 {
		return pgconn.CommandTag{}, errors.New("pg: read past the batch's own results")
	}
	r.left--
	return r.BatchResults.Exec()
}

func (r *countedResults) Query() (pgx.Rows, error) {
	if r.left == 0 {
		return nil, errors.New("pg: read past the batch's own results")
	}
	r.left--
	return r.BatchResults.Query()
}

func (r *countedResults) QueryRow() pgx.Row {
	if r.left == 0 {
		return errRow{errors.New("pg: read past the batch's own results")}
	}
	r.left--
	return r.BatchResults.QueryRow()
}

// Close reads the results the reader left; the batch itself stays open.
func (r *countedResults) Close() error {
	for r.left > 0 {
		r.left--
		if _, err := r.BatchResults.Exec(); err != nil {
			return err
		}
	}
	return nil
}

// Exec runs one statement in the transaction.
func (t *PipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.begun {
		return t.conn.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// QueryRow runs one statement in the transaction; its row is read by Scan.
func (t *PipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.begun {
		return t.conn.QueryRow(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	br := t.SendBatch(ctx, b)
	return &batchRow{row: br.QueryRow(), br: br}
}

// Query runs one statement in the transaction. The first statement of a
// transaction sent as a Query costs BEGIN its own round trip (the rows of a
// batch cannot outlive it); the hot paths start with QueryRow or a batch.
func (t *PipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if !t.begun {
		if err := t.SendBatch(ctx, &pgx.Batch{}).Close(); err != nil {
			return nil, err
		}
	}
	return t.conn.Query(ctx, sql, args...)
}

// batchRow is a QueryRow sent as a batch: Scan reads it and closes the
// batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r *batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// pipeResults hides the BEGIN in front of the caller's results and reads
// the COMMIT behind them.
type pipeResults struct {
	pgx.BatchResults
	// skip: results in front of the caller's (the BEGIN); left: the
	// caller's results not read yet.
	skip, left int
	// final is the transaction a final batch commits.
	final  *PipeTx
	err    error
	closed bool
}

// next reads what comes before the caller's next result.
func (r *pipeResults) next() error {
	for r.skip > 0 && r.err == nil {
		r.skip--
		_, r.err = r.BatchResults.Exec()
	}
	r.left--
	return r.err
}

func (r *pipeResults) Exec() (pgconn.CommandTag, error) {
	if err := r.next(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return r.BatchResults.Exec()
}

func (r *pipeResults) Query() (pgx.Rows, error) {
	if err := r.next(); err != nil {
		return nil, err
	}
	return r.BatchResults.Query()
}

func (r *pipeResults) QueryRow() pgx.Row {
	if err := r.next(); err != nil {
		return errRow{err}
	}
	return r.BatchResults.QueryRow()
}

// Close reads what the caller left, then the COMMIT of a final batch, and
// closes the batch: the first error wins.
func (r *pipeResults) Close() error {
	if r.closed {
		return r.err
	}
	r.closed = true
	for r.err == nil && (r.skip > 0 || r.left > 0) {
		if r.skip > 0 {
			r.skip--
		} else {
			r.left--
		}
		_, r.err = r.BatchResults.Exec()
	}
	if r.final != nil && r.err == nil {
		r.err = checkCommit(r.BatchResults.Exec())
	}
	if err := r.BatchResults.Close(); r.err == nil && err != nil {
		r.err = err
	}
	if r.final != nil && r.err == nil {
		r.final.committed = true
	}
	return r.err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// Querier runs the statements of a transaction: a pgx.Tx or a *PipeTx.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

var (
	_ Querier = (*PipeTx)(nil)
	_ Querier = pgx.Tx(nil)
)
