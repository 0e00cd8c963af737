package pg_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
)

// sqlRecorder is a pgx.QueryTracer and BatchTracer keeping the SQL it sees.
type sqlRecorder struct {
	mu  sync.Mutex
	sql []string
}

func (r *sqlRecorder) add(sql string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sql = append(r.sql, sql)
}

func (r *sqlRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(d.SQL)
	return ctx
}
func (r *sqlRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *sqlRecorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (r *sqlRecorder) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.add(d.SQL)
}
func (r *sqlRecorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func TestNewPoolQueryTracer(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	for _, tracing := range []bool{false, true} {
		rec := &sqlRecorder{}
		p := newPool(t, dsn, pg.Options{QueryTracer: rec, Tracing: tracing, TracerProvider: tp})
		ctx := context.Background()
		if _, err := p.Exec(ctx, `SELECT 1`); err != nil {
			t.Fatal(err)
		}
		b := &pgx.Batch{}
		b.Queue(`SELECT 2`)
		if err := p.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
		rec.mu.Lock()
		got := slices.Clone(rec.sql)
		rec.mu.Unlock()
		if !slices.Contains(got, `SELECT 1`) || !slices.Contains(got, `SELECT 2`) {
			t.Errorf("tracing %v: the tracer saw %q, want the query and the batched query", tracing, got)
		}
	}
}
