package platform_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// seenSQL is a pgx.QueryTracer noting the statements and search_path it
// sees.
type seenSQL struct {
	mu    sync.Mutex
	stmts map[string]string // SQL -> the connection's search_path
}

func (s *seenSQL) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stmts[d.SQL] = c.Config().RuntimeParams["search_path"]
	return ctx
}

func (s *seenSQL) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func TestWithQueryTracerSeesTheServicesStatements(t *testing.T) {
	t.Parallel()
	rec := &seenSQL{stmts: map[string]string{}}
	const probe = `SELECT count(*) FROM probe`
	sp := spec()
	sp.Wire = func(ctx context.Context, p *platform.Platform) ([]platform.Route, error) {
		var n int
		return nil, p.Pool.QueryRow(ctx, probe).Scan(&n)
	}
	platformtest.Start(t, sp, platformtest.Env(t), platform.WithQueryTracer(rec))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	path, ok := rec.stmts[probe]
	if !ok {
		t.Fatalf("the tracer did not see the service's statement; it saw %d others", len(rec.stmts))
	}
	if !strings.Contains(path, name) {
		t.Fatalf("search_path %q, want the service's schema %s", path, name)
	}
}
