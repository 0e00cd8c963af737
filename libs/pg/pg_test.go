package pg_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
)

func newPool(t *testing.T, dsn string, opt pg.Options) *pgxpool.Pool {
	t.Helper()
	pool, err := pg.NewPool(context.Background(), dsn, opt)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestNewPool(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	admin := newPool(t, dsn, pg.Options{})
	if _, err := admin.Exec(ctx, `CREATE SCHEMA svc_a; CREATE TABLE svc_a.things (id int); CREATE TABLE public.things (id int, public_marker int)`); err != nil {
		t.Fatal(err)
	}

	t.Run("defaults max conns to 32", func(t *testing.T) {
		if got := admin.Config().MaxConns; got != 32 {
			t.Fatalf("MaxConns = %d, want 32", got)
		}
	})
	t.Run("explicit max conns wins", func(t *testing.T) {
		p := newPool(t, dsn, pg.Options{MaxConns: 7})
		if got := p.Config().MaxConns; got != 7 {
			t.Fatalf("MaxConns = %d, want 7", got)
		}
	})
	t.Run("schema becomes the only search path", func(t *testing.T) {
		p := newPool(t, dsn, pg.Options{Schema: "svc_a", AppName: "pg-test"})
		var schema, app string
		if err := p.QueryRow(ctx, `SELECT current_schema(), current_setting('application_name')`).Scan(&schema, &app); err != nil {
			t.Fatal(err)
		}
		if schema != "svc_a" || app != "pg-test" {
			t.Fatalf("current_schema, application_name = %q, %q; want svc_a, pg-test", schema, app)
		}
		// Unqualified names must not fall through to public.
		_, err := p.Exec(ctx, `SELECT public_marker FROM things`)
		if err == nil {
			t.Fatal("unqualified query reached public.things")
		}
	})
	t.Run("rejects a schema name that would need quoting", func(t *testing.T) {
		for _, bad := range []string{"Svc", "a-b", "a;drop", "1abc", strings.Repeat("a", 64)} {
			if _, err := pg.NewPool(ctx, dsn, pg.Options{Schema: bad}); err == nil {
				t.Errorf("schema %q accepted", bad)
			}
		}
	})
	t.Run("fails at creation when the server is unreachable", func(t *testing.T) {
		_, err := pg.NewPool(ctx, "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2", pg.Options{})
		if err == nil {
			t.Fatal("NewPool succeeded against a closed port")
		}
	})
	t.Run("malformed dsn error does not echo the dsn", func(t *testing.T) {
		_, err := pg.NewPool(ctx, "postgres://u:s3cret@host:notaport/db", pg.Options{})
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("err = %v; want an error without the password", err)
		}
	})
}

func TestNewPoolTracingKeepsSQLOutOfSpans(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	p := newPool(t, dsn, pg.Options{Tracing: true, TracerProvider: tp})
	// otelpgx only records queries made under a recording parent span.
	ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")
	if _, err := p.Exec(ctx, `SELECT 'secret-literal'::text`); err != nil {
		t.Fatal(err)
	}
	parent.End()
	spans := rec.Ended()
	if len(spans) < 2 {
		t.Fatalf("recorded %d spans, want the parent and at least one query span", len(spans))
	}
	for _, s := range spans {
		if strings.Contains(s.Name(), "secret-literal") {
			t.Errorf("span name %q carries SQL text", s.Name())
		}
		for _, a := range s.Attributes() {
			if strings.Contains(a.Value.String(), "secret-literal") {
				t.Errorf("span %q attribute %s carries SQL text", s.Name(), a.Key)
			}
		}
	}
}

var errDomain = errors.New("domain failure")

func TestInTx(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	p := newPool(t, dsn, pg.Options{})
	if _, err := p.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		id      int
		fnErr   error
		wantErr error
		wantRow bool
	}{
		{name: "commits when fn succeeds", id: 1, wantRow: true},
		{name: "rolls back and returns fn error unchanged", id: 2, fnErr: errDomain, wantErr: errDomain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pg.InTx(ctx, p, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO items VALUES ($1)`, tt.id); err != nil {
					return err
				}
				return tt.fnErr
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("InTx err = %v, want %v", err, tt.wantErr)
			}
			var n int
			if err := p.QueryRow(ctx, `SELECT count(*) FROM items WHERE id = $1`, tt.id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if (n == 1) != tt.wantRow {
				t.Fatalf("row present = %v, want %v", n == 1, tt.wantRow)
			}
		})
	}

	t.Run("commit failure is wrapped", func(t *testing.T) {
		err := pg.InTx(ctx, p, func(tx pgx.Tx) error {
			// A deferred constraint only fails at COMMIT.
			_, err := tx.Exec(ctx, `CREATE TEMP TABLE d (id int UNIQUE DEFERRABLE INITIALLY DEFERRED) ON COMMIT DROP;
				INSERT INTO d VALUES (1), (1)`)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "commit tx") || !pg.IsUniqueViolation(err) {
			t.Fatalf("err = %v, want a wrapped unique violation from commit", err)
		}
	})
	t.Run("begin failure is wrapped", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := pg.InTx(cctx, p, func(pgx.Tx) error { t.Fatal("fn called"); return nil })
		if err == nil || !strings.Contains(err.Error(), "begin tx") {
			t.Fatalf("err = %v, want begin tx error", err)
		}
	})
}

func TestErrorClassification(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	p := newPool(t, dsn, pg.Options{})
	if _, err := p.Exec(ctx, `
		CREATE TABLE parents (id int PRIMARY KEY, code text CONSTRAINT parents_code_key UNIQUE, n int CONSTRAINT parents_n_positive CHECK (n > 0));
		CREATE TABLE children (id int PRIMARY KEY, parent_id int NOT NULL CONSTRAINT children_parent_fk REFERENCES parents(id));
		INSERT INTO parents VALUES (1, 'a', 1);`); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string) error {
		_, err := p.Exec(ctx, sql)
		return err
	}
	tests := []struct {
		name           string
		err            error
		wantUnique     bool
		wantFK         bool
		wantCheck      bool
		wantNotNull    bool
		wantConstraint string
	}{
		{name: "unique violation", err: exec(`INSERT INTO parents VALUES (2, 'a', 1)`), wantUnique: true, wantConstraint: "parents_code_key"},
		{name: "primary key violation is a unique violation", err: exec(`INSERT INTO parents VALUES (1, 'b', 1)`), wantUnique: true, wantConstraint: "parents_pkey"},
		{name: "foreign key violation", err: exec(`INSERT INTO children VALUES (1, 99)`), wantFK: true, wantConstraint: "children_parent_fk"},
		{name: "check violation", err: exec(`INSERT INTO parents VALUES (3, 'c', 0)`), wantCheck: true, wantConstraint: "parents_n_positive"},
		{name: "not null violation", err: exec(`INSERT INTO children VALUES (2, NULL)`), wantNotNull: true},
		{name: "wrapped unique violation", err: fmtWrap(exec(`INSERT INTO parents VALUES (4, 'a', 1)`)), wantUnique: true, wantConstraint: "parents_code_key"},
		{name: "syntax error is none of them", err: exec(`SELEC 1`)},
		{name: "non-postgres error", err: errDomain},
		{name: "nil", err: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pg.IsUniqueViolation(tt.err); got != tt.wantUnique {
				t.Errorf("IsUniqueViolation = %v", got)
			}
			if got := pg.IsForeignKeyViolation(tt.err); got != tt.wantFK {
				t.Errorf("IsForeignKeyViolation = %v", got)
			}
			if got := pg.IsCheckViolation(tt.err); got != tt.wantCheck {
				t.Errorf("IsCheckViolation = %v", got)
			}
			if got := pg.IsNotNullViolation(tt.err); got != tt.wantNotNull {
				t.Errorf("IsNotNullViolation = %v", got)
			}
			if got := pg.ConstraintName(tt.err); got != tt.wantConstraint {
				t.Errorf("ConstraintName = %q, want %q", got, tt.wantConstraint)
			}
		})
	}
}

func fmtWrap(err error) error { return errors.Join(errors.New("insert parent"), err) }

// A pool with MaxConnIdleTime gives back the connections a burst opened
// once they sit idle, down to none; without it they stay.
func TestNewPoolClosesIdleConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	burst := func(t *testing.T, pool *pgxpool.Pool) {
		t.Helper()
		conns := make([]*pgxpool.Conn, 3)
		for i := range conns {
			c, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns[i] = c
		}
		for _, c := range conns {
			c.Release()
		}
		if n := pool.Stat().TotalConns(); n != 3 {
			t.Fatalf("%d connections after the burst, want 3", n)
		}
	}

	idle, err := pg.NewPool(ctx, dsn, pg.Options{MaxConns: 4, MaxConnIdleTime: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	burst(t, idle)
	deadline := time.Now().Add(10 * time.Second)
	for idle.Stat().TotalConns() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle connections still open after 10s (MaxConnIdleTime 200ms)", idle.Stat().TotalConns())
		}
		time.Sleep(50 * time.Millisecond)
	}

	kept, err := pg.NewPool(ctx, dsn, pg.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	burst(t, kept)
	// Longer than the idle pool took: the default keeps them 30 minutes.
	time.Sleep(time.Second)
	if n := kept.Stat().TotalConns(); n != 3 {
		t.Fatalf("%d connections kept without MaxConnIdleTime, want 3", n)
	}
}
