package pg_test

import (
	"context"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
)

// widgetMigrations use unqualified names (relying on search_path) and a
// second migration that fails if run twice, so double application shows.
func widgetMigrations() fstest.MapFS {
	return fstest.MapFS{
		"00001_widgets.sql": {Data: []byte("-- +goose Up\nCREATE TABLE widgets (id bigint PRIMARY KEY);\n")},
		"00002_seed.sql":    {Data: []byte("-- +goose Up\nINSERT INTO widgets VALUES (1);\n")},
	}
}

func count(t *testing.T, dsn, query string) int {
	t.Helper()
	p := newPool(t, dsn, pg.Options{})
	var n int
	if err := p.QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("concurrent calls on a fresh database both succeed and apply once", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.NewDatabase(t)
		const callers = 3
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() { errs[i] = pg.Migrate(ctx, dsn, "svc_a", widgetMigrations(), nil) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
		}
		if n := count(t, dsn, `SELECT count(*) FROM svc_a.widgets`); n != 1 {
			t.Errorf("widgets rows = %d, want 1", n)
		}
		if n := count(t, dsn, `SELECT count(*) FROM svc_a.goose_db_version WHERE version_id > 0`); n != 2 {
			t.Errorf("applied versions = %d, want 2", n)
		}
	})

	t.Run("schemas keep separate version tables", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.NewDatabase(t)
		if err := pg.Migrate(ctx, dsn, "svc_a", widgetMigrations(), nil); err != nil {
			t.Fatal(err)
		}
		// svc_b has only the first migration: it must not be considered
		// applied because svc_a ran it.
		one := fstest.MapFS{"00001_widgets.sql": widgetMigrations()["00001_widgets.sql"]}
		if err := pg.Migrate(ctx, dsn, "svc_b", one, nil); err != nil {
			t.Fatal(err)
		}
		if n := count(t, dsn, `SELECT count(*) FROM svc_b.goose_db_version WHERE version_id > 0`); n != 1 {
			t.Errorf("svc_b applied versions = %d, want 1", n)
		}
		if n := count(t, dsn, `SELECT count(*) FROM svc_b.widgets`); n != 0 {
			t.Errorf("svc_b widgets rows = %d, want 0", n)
		}
		if n := count(t, dsn, `SELECT count(*) FROM svc_a.goose_db_version WHERE version_id > 0`); n != 2 {
			t.Errorf("svc_a applied versions = %d, want 2", n)
		}
	})

	t.Run("a second version table in one schema is independent", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.NewDatabase(t)
		if err := pg.Migrate(ctx, dsn, "svc_a", widgetMigrations(), nil); err != nil {
			t.Fatal(err)
		}
		lib := fstest.MapFS{"00001_gadgets.sql": {Data: []byte("-- +goose Up\nCREATE TABLE gadgets (id int);\n")}}
		if err := pg.Migrate(ctx, dsn, "svc_a", lib, nil, pg.WithVersionTable("lib_db_version")); err != nil {
			t.Fatal(err)
		}
		if n := count(t, dsn, `SELECT count(*) FROM svc_a.lib_db_version WHERE version_id > 0`); n != 1 {
			t.Errorf("lib versions = %d, want 1", n)
		}
		if n := count(t, dsn, `SELECT count(*) FROM svc_a.gadgets`); n != 0 {
			t.Errorf("gadgets rows = %d", n)
		}
	})

	t.Run("rerun is a no-op", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.NewDatabase(t)
		for range 2 {
			if err := pg.Migrate(ctx, dsn, "svc_a", widgetMigrations(), nil); err != nil {
				t.Fatal(err)
			}
		}
		if n := count(t, dsn, `SELECT count(*) FROM svc_a.widgets`); n != 1 {
			t.Errorf("widgets rows = %d, want 1", n)
		}
	})

	t.Run("a failing migration reports an error and stays pending", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.NewDatabase(t)
		bad := widgetMigrations()
		bad["00003_broken.sql"] = &fstest.MapFile{Data: []byte("-- +goose Up\nSELECT * FROM no_such_table;\n")}
		if err := pg.Migrate(ctx, dsn, "svc_a", bad, nil); err == nil {
			t.Fatal("Migrate succeeded with a broken migration")
		}
		st, err := pg.MigrationStatus(ctx, dsn, "svc_a", bad)
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64]bool{}
		for _, s := range st {
			got[s.Version] = s.Applied
		}
		if !got[1] || !got[2] || got[3] {
			t.Errorf("applied = %v, want 1 and 2 applied, 3 pending", got)
		}
	})

	t.Run("status of a missing schema is all pending and creates nothing", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.NewDatabase(t)
		st, err := pg.MigrationStatus(ctx, dsn, "svc_a", widgetMigrations())
		if err != nil {
			t.Fatal(err)
		}
		if len(st) != 2 || st[0].Applied || st[1].Applied {
			t.Errorf("status = %+v, want two pending", st)
		}
		if n := count(t, dsn, `SELECT count(*) FROM pg_namespace WHERE nspname = 'svc_a'`); n != 0 {
			t.Error("MigrationStatus created the schema")
		}
	})

	t.Run("rejects invalid schema names", func(t *testing.T) {
		if err := pg.Migrate(ctx, "postgres://unused", "Bad-Name", widgetMigrations(), nil); err == nil {
			t.Fatal("invalid schema accepted")
		}
	})
}
