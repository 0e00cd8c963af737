package pgtest

import (
	"context"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
)

func TestNewDatabase(t *testing.T) {
	var name string
	t.Run("creates a connectable fresh database", func(t *testing.T) {
		dsn := NewDatabase(t)
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if err := conn.QueryRow(context.Background(), `SELECT current_database()`).Scan(&name); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, "t_testnewdatabase_") {
			t.Errorf("database name %q does not name the test", name)
		}
	})
	t.Run("drops it on cleanup", func(t *testing.T) {
		conn, err := pgx.Connect(context.Background(), AdminURL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("database %s still exists", name)
		}
	})
}

// fatalRecorder captures Fatalf so the unreachable-server message can be
// checked without failing this test.
type fatalRecorder struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (r *fatalRecorder) Helper()      {}
func (r *fatalRecorder) Name() string { return "TestUnreachable" }
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	runtime.Goexit()
}

func TestNewDatabaseFailsWithOneClearMessageWhenUnreachable(t *testing.T) {
	t.Setenv("TEST_DATABASE_URL", "postgres://postgres:hunter2@127.0.0.1:1/postgres?sslmode=disable")
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		NewDatabase(rec)
	}()
	<-done
	if len(rec.msgs) != 1 {
		t.Fatalf("got %d fatal messages, want 1: %q", len(rec.msgs), rec.msgs)
	}
	msg := rec.msgs[0]
	for _, want := range []string{"unreachable", "TEST_DATABASE_URL", "127.0.0.1:1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "hunter2") {
		t.Errorf("message %q leaks the password", msg)
	}
}

func TestDBName(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{name: "plain", in: "TestX"},
		{name: "subtest with spaces and slashes", in: "TestX/a b/c"},
		{name: "very long", in: strings.Repeat("TestLong", 20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := dbName(tt.in), dbName(tt.in)
			if a == b {
				t.Errorf("two calls gave the same name %q", a)
			}
			if len(a) > 63 {
				t.Errorf("name %q exceeds 63 bytes", a)
			}
			for _, r := range a {
				if !(r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')) {
					t.Errorf("name %q has character %q", a, r)
				}
			}
		})
	}
}

func TestMigrationsUpTo(t *testing.T) {
	fsys := fstest.MapFS{
		"00001_a.sql": {Data: []byte("a")}, "00002_b.sql": {Data: []byte("b")}, "00010_c.sql": {Data: []byte("c")}, "embed.go": {Data: []byte("x")},
	}
	got, err := fs.Glob(MigrationsUpTo(t, fsys, "00002"), "*")
	if err != nil || fmt.Sprint(got) != "[00001_a.sql 00002_b.sql]" {
		t.Fatalf("%v %v", got, err)
	}
}
