package pg_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
)

func pgErr(code string) error { return fmt.Errorf("apply event: %w", &pgconn.PgError{Code: code}) }

func TestTransientClassification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		err      error
		wantConn bool
		wantTran bool
	}{
		{name: "57014 query canceled (statement_timeout)", err: pgErr("57014"), wantTran: true},
		{name: "55P03 lock not available (lock_timeout)", err: pgErr("55P03"), wantTran: true},
		{name: "25006 read-only transaction (failover)", err: pgErr("25006"), wantTran: true},
		{name: "53300 too many connections", err: pgErr("53300"), wantTran: true},
		{name: "53100 disk full", err: pgErr("53100"), wantTran: true},
		{name: "53200 out of memory", err: pgErr("53200"), wantTran: true},
		{name: "40001 serialization failure", err: pgErr("40001"), wantTran: true},
		{name: "40P01 deadlock", err: pgErr("40P01"), wantTran: true},
		{name: "08006 connection failure", err: pgErr("08006"), wantConn: true, wantTran: true},
		{name: "08000 connection exception", err: pgErr("08000"), wantConn: true, wantTran: true},
		{name: "57P01 admin shutdown", err: pgErr("57P01"), wantConn: true, wantTran: true},
		{name: "57P02 crash shutdown", err: pgErr("57P02"), wantConn: true, wantTran: true},
		{name: "57P03 cannot connect now", err: pgErr("57P03"), wantConn: true, wantTran: true},
		{name: "unexpected EOF", err: fmt.Errorf("read: %w", io.ErrUnexpectedEOF), wantConn: true, wantTran: true},
		{name: "network error", err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, wantConn: true, wantTran: true},
		{name: "connect error", err: &pgconn.ConnectError{}, wantConn: true, wantTran: true},
		{name: "conn closed by the driver", err: fmt.Errorf("exec: %w", pgconn.ErrConnClosed), wantConn: true, wantTran: true},
		{name: "23505 unique violation", err: pgErr("23505")},
		{name: "23514 check violation", err: pgErr("23514")},
		{name: "42601 syntax error", err: pgErr("42601")},
		{name: "22P02 invalid text representation", err: pgErr("22P02")},
		{name: "57000 operator intervention (class 57, not listed)", err: pgErr("57000")},
		{name: "domain error", err: errors.New("program not found")},
		{name: "context canceled", err: fmt.Errorf("apply: %w", context.Canceled)},
		{name: "deadline exceeded", err: fmt.Errorf("apply: %w", context.DeadlineExceeded)},
		{name: "nil", err: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pg.IsConnectionError(tt.err); got != tt.wantConn {
				t.Errorf("IsConnectionError = %v, want %v", got, tt.wantConn)
			}
			if got := pg.IsTransient(tt.err); got != tt.wantTran {
				t.Errorf("IsTransient = %v, want %v", got, tt.wantTran)
			}
		})
	}
}

// The same classes as the server really raises them.
func TestTransientClassificationOfServerErrors(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := newPool(t, dsn, pg.Options{})
	if _, err := p.Exec(ctx, `CREATE TABLE locked (id int); CREATE TABLE free (id int)`); err != nil {
		t.Fatal(err)
	}
	holder, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, `LOCK TABLE locked IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	inTx := func(sql ...string) error {
		return pg.InTx(ctx, p, func(tx pgx.Tx) error {
			for _, s := range sql {
				if _, err := tx.Exec(ctx, s); err != nil {
					return err
				}
			}
			return nil
		})
	}
	tests := []struct {
		name     string
		err      error
		wantCode string
	}{
		{name: "statement timeout", err: inTx(`SET LOCAL statement_timeout = 10`, `SELECT pg_sleep(1)`), wantCode: pg.CodeQueryCanceled},
		{name: "lock timeout", err: inTx(`SET LOCAL lock_timeout = 10`, `SELECT * FROM locked`), wantCode: pg.CodeLockNotAvailable},
		{name: "read-only transaction", err: inTx(`SET TRANSACTION READ ONLY`, `INSERT INTO free VALUES (1)`), wantCode: pg.CodeReadOnlyTransaction},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pg.Code(tt.err); got != tt.wantCode {
				t.Fatalf("code = %q (%v), want %s", got, tt.err, tt.wantCode)
			}
			if !pg.IsTransient(tt.err) {
				t.Fatalf("IsTransient(%v) = false", tt.err)
			}
		})
	}
	t.Run("server not listening", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
		if err == nil {
			_ = conn.Close(ctx)
			t.Fatal("connected to port 1")
		}
		if !pg.IsConnectionError(err) || !pg.IsTransient(err) {
			t.Fatalf("refused connection %v: connection error %v, transient %v", err, pg.IsConnectionError(err), pg.IsTransient(err))
		}
	})
}
