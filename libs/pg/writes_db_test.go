package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
)

// TestWritesOnTheServer sends bulk writes to a real table, in both of
// pgx's protocols: NULLs, pointers, a jsonb column, an expression with ?,
// and a row written twice in one transaction (its two updates in order).
func TestWritesOnTheServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	pool := newPool(t, dsn, pg.Options{})
	if _, err := pool.Exec(ctx, `CREATE TABLE notes (id bigint PRIMARY KEY, body jsonb, seen timestamptz, n bigint NOT NULL CHECK (n >= 0))`); err != nil {
		t.Fatal(err)
	}
	insert := pg.InsertRows("store %d notes", "notes", "id bigint", "body jsonb", "seen timestamptz", "n bigint")
	update := pg.UpdateByID("count %d notes", "notes", "seen = COALESCE(seen, ?) timestamptz", "n bigint")
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	body := `{"a": 1}`
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		if _, err := pool.Exec(ctx, `TRUNCATE notes`); err != nil {
			t.Fatal(err)
		}
		w := &pg.Writes{}
		w.Row(insert, "note 1", int64(1), &body, nil, int64(0))
		w.Row(insert, "note 2", int64(2), nil, at, int64(5))
		w.Row(update, "count note 1", int64(1), at, int64(1))
		w.Row(update, "count note 2", int64(2), at.Add(time.Hour), int64(6))
		w.Row(update, "count note 1 again", int64(1), at.Add(time.Hour), int64(2))
		b := &pgx.Batch{}
		what, err := w.Queue(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(what) != 3 {
			t.Fatalf("%v: %d statements (%q), want 3", mode, len(what), what)
		}
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DefaultQueryExecMode = mode
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = conn.SendBatch(ctx, b).Close()
		_ = conn.Close(ctx)
		if err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		rows, err := pool.Query(ctx, `SELECT id, COALESCE(body::text, ''), seen, n FROM notes ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		type note struct {
			id, n int64
			body  string
			seen  time.Time
		}
		var got []note
		for rows.Next() {
			var n note
			if err := rows.Scan(&n.id, &n.body, &n.seen, &n.n); err != nil {
				t.Fatal(err)
			}
			n.seen = n.seen.UTC()
			got = append(got, n)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		want := []note{{id: 1, body: `{"a": 1}`, seen: at, n: 2}, {id: 2, seen: at, n: 6}}
		if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("%v: rows %+v, want %+v", mode, got, want)
		}
	}
	// A row breaking a constraint fails its statement, named after it.
	w := &pg.Writes{}
	w.Row(update, "count note 1", int64(1), at, int64(-1))
	b := &pgx.Batch{}
	what, err := w.Queue(b)
	if err != nil {
		t.Fatal(err)
	}
	err = pool.SendBatch(ctx, b).Close()
	if !pg.IsCheckViolation(err) || what[0] != "count note 1" {
		t.Errorf("a negative count: %v (%q), want a check violation named after its row", err, what)
	}
}
