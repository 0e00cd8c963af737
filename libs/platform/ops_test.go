package platform_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// opsSpec has one route of each kind: public, admin and internal.
func opsSpec() platform.Spec {
	s := spec()
	s.Wire = func(context.Context, *platform.Platform) ([]platform.Route, error) {
		ok := func(body string) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) })
		}
		return []platform.Route{
			{Pattern: "GET /api/v1/thing", Name: "thing", Handler: ok("public")},
			{Pattern: "GET /admin/v1/thing", Name: "admin_thing", Handler: ok("admin")},
			{Pattern: "POST /internal/v1/thing", Name: "internal_thing", Handler: ok("internal")},
		}, nil
	}
	return s
}

type answer struct {
	status int
	body   string
}

func call(t *testing.T, method, url string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(body)}
}

// With OPS_HTTP_ADDR the admin, internal and metrics routes are served on
// that second listener only: the public port answers them like any unknown
// path (404, the platform's envelope), so a Service exposing only the
// public port cannot reach them. Probes answer on both ports.
func TestOpsListenerServesAdminInternalAndMetricsApart(t *testing.T) {
	t.Parallel()
	inst := platformtest.Start(t, opsSpec(), platformtest.With(platformtest.Env(t), map[string]string{"OPS_HTTP_ADDR": "127.0.0.1:0"}))
	if inst.OpsAddr() == inst.Addr() {
		t.Fatalf("ops address %s is the public one", inst.OpsAddr())
	}
	public, ops := "http://"+inst.Addr(), "http://"+inst.OpsAddr()
	tests := []struct {
		name           string
		method, path   string
		onPublic       int
		onOps          int
		publicContains string
		opsContains    string
	}{
		{"public route on the public port only", "GET", "/api/v1/thing", 200, 404, "public", "No route for GET /api/v1/thing"},
		{"admin route on the ops port only", "GET", "/admin/v1/thing", 404, 200, "No route for GET /admin/v1/thing", "admin"},
		{"internal route on the ops port only", "POST", "/internal/v1/thing", 404, 200, "No route for POST /internal/v1/thing", "internal"},
		{"metrics on the ops port only", "GET", "/metrics", 404, 200, "No route for GET /metrics", "http_requests_total"},
		{"an unknown admin path is a 404 on both", "GET", "/admin/v1/nothing", 404, 404, "No route", "No route"},
		// A route's path with another method: 405 where the route is
		// served, and the plain 404 where it is not (the public port says
		// nothing of the ops port's routes).
		{"public route, other method", "DELETE", "/api/v1/thing", 405, 404, "Method DELETE is not allowed for /api/v1/thing", "No route for DELETE /api/v1/thing"},
		{"internal route, other method", "GET", "/internal/v1/thing", 404, 405, "No route for GET /internal/v1/thing", "Method GET is not allowed"},
		{"liveness, other method", "POST", "/healthz", 405, 405, "MethodNotAllowedError", "MethodNotAllowedError"},
		{"liveness on both", "GET", "/healthz", 200, 200, "", ""},
		{"readiness on both", "GET", "/readyz", 200, 200, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := call(t, tt.method, public+tt.path); got.status != tt.onPublic || !strings.Contains(got.body, tt.publicContains) {
				t.Errorf("public port: %d %q, want %d with %q", got.status, got.body, tt.onPublic, tt.publicContains)
			}
			if got := call(t, tt.method, ops+tt.path); got.status != tt.onOps || !strings.Contains(got.body, tt.opsContains) {
				t.Errorf("ops port: %d %q, want %d with %q", got.status, got.body, tt.onOps, tt.opsContains)
			}
		})
	}
	// The handlers a local gateway calls are the listeners' own.
	for _, h := range []struct {
		name    string
		handler http.Handler
		status  int
	}{{"Handler", inst.Handler(), 404}, {"OpsHandler", inst.OpsHandler(), 200}} {
		rec := httptest.NewRecorder()
		h.handler.ServeHTTP(rec, httptest.NewRequest("GET", "/admin/v1/thing", nil))
		if rec.Code != h.status {
			t.Errorf("%s: GET /admin/v1/thing %d, want %d", h.name, rec.Code, h.status)
		}
	}
}

// Without OPS_HTTP_ADDR (local runs, tests) one port serves everything, as
// before, and the ops address and handler are the public ones.
func TestWithoutOpsListenerOnePortServesEverything(t *testing.T) {
	t.Parallel()
	inst := platformtest.Start(t, opsSpec(), platformtest.Env(t))
	if inst.OpsAddr() != inst.Addr() {
		t.Fatalf("ops address %s, want the public %s", inst.OpsAddr(), inst.Addr())
	}
	base := "http://" + inst.Addr()
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/api/v1/thing", "public"}, {"GET", "/admin/v1/thing", "admin"}, {"POST", "/internal/v1/thing", "internal"}, {"GET", "/metrics", "http_requests_total"},
	} {
		if got := call(t, c.method, base+c.path); got.status != 200 || !strings.Contains(got.body, c.want) {
			t.Errorf("%s %s: %d %q", c.method, c.path, got.status, got.body)
		}
	}
}

// The ops address must differ from the public one; refused before anything
// is opened.
func TestOpsListenerOnTheHTTPAddressIsRefused(t *testing.T) {
	t.Parallel()
	env := map[string]string{"HTTP_ADDR": ":8080", "OPS_HTTP_ADDR": ":8080"}
	inst, err := platformtest.TryStart(t, opsSpec(), env)
	if err == nil {
		t.Fatalf("started with ops on %s", inst.OpsAddr())
	}
	if !strings.Contains(err.Error(), "OPS_HTTP_ADDR") {
		t.Fatalf("error %q does not name OPS_HTTP_ADDR", err)
	}
}

// A route's path called with another method names the methods it takes.
func TestOtherMethodOfARouteIs405WithAllow(t *testing.T) {
	t.Parallel()
	inst := platformtest.Start(t, opsSpec(), platformtest.Env(t))
	for _, c := range []struct{ method, path, allow string }{
		{"DELETE", "/api/v1/thing", "GET, HEAD"},
		{"POST", "/api/v1/thing", "GET, HEAD"},
		{"GET", "/internal/v1/thing", "POST"},
		{"PUT", "/healthz", "GET, HEAD"},
	} {
		rec := httptest.NewRecorder()
		inst.Handler().ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != 405 || rec.Header().Get("Allow") != c.allow || !strings.Contains(rec.Body.String(), `"name":"MethodNotAllowedError"`) {
			t.Errorf("%s %s: %d Allow %q %s, want 405 Allow %q", c.method, c.path, rec.Code, rec.Header().Get("Allow"), rec.Body.String(), c.allow)
		}
	}
	rec := httptest.NewRecorder()
	inst.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/nothing", nil))
	if rec.Code != 404 || rec.Header().Get("Allow") != "" {
		t.Errorf("unknown path: %d Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
}
