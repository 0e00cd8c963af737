package pgstore_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/services/webhooks/internal/events"
	eventstore "github.com/svc-dev/svc/services/webhooks/internal/events/pgstore"
	"github.com/svc-dev/svc/services/webhooks/internal/listen/pgstore"
	"github.com/svc-dev/svc/services/webhooks/migrations"
)

// The poll, the writer's listener probe and the start's position read
// index ranges (listener_events' key, events_program_seq, listeners_program), whatever the
// table sizes: with sequential scans priced out, each plan names its
// index.
func TestQueriesUseTheirIndexes(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	if err := pg.Migrate(ctx, dsn, "webhooks", migrations.FS, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	pool, err := pg.NewPool(ctx, dsn, pg.Options{Schema: "webhooks", MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, query, index string
	}{
		{"poll", `SELECT seq FROM listener_events WHERE listener_id = 7 ORDER BY seq LIMIT 100`, "listener_events_pkey"},
		{"start's position", `SELECT COALESCE(max(seq), 0) FROM events WHERE program_id = 7`, "events_program_seq"},
		{"writer's listener probe", `SELECT 1 FROM listeners
			WHERE program_id = 7 AND expires_at > now() AND 'sale.created' = ANY(events) AND (include_test OR NOT false)`, "listeners_program"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows, err := pool.Query(ctx, "EXPLAIN "+c.query)
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, line)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if p := strings.Join(plan, "\n"); !strings.Contains(p, c.index) {
				t.Fatalf("plan without %s:\n%s", c.index, p)
			}
		})
	}
}

// An event whose transaction commits after a later-numbered one was taken
// still reaches the listener (a cursor over seq would have passed it), and
// each event is taken once.
func TestTakeGetsAnEventCommittedLate(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	if err := pg.Migrate(ctx, dsn, "webhooks", migrations.FS, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	pool, err := pg.NewPool(ctx, dsn, pg.Options{Schema: "webhooks", MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	var listener int64
	if err := pool.QueryRow(ctx, `INSERT INTO listeners (program_id, secret_sealed, events, include_test, created_at, expires_at)
		VALUES (7, '', '{sale.created}', false, $1, $2) RETURNING id`, now, now.Add(time.Minute)).Scan(&listener); err != nil {
		t.Fatal(err)
	}
	sale := func(src string) events.Event {
		return events.Event{ID: events.EventID(src, events.TypeSaleCreated), Type: events.TypeSaleCreated, ProgramID: 7,
			ObjectKey: "sale:" + src, CreatedAt: now, Data: map[string]string{"src": src}}
	}
	early, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = early.Rollback(ctx) }()
	if _, err := eventstore.Write(ctx, early, []events.Event{sale("early")}); err != nil {
		t.Fatal(err)
	}
	if err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := eventstore.Write(ctx, tx, []events.Event{sale("late")})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s := pgstore.New(pool)
	take := func() []string {
		evs, err := s.Take(ctx, listener, 100)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range evs {
			ids = append(ids, e.ID)
		}
		return ids
	}
	if got := take(); len(got) != 1 || got[0] != sale("late").ID {
		t.Fatalf("first poll %v, want the committed later-numbered event", got)
	}
	if err := early.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := take(); len(got) != 1 || got[0] != sale("early").ID {
		t.Fatalf("second poll %v, want the event committed late", got)
	}
	if got := take(); len(got) != 0 {
		t.Fatalf("third poll %v, want nothing: each event is taken once", got)
	}
}
