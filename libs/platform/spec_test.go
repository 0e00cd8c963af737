package platform_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

func TestStartRefusesASpecItCannotRunAsMeant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(*platform.Spec)
		want string
	}{
		{name: "topic config for a topic not in Topics", edit: func(s *platform.Spec) {
			s.TopicConfigs = map[string]map[string]string{"probe.typo.v1": {"retention.ms": "-1"}}
		}, want: `TopicConfigs names "probe.typo.v1", which is not in Topics`},
		{name: "negative write timeout", edit: func(s *platform.Spec) { s.HTTPWriteTimeout = -time.Second }, want: "HTTPWriteTimeout"},
		{name: "nil extra migration", edit: func(s *platform.Spec) { s.ExtraMigrations = []platform.MigrateFunc{nil} }, want: "ExtraMigrations[0] is nil"},
		{name: "no name", edit: func(s *platform.Spec) { s.Name = "" }, want: "Name is required"},
		{name: "no wire", edit: func(s *platform.Spec) { s.Wire = nil }, want: "Wire is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := spec()
			tt.edit(&s)
			// Refused before the environment is read: nothing is opened.
			inst, err := platform.Start(context.Background(), s, func(string) string { return "" }, io.Discard)
			if err == nil {
				_ = inst.Stop()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestStartRefusesANilClock(t *testing.T) {
	t.Parallel()
	inst, err := platform.Start(context.Background(), spec(), func(string) string { return "" }, io.Discard, platform.WithClock(nil))
	if err == nil {
		_ = inst.Stop()
		t.Fatal("started with a nil clock")
	}
}

// probeMigration is a library's migration set: one table, its own version
// table. It records the tables it found already there when it ran.
type probeMigration struct {
	mu    sync.Mutex
	found map[string]bool
}

func (m *probeMigration) migrate(ctx context.Context, dsn, schema string, logger *slog.Logger) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	found := map[string]bool{}
	for _, table := range []string{"probe", "outbox", "inbox"} {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, schema+"."+table).Scan(&ok); err != nil {
			return err
		}
		found[table] = ok
	}
	m.mu.Lock()
	m.found = found
	m.mu.Unlock()
	var files fs.FS = fstest.MapFS{"00001_lib.sql": {Data: []byte("-- +goose Up\nCREATE TABLE lib_progress (id int);\n")}}
	return pg.Migrate(ctx, dsn, schema, files, logger, pg.WithVersionTable("probelib_db_version"))
}

func tableExists(t *testing.T, dsn, table string) bool {
	t.Helper()
	conn, err := pgx.Connect(ctx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(ctx(t), `SELECT to_regclass($1) IS NOT NULL`, name+"."+table).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestExtraMigrationsRunAfterTheServicesAndTheOutboxs(t *testing.T) {
	t.Parallel()
	run := map[string]func(t *testing.T, s platform.Spec, env map[string]string){
		"serve": func(t *testing.T, s platform.Spec, env map[string]string) { platformtest.Start(t, s, env) },
		"migrate": func(t *testing.T, s platform.Spec, env map[string]string) {
			if code := platform.Run(ctx(t), s, []string{"migrate"}, func(k string) string { return env[k] }, io.Discard); code != 0 {
				t.Fatalf("migrate exited %d", code)
			}
		},
	}
	for cmd, start := range run {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			env := platformtest.Env(t)
			lib := &probeMigration{}
			s := spec()
			s.ExtraMigrations = []platform.MigrateFunc{lib.migrate}
			start(t, s, env)
			lib.mu.Lock()
			found := lib.found
			lib.mu.Unlock()
			if !found["probe"] || !found["outbox"] || !found["inbox"] {
				t.Fatalf("tables present when the extra migrations ran: %v, want the service's and the outbox's", found)
			}
			if !tableExists(t, env["DATABASE_URL"], "lib_progress") {
				t.Fatal("the extra migration's table is missing")
			}
		})
	}
}

func TestAFailedExtraMigrationStopsTheStart(t *testing.T) {
	t.Parallel()
	s := spec()
	s.ExtraMigrations = []platform.MigrateFunc{func(context.Context, string, string, *slog.Logger) error { return errors.New("boom") }}
	_, err := platformtest.TryStart(t, s, platformtest.Env(t))
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("TryStart: %v, want the migration's error", err)
	}
}

// A catalog replica lists catalogsync's migrations; the platform runs them
// without knowing what they are.
func TestExtraMigrationsOfACatalogReplica(t *testing.T) {
	t.Parallel()
	env := platformtest.Env(t)
	s := spec()
	s.ExtraMigrations = []platform.MigrateFunc{catalogsync.Migrate}
	platformtest.Start(t, s, env)
	if !tableExists(t, env["DATABASE_URL"], "catalog_progress") {
		t.Fatal("catalog_progress is missing")
	}
}

func TestHTTPWriteTimeoutFromSpec(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	s := spec()
	s.HTTPWriteTimeout = timeout
	s.Wire = func(context.Context, *platform.Platform) ([]platform.Route, error) {
		return []platform.Route{{Pattern: "GET /wait/{d}", Name: "wait", Handler: http.HandlerFunc(
			func(w http.ResponseWriter, r *http.Request) {
				d, err := time.ParseDuration(r.PathValue("d"))
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				time.Sleep(d)
				_, _ = io.WriteString(w, "done")
			})}}, nil
	}
	base := "http://" + platformtest.Start(t, s, platformtest.Env(t)).Addr()
	tests := []struct {
		name     string
		wait     time.Duration
		answered bool
	}{
		{name: "within the timeout", wait: 0, answered: true},
		{name: "past the timeout", wait: 3 * timeout, answered: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A fresh connection each time: a timed-out one is closed.
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := client.Get(base + "/wait/" + tt.wait.String())
			answered := err == nil
			if answered {
				body, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				answered = rerr == nil && resp.StatusCode == http.StatusOK && string(body) == "done"
			}
			if answered != tt.answered {
				t.Fatalf("answered = %v (err %v), want %v", answered, err, tt.answered)
			}
		})
	}
}
