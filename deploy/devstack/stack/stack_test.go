package stack

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

func names(services []Service) string {
	var out []string
	for _, s := range services {
		out = append(out, s.Spec.Name)
	}
	return strings.Join(out, ",")
}

func named(name string, urls map[string]string) Service {
	return Service{Spec: platform.Spec{Name: name}, URLs: urls}
}

func TestPlan(t *testing.T) {
	abc := []Service{named("a", nil), named("b", map[string]string{"A_URL": "a"}), named("c", nil)}
	cases := []struct {
		name     string
		services []Service
		only     []string
		want     string // started names, or the error's text
		wantErr  bool
	}{
		{name: "all in order", services: abc, want: "a,b,c"},
		{name: "only keeps the stack's order", services: abc, only: []string{"c", "a"}, want: "a,c"},
		{name: "only a caller without its callee", services: abc, only: []string{"b"}, want: "b"},
		{name: "unknown service in only", services: abc, only: []string{"d"}, want: `no service "d"`, wantErr: true},
		{name: "duplicate name", services: []Service{named("a", nil), named("a", nil)}, want: "a listed twice", wantErr: true},
		{name: "nameless service", services: []Service{{}}, want: "has no name", wantErr: true},
		{name: "calls a later service", services: []Service{named("a", map[string]string{"B_URL": "b"}), named("b", nil)}, want: "a must start after b", wantErr: true},
		{name: "calls itself", services: []Service{named("a", map[string]string{"A_URL": "a"})}, want: "a must start after a", wantErr: true},
		{name: "calls a service not in the stack", services: []Service{named("a", map[string]string{"X_URL": "x"})}, want: "not in the stack", wantErr: true},
		{name: "URL in no variable", services: []Service{named("a", nil), named("b", map[string]string{"": "a"})}, want: "in no variable", wantErr: true},
		{name: "internal URL of a later service", services: []Service{{Spec: platform.Spec{Name: "a"}, InternalURLs: map[string]string{"B_URL": "b"}}, named("b", nil)}, want: "a must start after b", wantErr: true},
		{name: "internal URL of a service not in the stack", services: []Service{{Spec: platform.Spec{Name: "a"}, InternalURLs: map[string]string{"X_URL": "x"}}}, want: "not in the stack", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := plan(tc.services, tc.only)
			switch {
			case tc.wantErr && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v, want one saying %q", err, tc.want)
			case !tc.wantErr && err != nil:
				t.Fatal(err)
			case !tc.wantErr && names(got) != tc.want:
				t.Fatalf("starts %s, want %s", names(got), tc.want)
			}
		})
	}
}

// The real stack passes the checks Start makes, and accounts' sync barrier
// has a replica to wait for.
func TestServicesAreConsistent(t *testing.T) {
	services, err := plan(Services(), nil)
	if err != nil {
		t.Fatal(err)
	}
	replicas := 0
	for _, s := range services {
		if s.CatalogReplica {
			replicas++
		}
	}
	if replicas == 0 {
		t.Fatal("no service replicates the catalog: CATALOG_CONSUMERS would be empty")
	}
}

func migrations() fstest.MapFS {
	return fstest.MapFS{"00001_probe.sql": {Data: []byte("-- +goose Up\nCREATE TABLE probe (id int);\n")}}
}

// reads records the variables each stand-in service saw at start.
type reads struct {
	mu   sync.Mutex
	seen map[string]map[string]string
}

func (r *reads) service(name string, replica bool, urls map[string]string, keys ...string) Service {
	return Service{CatalogReplica: replica, URLs: urls, Spec: platform.Spec{
		Name:       name,
		Migrations: migrations(),
		Wire: func(_ context.Context, p *platform.Platform) ([]platform.Route, error) {
			got := map[string]string{"schema": p.Config.Schema}
			for _, k := range keys {
				got[k] = p.Env.String(k, "")
			}
			r.mu.Lock()
			r.seen[name] = got
			r.mu.Unlock()
			return []platform.Route{{Pattern: "GET /whoami", Name: "whoami", Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(name))
			})}}, nil
		},
	}}
}

// Each service gets its own port and schema, the derived catalog consumers
// and the URLs of the services it calls; everything else comes from Env,
// except what the stack decides.
func TestStartDerivesTheWiring(t *testing.T) {
	env := platformtest.With(platformtest.Env(t), map[string]string{
		"HTTP_ADDR":         "127.0.0.1:1", // decided by the stack
		"DB_SCHEMA":         "shared",      // decided by the stack
		"CATALOG_CONSUMERS": "someone",     // decided by the stack
		"SHARED":            "yes",
		"C_USES_A":          "http://elsewhere.example", // a not-started target is left to Env
	})
	keys := []string{"HTTP_ADDR", "CATALOG_CONSUMERS", "SHARED", "A_URL", "B_URL", "C_USES_A"}
	bURLs := map[string]string{"A_URL": "a"}
	cURLs := map[string]string{"A_URL": "a", "B_URL": "b", "C_USES_A": "a"}
	t.Run("all", func(t *testing.T) {
		r := &reads{seen: map[string]map[string]string{}}
		services := []Service{r.service("a", true, nil, keys...), r.service("b", false, bURLs, keys...), r.service("c", true, cURLs, keys...)}
		s, err := start(context.Background(), services, Options{Env: func(k string) string { return env[k] }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if got := strings.Join(s.Names(), ","); got != "a,b,c" {
			t.Fatalf("names %s", got)
		}
		for _, name := range []string{"a", "b", "c"} {
			seen := r.seen[name]
			if seen["schema"] != name || seen["HTTP_ADDR"] != "127.0.0.1:0" || seen["CATALOG_CONSUMERS"] != "a,c" || seen["SHARED"] != "yes" {
				t.Errorf("%s saw %v", name, seen)
			}
		}
		if got := r.seen["a"]["A_URL"] + r.seen["a"]["B_URL"]; got != "" {
			t.Errorf("a calls no one but saw %q", got)
		}
		if r.seen["b"]["A_URL"] != s.URL("a") || r.seen["c"]["A_URL"] != s.URL("a") || r.seen["c"]["B_URL"] != s.URL("b") || r.seen["c"]["C_USES_A"] != s.URL("a") {
			t.Errorf("urls: a %s b %s; b saw %v, c saw %v", s.URL("a"), s.URL("b"), r.seen["b"], r.seen["c"])
		}
		handlers := s.Handlers()
		for _, name := range []string{"a", "b", "c"} {
			rec := httptest.NewRecorder()
			handlers[name].ServeHTTP(rec, httptest.NewRequest("GET", "/whoami", nil))
			if rec.Body.String() != name {
				t.Errorf("handler of %s answered %q", name, rec.Body.String())
			}
			resp, err := http.Get(s.URL(name) + "/whoami")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || s.Instance(name) == nil {
				t.Errorf("%s over HTTP: %d", name, resp.StatusCode)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
	t.Run("only c", func(t *testing.T) {
		r := &reads{seen: map[string]map[string]string{}}
		services := []Service{r.service("a", true, nil, keys...), r.service("b", false, bURLs, keys...), r.service("c", false, cURLs, keys...)}
		s, err := start(context.Background(), services, Options{Env: func(k string) string { return env[k] }, Only: []string{"c"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if len(r.seen) != 1 || s.Instance("a") != nil || s.URL("a") != "" {
			t.Fatalf("started %v", s.Names())
		}
		seen := r.seen["c"]
		if seen["CATALOG_CONSUMERS"] != "" || seen["A_URL"] != "" || seen["B_URL"] != "" || seen["C_USES_A"] != "http://elsewhere.example" {
			t.Errorf("c alone saw %v", seen)
		}
	})
	t.Run("c elsewhere", func(t *testing.T) {
		r := &reads{seen: map[string]map[string]string{}}
		services := []Service{r.service("a", true, nil, keys...), r.service("b", false, bURLs, keys...), r.service("c", true, cURLs, keys...)}
		s, err := start(context.Background(), services, Options{Env: func(k string) string { return env[k] }, Elsewhere: []string{"c"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if got := strings.Join(s.Names(), ","); got != "a,b" || r.seen["c"] != nil || s.Instance("c") != nil {
			t.Fatalf("started %s", got)
		}
		// The started ones count c as a replica; c's wiring is what it
		// would have read here.
		if got := r.seen["a"]["CATALOG_CONSUMERS"]; got != "a,c" {
			t.Errorf("a saw CATALOG_CONSUMERS %q, want a,c", got)
		}
		want := map[string]string{"HTTP_ADDR": "127.0.0.1:0", "DB_SCHEMA": "c", "CATALOG_CONSUMERS": "a,c",
			"A_URL": s.URL("a"), "B_URL": s.URL("b"), "C_USES_A": s.URL("a")}
		if got := s.Wiring("c"); !maps.Equal(got, want) {
			t.Errorf("c's wiring %v, want %v", got, want)
		}
		if got := s.Wiring("b")["A_URL"]; got != s.URL("a") || s.Wiring("nobody") != nil {
			t.Errorf("b's wiring has A_URL %q (a is %s); nobody's %v", got, s.URL("a"), s.Wiring("nobody"))
		}
		_, err = start(context.Background(), services, Options{Env: func(k string) string { return env[k] }, Only: []string{"a"}, Elsewhere: []string{"c"}})
		if err == nil || !strings.Contains(err.Error(), `Elsewhere names "c"`) {
			t.Fatalf("c elsewhere but not in Only: err %v", err)
		}
	})
	t.Run("a failed start stops the services already started", func(t *testing.T) {
		r := &reads{seen: map[string]map[string]string{}}
		bad := Service{Spec: platform.Spec{Name: "bad", Migrations: migrations(), Wire: func(context.Context, *platform.Platform) ([]platform.Route, error) {
			return nil, errors.New("no wiring")
		}}}
		services := []Service{r.service("a", true, nil), bad}
		var logs bytes.Buffer // a's, which logs "stopped" when it has
		verbose := platformtest.With(env, map[string]string{"LOG_LEVEL": "info"})
		_, err := start(context.Background(), services, Options{
			Env: func(k string) string { return verbose[k] },
			Logs: func(service string) io.Writer {
				if service == "a" {
					return &logs
				}
				return nil
			},
		})
		if err == nil || !strings.Contains(err.Error(), "start bad") || !strings.Contains(err.Error(), "no wiring") {
			t.Fatalf("err %v, want start bad: ... no wiring", err)
		}
		if !strings.Contains(logs.String(), `"msg":"stopped"`) {
			t.Fatalf("a was not stopped; its log:\n%s", logs.String())
		}
	})
}

// With OPS_HTTP_ADDR in Env every service gets its own operations port; a
// variable of InternalURLs gets the callee's operations URL (where its
// /internal/ routes are), one of URLs its public URL; Handlers gives each
// service's two handlers to the gateway.
func TestStartWithOperationsPorts(t *testing.T) {
	env := platformtest.With(platformtest.Env(t), map[string]string{"OPS_HTTP_ADDR": "127.0.0.1:0"})
	r := &reads{seen: map[string]map[string]string{}}
	a := r.service("a", false, nil)
	b := r.service("b", false, map[string]string{"A_URL": "a"}, "A_URL", "A_INTERNAL_URL")
	b.InternalURLs = map[string]string{"A_INTERNAL_URL": "a"}
	s, err := start(context.Background(), []Service{a, b}, Options{Env: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if s.OpsURL("a") == s.URL("a") || s.OpsURL("a") != "http://"+s.Instance("a").OpsAddr() {
		t.Fatalf("a: URL %s, OpsURL %s", s.URL("a"), s.OpsURL("a"))
	}
	if got := r.seen["b"]; got["A_URL"] != s.URL("a") || got["A_INTERNAL_URL"] != s.OpsURL("a") {
		t.Fatalf("b saw %v; a is %s, its ops %s", got, s.URL("a"), s.OpsURL("a"))
	}
	if s.OpsURL("nobody") != "" {
		t.Fatalf("OpsURL of a service not running: %q", s.OpsURL("nobody"))
	}
	// /whoami is public: the public handler answers it, the ops one 404s.
	ports, ok := s.Handlers()["a"].(gateway.Ports)
	if !ok {
		t.Fatalf("Handlers()[a] is %T, want gateway.Ports", s.Handlers()["a"])
	}
	for _, h := range []struct {
		name    string
		handler http.Handler
		status  int
	}{{"public", ports.Public, 200}, {"ops", ports.Ops, 404}} {
		rec := httptest.NewRecorder()
		h.handler.ServeHTTP(rec, httptest.NewRequest("GET", "/whoami", nil))
		if rec.Code != h.status {
			t.Errorf("%s handler: GET /whoami %d, want %d", h.name, rec.Code, h.status)
		}
	}
}
