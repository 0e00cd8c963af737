package platformtest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// echoSpec is the smallest service: one table, and a route answering the
// value of GREETING as the service read it from its environment.
func echoSpec(wireErr error) platform.Spec {
	return platform.Spec{
		Name:       "echo",
		Migrations: fstest.MapFS{"00001_notes.sql": {Data: []byte("-- +goose Up\nCREATE TABLE notes (id int);\n")}},
		Wire: func(_ context.Context, p *platform.Platform) ([]platform.Route, error) {
			if wireErr != nil {
				return nil, wireErr
			}
			greeting := p.Env.String("GREETING", "")
			return []platform.Route{{Pattern: "GET /greeting", Name: "greeting", Handler: http.HandlerFunc(
				func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, greeting) })}}, nil
		},
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestStartServesWithEnvOnAFreshDatabaseAndBroker(t *testing.T) {
	t.Parallel()
	inst := platformtest.Start(t, echoSpec(nil), platformtest.With(platformtest.Env(t), map[string]string{"GREETING": "hello"}))
	base := "http://" + inst.Addr()
	if code, body := get(t, base+"/greeting"); code != http.StatusOK || body != "hello" {
		t.Fatalf("GET /greeting: %d %q, want 200 \"hello\"", code, body)
	}
	// readyz pings Postgres (Kafka is kafka_up, not readiness).
	if code, body := get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("GET /readyz: %d %s", code, body)
	}
	var n int
	if err := inst.Platform().Pool.QueryRow(t.Context(), "SELECT count(*) FROM notes").Scan(&n); err != nil || n != 0 {
		t.Fatalf("migrated table on a fresh database: %d rows, %v", n, err)
	}
}

func TestStartStopsTheServiceWhenTheTestEnds(t *testing.T) {
	t.Parallel()
	var base string
	t.Run("running", func(t *testing.T) {
		base = "http://" + platformtest.Start(t, echoSpec(nil), platformtest.Env(t)).Addr()
		if code, body := get(t, base+"/healthz"); code != http.StatusOK {
			t.Fatalf("GET /healthz while running: %d %s", code, body)
		}
	})
	// The pool is no witness here: the database is dropped WITH (FORCE) at
	// the same time, which breaks it whether or not the service stopped.
	if resp, err := http.Get(base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("still serving after the test that started it ended: %d", resp.StatusCode)
	}
}

func TestTryStartReturnsWhyTheServiceDidNotStart(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name  string
		spec  platform.Spec
		extra map[string]string
		want  string
	}{
		{name: "wire fails", spec: echoSpec(boom), want: "wire echo: boom"},
		{name: "bad common config", spec: echoSpec(nil), extra: map[string]string{"DB_MAX_CONNS": "many"}, want: "DB_MAX_CONNS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inst, err := platformtest.TryStart(t, tt.spec, platformtest.With(platformtest.Env(t), tt.extra))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("TryStart: %v, want an error saying %q", err, tt.want)
			}
			if inst != nil {
				t.Fatal("an instance came back with the error")
			}
		})
	}
}

func TestWithSetsOnTopOfACopy(t *testing.T) {
	t.Parallel()
	base := map[string]string{"A": "1", "B": "2"}
	got := platformtest.With(base, map[string]string{"B": "3", "C": "4"})
	want := map[string]string{"A": "1", "B": "3", "C": "4"}
	if len(got) != len(want) {
		t.Fatalf("With: %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("With: %v, want %v", got, want)
		}
	}
	if base["B"] != "2" || len(base) != 2 {
		t.Fatalf("With changed its base: %v", base)
	}
}
