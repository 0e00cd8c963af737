package migrations_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/services/tracking/migrations"
)

// upTo is the migrations numbered at most last.
func upTo(t *testing.T, last string) fs.FS { return pgtest.MigrationsUpTo(t, migrations.FS, last) }

func tableExists(t *testing.T, dsn, table string) bool {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", "tracking."+table).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// Issue 23: tracking's unused sales and processor_events go (00010), but
// never with rows commissions lacks in them.
func TestDropSales(t *testing.T) {
	ctx := context.Background()
	t.Run("empty, as every database since the sale route moved: dropped", func(t *testing.T) {
		dsn := pgtest.NewDatabase(t)
		if err := pg.Migrate(ctx, dsn, "tracking", upTo(t, "00009"), nil); err != nil {
			t.Fatal(err)
		}
		if !tableExists(t, dsn, "sales") || !tableExists(t, dsn, "processor_events") {
			t.Fatal("00005 made no tables")
		}
		if err := pg.Migrate(ctx, dsn, "tracking", migrations.FS, nil); err != nil {
			t.Fatal(err)
		}
		if tableExists(t, dsn, "sales") || tableExists(t, dsn, "processor_events") {
			t.Fatal("the tables are still there")
		}
	})
	t.Run("holding a sale from before: the migration stops and keeps it", func(t *testing.T) {
		dsn := pgtest.NewDatabase(t)
		if err := pg.Migrate(ctx, dsn, "tracking", upTo(t, "00009"), nil); err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `INSERT INTO tracking.sales (processor_event_id, program_id, amount_cents, currency, occurred_at, source)
			VALUES ('txn_2026_11_22', 1, 1000, 'USD', now(), 'api')`); err != nil {
			t.Fatal(err)
		}
		err = pg.Migrate(ctx, dsn, "tracking", migrations.FS, nil)
		if err == nil || !strings.Contains(err.Error(), "tracking.sales holds 1 rows") {
			t.Fatalf("migrate: %v", err)
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM tracking.sales").Scan(&n); err != nil || n != 1 {
			t.Fatalf("sales: %d %v", n, err)
		}
	})
}
