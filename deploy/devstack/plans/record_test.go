package plans_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// statement is one SQL text a service ran, in its schema, with the
// argument sets it ran with (a few distinct ones).
type statement struct {
	schema string
	sql    string
	args   [][]any
}

// maxArgSets bounds the argument sets kept per statement: the same
// statement with other values plans the same way, and EXPLAIN is the
// test's cost.
const maxArgSets = 3

// recorder is a pgx.QueryTracer and pgx.BatchTracer on every service's
// pool: it keeps each distinct statement with its schema (the
// connection's search_path) and arguments.
type recorder struct {
	// console turns on the recording of accounts' statements: the admin
	// calls that build the test's catalog are not hot; the console's
	// routes, driven after it is set, are.
	console atomic.Bool
	mu      sync.Mutex
	order   []string
	stmts   map[string]*statement
	seen    map[string]bool // statement key + argument fingerprint
}

func newRecorder() *recorder {
	return &recorder{stmts: map[string]*statement{}, seen: map[string]bool{}}
}

func (r *recorder) add(conn *pgx.Conn, sql string, args []any) {
	schema := conn.Config().RuntimeParams["search_path"]
	if schema == "accounts" && !r.console.Load() {
		return
	}
	key := schema + "\x00" + sql
	fp := key + "\x00" + fmt.Sprintf("%v", args)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[fp] {
		return
	}
	r.seen[fp] = true
	s := r.stmts[key]
	if s == nil {
		s = &statement{schema: schema, sql: sql}
		r.stmts[key] = s
		r.order = append(r.order, key)
	}
	if len(s.args) < maxArgSets {
		s.args = append(s.args, append([]any(nil), args...))
	}
}

// statements are those recorded so far, in the order first seen.
func (r *recorder) statements() []statement {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]statement, 0, len(r.order))
	for _, k := range r.order {
		s := *r.stmts[k]
		s.args = append([][]any(nil), s.args...)
		out = append(out, s)
	}
	return out
}

func (r *recorder) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(conn, d.SQL, d.Args)
	return ctx
}

func (r *recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *recorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (r *recorder) TraceBatchQuery(_ context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.add(conn, d.SQL, d.Args)
}

func (r *recorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// explainable: statements that have a plan (not BEGIN, COMMIT, LISTEN,
// SET, ...).
func explainable(sql string) bool {
	f := strings.Fields(sql)
	if len(f) == 0 {
		return false
	}
	switch strings.ToUpper(f[0]) {
	case "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES":
		return true
	}
	return false
}
