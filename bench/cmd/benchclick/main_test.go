package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/bench/load"
)

func TestParseFlags(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	t.Run("defaults are the documented benchmark", func(t *testing.T) {
		t.Parallel()
		o, err := parseFlags(nil, env(nil), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if o.duration != 20*time.Second || o.connections != 64 || o.links != 200 || o.partners != 20 || o.dbMaxConns != 32 ||
			!slices.Equal(o.targets, []string{"reference", "service", "gateway"}) || !strings.Contains(o.databaseURL, "localhost:5432") {
			t.Fatalf("%+v", o)
		}
	})
	t.Run("TEST_DATABASE_URL is the default server", func(t *testing.T) {
		t.Parallel()
		o, err := parseFlags(nil, env(map[string]string{"TEST_DATABASE_URL": "postgres://x@db:5433/y"}), io.Discard)
		if err != nil || o.databaseURL != "postgres://x@db:5433/y" {
			t.Fatalf("%q %v", o.databaseURL, err)
		}
	})
	t.Run("targets keep their order", func(t *testing.T) {
		t.Parallel()
		o, err := parseFlags([]string{"-targets", "service,reference,service"}, env(nil), io.Discard)
		if err != nil || !slices.Equal(o.targets, []string{"service", "reference"}) {
			t.Fatalf("%v %v", o.targets, err)
		}
	})
	bad := []struct {
		name string
		args []string
	}{
		{"unknown target", []string{"-targets", "ingress"}},
		{"zero duration", []string{"-duration", "0s"}},
		{"negative warm-up", []string{"-warmup", "-1s"}},
		{"no connections", []string{"-connections", "0"}},
		{"fewer links than partners", []string{"-links", "5", "-partners", "10"}},
		{"no addresses", []string{"-ips", "0"}},
		{"reuse above one", []string{"-reuse", "1.5"}},
		{"program share below zero", []string{"-with-program", "-0.1"}},
		{"empty pool", []string{"-db-max-conns", "0"}},
	}
	for _, tt := range bad {
		t.Run("rejects "+tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := parseFlags(tt.args, env(nil), io.Discard); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestMeetsTargets(t *testing.T) {
	t.Parallel()
	res := func(name string, ok int64, p99 time.Duration) Result {
		return Result{Result: load.Result{Name: name, OK: ok, Elapsed: time.Second, Latency: load.Latency{P99: p99}}}
	}
	tests := []struct {
		name    string
		results []Result
		want    bool
	}{
		{"0.8 of the reference straight, 0.6 through the gateway, fast", []Result{res("reference", 1000, 5*time.Millisecond), res("service", 800, 24*time.Millisecond), res("gateway", 600, 24*time.Millisecond)}, true},
		{"straight under 0.8", []Result{res("reference", 1000, 5*time.Millisecond), res("service", 799, 5*time.Millisecond), res("gateway", 900, 5*time.Millisecond)}, false},
		{"gateway under 0.6", []Result{res("reference", 1000, 5*time.Millisecond), res("service", 900, 5*time.Millisecond), res("gateway", 599, 5*time.Millisecond)}, false},
		{"p99 at the limit", []Result{res("reference", 1000, 5*time.Millisecond), res("service", 900, 25*time.Millisecond)}, false},
		{"gateway p99 at the limit", []Result{res("reference", 1000, 5*time.Millisecond), res("gateway", 900, 25*time.Millisecond)}, false},
		{"gateway alone, fast", []Result{res("gateway", 10, time.Millisecond)}, true},
		{"service alone, fast", []Result{res("service", 10, time.Millisecond)}, true},
		{"no service run", []Result{res("reference", 1000, time.Millisecond)}, false},
		{"service recorded nothing", []Result{res("service", 0, 0)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &report{results: tt.results}
			if got := r.meetsTargets(); got != tt.want {
				t.Fatalf("meetsTargets = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRedactHidesThePassword(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"postgres://u:secret@h:5432/db?sslmode=disable": "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgres://u@h/db":                             "postgres://u@h/db",
		"host=h user=u":                                 "host=h user=u",
	}
	for in, want := range tests {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}
