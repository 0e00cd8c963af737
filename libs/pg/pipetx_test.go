package pg_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
)

// roundTrips counts what a pool sends: each query and each batch is one
// round trip.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func TestInPipeTx(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	rt := &roundTrips{}
	p := newPool(t, dsn, pg.Options{MaxConns: 1, QueryTracer: rt})
	if _, err := p.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	present := func(t *testing.T, id int) bool {
		t.Helper()
		var n int
		if err := p.QueryRow(ctx, `SELECT count(*) FROM items WHERE id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	// clean: the connection went back outside any transaction (the pool
	// has one connection, so this is the one the test used).
	clean := func(t *testing.T) {
		t.Helper()
		c, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		if s := c.Conn().PgConn().TxStatus(); s != 'I' {
			t.Fatalf("connection left in transaction status %q", s)
		}
	}
	final := func(tx *pg.PipeTx, sql string, args ...any) error {
		b := &pgx.Batch{}
		b.Queue(sql, args...)
		br := tx.SendFinal(ctx, b)
		_, err := br.Exec()
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	}

	t.Run("a read and a final write are two round trips and commit", func(t *testing.T) {
		before := rt.n.Load()
		err := pg.InPipeTx(ctx, p, func(tx *pg.PipeTx) error {
			var x int
			if err := tx.QueryRow(ctx, `SELECT 41 + 1`).Scan(&x); err != nil || x != 42 {
				return errors.Join(err, errors.New("wrong row"))
			}
			return final(tx, `INSERT INTO items (id) VALUES (1)`)
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := rt.n.Load() - before; got != 2 {
			t.Fatalf("round trips = %d, want 2 (BEGIN and COMMIT ride with the statements)", got)
		}
		if !present(t, 1) {
			t.Fatal("row not committed")
		}
		clean(t)
	})
	t.Run("statements run in one transaction: fn's error rolls them all back", func(t *testing.T) {
		errDomain := errors.New("domain")
		err := pg.InPipeTx(ctx, p, func(tx *pg.PipeTx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO items (id) VALUES (2)`); err != nil {
				return err
			}
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO items (id) VALUES (3)`)
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `SELECT id FROM items WHERE id IN (2, 3) ORDER BY id`)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int])
			if err != nil || len(ids) != 2 {
				return errors.Join(err, errors.New("the transaction does not see its own rows"))
			}
			return errDomain
		})
		if !errors.Is(err, errDomain) {
			t.Fatalf("err = %v, want fn's own error", err)
		}
		if present(t, 2) || present(t, 3) {
			t.Fatal("rolled-back rows are there")
		}
		clean(t)
	})
	t.Run("a failing final batch commits nothing", func(t *testing.T) {
		err := pg.InPipeTx(ctx, p, func(tx *pg.PipeTx) error {
			b := &pgx.Batch{}
			b.Queue(`INSERT INTO items (id) VALUES (4)`)
			b.Queue(`INSERT INTO items (id) VALUES (1)`) // taken
			br := tx.SendFinal(ctx, b)
			_, _ = br.Exec()
			_, _ = br.Exec()
			return br.Close()
		})
		if !pg.IsUniqueViolation(err) {
			t.Fatalf("err = %v, want the unique violation", err)
		}
		if present(t, 4) {
			t.Fatal("row 4 committed though its batch failed")
		}
		clean(t)
	})
	t.Run("a final batch whose error fn drops does not count as committed", func(t *testing.T) {
		err := pg.InPipeTx(ctx, p, func(tx *pg.PipeTx) error {
			_ = final(tx, `INSERT INTO items (id) VALUES (1)`)
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), "did not commit") {
			t.Fatalf("err = %v, want the final batch's failure", err)
		}
		clean(t)
	})
	t.Run("an earlier error swallowed by fn makes the commit fail", func(t *testing.T) {
		err := pg.InPipeTx(ctx, p, func(tx *pg.PipeTx) error {
			_, _ = tx.Exec(ctx, `INSERT INTO items (id) VALUES (1)`) // aborts the transaction
			return final(tx, `INSERT INTO items (id) VALUES (5)`)
		})
		if err == nil {
			t.Fatal("committed after an error")
		}
		if present(t, 5) {
			t.Fatal("row 5 committed in an aborted transaction")
		}
		err = pg.InPipeTx(ctx, p, func(tx *pg.PipeTx) error {
			_, _ = tx.Exec(ctx, `INSERT INTO items (id) VALUES (1)`)
			return nil // and commits without a final batch
		})
		if !errors.Is(err, pgx.ErrTxCommitRollback) {
			t.Fatalf("err = %v, want ErrTxCommitRollback", err)
		}
		clean(t)
	})
	t.Run("a deferred constraint fails in the final batch's commit", func(t *testing.T) {
		if _, err := p.Exec(ctx, `CREATE TABLE d (id int UNIQUE DEFERRABLE INITIALLY DEFERRED)`); err != nil {
			t.Fatal(err)
		}
		err := pg.InPipeTx(ctx, p, func(tx *pg.PipeTx) error {
			return final(tx, `INSERT INTO d VALUES (1), (1)`)
		})
		if !pg.IsUniqueViolation(err) || !strings.Contains(err.Error(), "commit tx") {
			t.Fatalf("err = %v, want a unique violation from the commit", err)
		}
		clean(t)
	})
	t.Run("no rows and no statements", func(t *testing.T) {
		before := rt.n.Load()
		if err := pg.InPipeTx(ctx, p, func(*pg.PipeTx) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if got := rt.n.Load() - before; got != 0 {
			t.Fatalf("an empty transaction made %d round trips", got)
		}
		err := pg.InPipeTx(ctx, p, func(tx *pg.PipeTx) error {
			var x int
			if err := tx.QueryRow(ctx, `SELECT id FROM items WHERE id = -1`).Scan(&x); !errors.Is(err, pgx.ErrNoRows) {
				return errors.Join(err, errors.New("want ErrNoRows"))
			}
			_, err := tx.Exec(ctx, `UPDATE items SET n = n + 1 WHERE id = 1`)
			return err // committed by InPipeTx
		})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := p.QueryRow(ctx, `SELECT n FROM items WHERE id = 1`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("n = %d (%v), want the update committed", n, err)
		}
		clean(t)
	})
	t.Run("generic plans for the transaction only", func(t *testing.T) {
		mode := func(q interface {
			QueryRow(context.Context, string, ...any) pgx.Row
		}) string {
			var m string
			if err := q.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&m); err != nil {
				t.Fatal(err)
			}
			return m
		}
		before := mode(p)
		var inside string
		err := pg.InPipeTxWithOptions(ctx, p, pg.PipeOptions{GenericPlans: true}, func(tx *pg.PipeTx) error {
			inside = mode(tx)
			return nil
		})
		if err != nil || inside != "force_generic_plan" {
			t.Fatalf("inside the transaction plan_cache_mode = %q (%v), want force_generic_plan", inside, err)
		}
		if after := mode(p); after != before { // the pool's one connection
			t.Fatalf("after the transaction plan_cache_mode = %q, want %q again", after, before)
		}
	})
	t.Run("a generic plan made while its table was empty still takes the index once it has grown", func(t *testing.T) {
		if _, err := p.Exec(ctx, `CREATE TABLE grown (id int PRIMARY KEY, n int NOT NULL); ANALYZE grown`); err != nil {
			t.Fatal(err)
		}
		// Scans counted by this backend and not flushed yet, before and
		// after the lookup.
		const scans = `SELECT seq_scan, COALESCE(idx_scan, 0) FROM pg_stat_xact_user_tables WHERE relname = 'grown'`
		lookup := func(want int) (seq, idx int64) {
			t.Helper()
			err := pg.InPipeTxWithOptions(ctx, p, pg.PipeOptions{GenericPlans: true}, func(tx *pg.PipeTx) error {
				var seq0, idx0 int64
				if err := tx.QueryRow(ctx, scans).Scan(&seq0, &idx0); err != nil {
					return err
				}
				var n int
				err := tx.QueryRow(ctx, `SELECT n FROM grown WHERE id = $1`, 777).Scan(&n)
				if want == 0 && errors.Is(err, pgx.ErrNoRows) {
					err = nil
				}
				if err != nil || n != want {
					return errors.Join(err, fmt.Errorf("n = %d, want %d", n, want))
				}
				if err := tx.QueryRow(ctx, scans).Scan(&seq, &idx); err != nil {
					return err
				}
				seq, idx = seq-seq0, idx-idx0
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return seq, idx
		}
		lookup(0) // made now, the plan is kept by the pool's one connection
		if _, err := p.Exec(ctx, `INSERT INTO grown SELECT g, g FROM generate_series(1, 20000) g`); err != nil {
			t.Fatal(err)
		}
		if seq, idx := lookup(777); seq != 0 || idx != 1 {
			t.Fatalf("the lookup made %d sequential and %d index scans, want 0 and 1", seq, idx)
		}
	})
	optional := func(tx *pg.PipeTx, main, opt []string) (error, error) {
		b, o := &pgx.Batch{}, &pgx.Batch{}
		for _, q := range main {
			b.Queue(q)
		}
		for _, q := range opt {
			o.Queue(q)
		}
		fb := &pgx.Batch{}
		fb.Queue(`INSERT INTO items (id, n) VALUES (99, 1) ON CONFLICT (id) DO UPDATE SET n = items.n + 1`)
		return tx.SendFinalOptional(ctx, b, pg.Optional{Batch: o, Fallback: fb}, func(br pgx.BatchResults) error {
			for range main {
				if _, err := br.Exec(); err != nil {
					return err
				}
			}
			return nil
		})
	}
	t.Run("optional statements that succeed commit with the rest in the same round trip", func(t *testing.T) {
		before := rt.n.Load()
		var optErr error
		err := pg.InPipeTx(ctx, p, func(tx *pg.PipeTx) error {
			var err error
			optErr, err = optional(tx, []string{`INSERT INTO items (id) VALUES (20)`}, []string{`INSERT INTO items (id) VALUES (21)`, `UPDATE items SET n = 1 WHERE id = 20`})
			return err
		})
		if err != nil || optErr != nil {
			t.Fatalf("err = %v, optional err = %v", err, optErr)
		}
		if got := rt.n.Load() - before; got != 1 {
			t.Fatalf("round trips = %d, want 1", got)
		}
		var n int
		if err := p.QueryRow(ctx, `SELECT n FROM items WHERE id = 20`).Scan(&n); err != nil || n != 1 || !present(t, 21) {
			t.Fatalf("n = %d, %v; the optional statements did not commit", n, err)
		}
		clean(t)
	})
	t.Run("a failing optional statement undoes only the optional part", func(t *testing.T) {
		var optErr error
		err := pg.InPipeTx(ctx, p, func(tx *pg.PipeTx) error {
			var err error
			optErr, err = optional(tx, []string{`INSERT INTO items (id) VALUES (22)`},
				[]string{`INSERT INTO items (id) VALUES (23)`, `INSERT INTO items (id) VALUES (1)` /* taken */, `INSERT INTO items (id) VALUES (24)`})
			return err
		})
		if err != nil {
			t.Fatalf("err = %v: the main part must commit", err)
		}
		if !pg.IsUniqueViolation(optErr) {
			t.Fatalf("optional err = %v, want the unique violation", optErr)
		}
		if !present(t, 22) || present(t, 23) || present(t, 24) {
			t.Fatalf("rows 22, 23, 24 present: %v %v %v, want only 22", present(t, 22), present(t, 23), present(t, 24))
		}
		var fallbacks int
		if err := p.QueryRow(ctx, `SELECT n FROM items WHERE id = 99`).Scan(&fallbacks); err != nil || fallbacks != 1 {
			t.Fatalf("the fallback ran %d times (%v), want once", fallbacks, err)
		}
		clean(t)
		// The connection's statements are usable again (pgx dropped the
		// failed batch's from its cache): the same statements commit.
		err = pg.InPipeTx(ctx, p, func(tx *pg.PipeTx) error {
			var err error
			optErr, err = optional(tx, []string{`INSERT INTO items (id) VALUES (23)`}, []string{`INSERT INTO items (id) VALUES (24)`})
			return err
		})
		if err != nil || optErr != nil || !present(t, 23) || !present(t, 24) {
			t.Fatalf("after the fallback: err = %v, optional err = %v", err, optErr)
		}
		clean(t)
	})
	t.Run("an optional statement that cannot even be prepared undoes only the optional part", func(t *testing.T) {
		// pgx prepares a batch's statements new to the connection in a
		// round trip ahead of the batch: a statement failing there (its
		// table gone) must not abort the transaction before the
		// savepoint guarding it exists. Once with the transaction open
		// before the final batch, once with the final batch its first.
		for i, begin := range []bool{true, false} {
			var optErr error
			id := 27 + i
			if _, err := p.Exec(ctx, `DELETE FROM items WHERE id IN (30, 99)`); err != nil {
				t.Fatal(err)
			}
			err := pg.InPipeTx(ctx, p, func(tx *pg.PipeTx) error {
				if begin {
					if _, err := tx.Exec(ctx, `INSERT INTO items (id) VALUES (30)`); err != nil {
						return err
					}
				}
				var err error
				optErr, err = optional(tx, []string{fmt.Sprintf(`INSERT INTO items (id) VALUES (%d)`, id)},
					[]string{`INSERT INTO items (id) VALUES (31)`, fmt.Sprintf(`INSERT INTO no_such_table_%d (id) VALUES (1)`, i)})
				return err
			})
			if err != nil {
				t.Fatalf("begun %v: err = %v: the main part must commit", begin, err)
			}
			var pgErr *pgconn.PgError
			if !errors.As(optErr, &pgErr) || pgErr.Code != "42P01" {
				t.Fatalf("begun %v: optional err = %v, want undefined_table", begin, optErr)
			}
			if !present(t, id) || present(t, 31) || present(t, 30) != begin {
				t.Fatalf("begun %v: rows %d, 30, 31 present: %v %v %v", begin, id, present(t, id), present(t, 30), present(t, 31))
			}
			var fallbacks int
			if err := p.QueryRow(ctx, `SELECT n FROM items WHERE id = 99`).Scan(&fallbacks); err != nil || fallbacks != 1 {
				t.Fatalf("begun %v: the fallback ran %d times (%v), want once", begin, fallbacks, err)
			}
			clean(t)
		}
	})
	t.Run("a failing main statement commits nothing, optional part included", func(t *testing.T) {
		var optErr error
		err := pg.InPipeTx(ctx, p, func(tx *pg.PipeTx) error {
			var err error
			optErr, err = optional(tx, []string{`INSERT INTO items (id) VALUES (25)`, `INSERT INTO items (id) VALUES (1)`}, []string{`INSERT INTO items (id) VALUES (26)`})
			return err
		})
		if !pg.IsUniqueViolation(err) || optErr != nil {
			t.Fatalf("err = %v, optional err = %v; want the main part's unique violation", err, optErr)
		}
		if present(t, 25) || present(t, 26) {
			t.Fatal("a row of a failed transaction committed")
		}
		clean(t)
	})
	t.Run("a cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := pg.InPipeTx(cctx, p, func(*pg.PipeTx) error { t.Fatal("fn called"); return nil })
		if err == nil || !strings.Contains(err.Error(), "begin tx") {
			t.Fatalf("err = %v, want begin tx error", err)
		}
	})
}
