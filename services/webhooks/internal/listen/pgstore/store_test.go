package pgstore_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/services/webhooks/migrations"
)

// The poll, the writer's listener probe and the start's position read
// index ranges (events_program_seq, listeners_program), whatever the
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
		{"poll", `SELECT seq, id, type, body FROM events
			WHERE program_id = 7 AND seq > 40 AND type = ANY('{sale.created}') AND (NOT is_test OR true)
			ORDER BY seq LIMIT 100`, "events_program_seq"},
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
