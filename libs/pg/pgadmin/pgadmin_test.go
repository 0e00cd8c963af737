package pgadmin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/pg/pgadmin"
	"github.com/svc-dev/svc/libs/pg/pgtest"
)

// A throwaway database is created, usable, and gone after drop.
func TestCreateAndDropDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := pgtest.AdminURL()
	name := pgadmin.ScratchName("pgtest_scratch")
	if !strings.HasPrefix(name, "pgtest_scratch_") || len(name) != len("pgtest_scratch_")+12 {
		t.Fatalf("ScratchName = %q", name)
	}
	dsn, drop, err := pgadmin.CreateDatabase(ctx, admin, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&got); err != nil || got != name {
		t.Fatalf("connected to %q (%v), want %q", got, err, name)
	}
	_ = conn.Close(ctx)
	if _, _, err := pgadmin.CreateDatabase(ctx, admin, name); err == nil || !strings.Contains(err.Error(), "create database "+name) {
		t.Fatalf("creating it again: %v", err)
	}
	if err := pgadmin.DropDatabase(ctx, admin, name); err != nil {
		t.Fatal(err)
	}
	if conn, err := pgx.Connect(ctx, dsn); err == nil {
		_ = conn.Close(ctx)
		t.Fatal("the dropped database still answers")
	}
}

func TestWithDatabase(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:p@h:5432/postgres?sslmode=disable": "postgres://u:p@h:5432/other?sslmode=disable",
		"postgresql://h/x":              "postgresql://h/other",
		"host=h user=u dbname=postgres": "host=h user=u dbname=postgres dbname=other",
	} {
		if got, err := pgadmin.WithDatabase(in, "other"); err != nil || got != want {
			t.Errorf("WithDatabase(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := pgadmin.WithDatabase("postgres://u:secret@h:bad/x", "other"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("a bad URL: %v", err)
	}
}

// An unreachable server is named in the error, the password never.
func TestCreateDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	_, _, err := pgadmin.CreateDatabase(context.Background(), "postgres://u:secret@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=1", "x")
	if err == nil || !strings.Contains(err.Error(), "postgres unreachable at 127.0.0.1:1") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("err = %v", err)
	}
}
