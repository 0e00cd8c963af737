package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
)

// service stands in for a platform service's /readyz (status and body as
// libs/obs answers it) and counts the other requests it gets.
type service struct {
	ready  atomic.Bool
	others atomic.Int64
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != "/readyz" {
		s.others.Add(1)
		http.Error(w, "not a probe", http.StatusTeapot)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if s.ready.Load() {
		_, _ = io.WriteString(w, `{"status":"ready","checks":{"postgres":"ok"}}`)
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, `{"status":"not_ready","checks":{"postgres":"failed"}}`)
}

type probeAnswer struct {
	status int
	cache  string
	body   gateway.Readiness
	raw    string
}

func call(t *testing.T, method, url string) probeAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := probeAnswer{status: resp.StatusCode, cache: resp.Header.Get("Cache-Control"), raw: string(raw)}
	if method != http.MethodHead && resp.StatusCode != http.StatusMethodNotAllowed {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s %s: Content-Type %q, want application/json", method, url, ct)
		}
		dec := json.NewDecoder(strings.NewReader(a.raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a.body); err != nil && !strings.HasSuffix(url, "/healthz") {
			t.Fatalf("%s %s: %v in %s", method, url, err, raw)
		}
	}
	return a
}

// The gateway's /readyz is 200 only when every running service's own
// /readyz is; a service that is not ready makes it 503 and is named with
// its own status and checks, the others still listed as ready. /healthz
// is 200 whatever the services say (the gateway serves). Neither path is
// handed to a service as an ordinary request.
func TestGatewayReadyzIsReadyOnlyWhenEveryServiceIs(t *testing.T) {
	accounts, tracking := &service{}, &service{}
	accounts.ready.Store(true)
	srv := httptest.NewServer(gateway.New(map[string]http.Handler{
		"accounts": accounts,
		"tracking": gateway.Ports{Public: tracking, Ops: http.NotFoundHandler()},
	}))
	defer srv.Close()

	t.Run("a service not ready: 503 naming it", func(t *testing.T) {
		got := call(t, http.MethodGet, srv.URL+"/readyz")
		if got.status != http.StatusServiceUnavailable || got.body.Status != "not_ready" {
			t.Fatalf("%d %s, want 503 not_ready", got.status, got.raw)
		}
		if s := got.body.Services["tracking"]; s.Status != "not_ready" || s.Checks["postgres"] != "failed" {
			t.Fatalf("tracking: %+v in %s, want not_ready with postgres failed", s, got.raw)
		}
		if s := got.body.Services["accounts"]; s.Status != "ready" || len(got.body.Services) != 2 {
			t.Fatalf("services %s, want accounts ready and exactly the two services", got.raw)
		}
		if got.cache != "no-store" {
			t.Fatalf("Cache-Control %q, want no-store", got.cache)
		}
	})
	t.Run("healthz is 200 while a service is not ready", func(t *testing.T) {
		got := call(t, http.MethodGet, srv.URL+"/healthz")
		if got.status != http.StatusOK || strings.TrimSpace(got.raw) != `{"status":"ok"}` {
			t.Fatalf("%d %s, want 200 {\"status\":\"ok\"}", got.status, got.raw)
		}
	})
	t.Run("every service ready: 200", func(t *testing.T) {
		tracking.ready.Store(true)
		got := call(t, http.MethodGet, srv.URL+"/readyz")
		if got.status != http.StatusOK || got.body.Status != "ready" ||
			got.body.Services["accounts"].Status != "ready" || got.body.Services["tracking"].Status != "ready" {
			t.Fatalf("%d %s, want 200 with both ready", got.status, got.raw)
		}
	})
	t.Run("HEAD answers the status without a body", func(t *testing.T) {
		got := call(t, http.MethodHead, srv.URL+"/readyz")
		if got.status != http.StatusOK || got.raw != "" {
			t.Fatalf("HEAD /readyz: %d %q", got.status, got.raw)
		}
	})
	t.Run("other methods: 405 with Allow", func(t *testing.T) {
		for _, path := range []string{"/readyz", "/healthz"} {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader("{}"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var env struct{ Error struct{ Message string } }
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" ||
				json.Unmarshal(raw, &env) != nil || env.Error.Message == "" {
				t.Fatalf("POST %s: %d Allow %q %s", path, resp.StatusCode, resp.Header.Get("Allow"), raw)
			}
		}
	})
	if n := accounts.others.Load() + tracking.others.Load(); n != 0 {
		t.Fatalf("the services got %d requests other than GET /readyz", n)
	}
}

// A service that answers no readiness JSON (or a 503 claiming ready) is
// not ready: only a 200 counts.
func TestGatewayReadyzTrustsOnlyA200(t *testing.T) {
	srv := httptest.NewServer(gateway.New(map[string]http.Handler{
		"accounts": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"status":"ready"}`)
		}),
		"tracking": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "ok")
		}),
	}))
	defer srv.Close()
	got := call(t, http.MethodGet, srv.URL+"/readyz")
	if got.status != http.StatusServiceUnavailable || got.body.Status != "not_ready" ||
		got.body.Services["accounts"].Status != "not_ready" || got.body.Services["tracking"].Status != "unreachable" {
		t.Fatalf("%d %s, want 503 with accounts not_ready and tracking unreachable", got.status, got.raw)
	}
}

// With StartedWhen, every service ready is not enough: the gateway says
// "starting" (503) until the stack has finished starting (make run closes
// the channel once the demo catalog is seeded).
func TestGatewayReadyzWaitsForTheStackToStart(t *testing.T) {
	accounts := &service{}
	accounts.ready.Store(true)
	started := make(chan struct{})
	srv := httptest.NewServer(gateway.New(map[string]http.Handler{"accounts": accounts}, gateway.StartedWhen(started)))
	defer srv.Close()
	if got := call(t, http.MethodGet, srv.URL+"/readyz"); got.status != http.StatusServiceUnavailable || got.body.Status != "starting" ||
		got.body.Services["accounts"].Status != "ready" {
		t.Fatalf("before start: %d %s, want 503 starting with accounts ready", got.status, got.raw)
	}
	accounts.ready.Store(false)
	if got := call(t, http.MethodGet, srv.URL+"/readyz"); got.status != http.StatusServiceUnavailable || got.body.Status != "not_ready" {
		t.Fatalf("a service not ready while starting: %d %s, want 503 not_ready", got.status, got.raw)
	}
	accounts.ready.Store(true)
	close(started)
	if got := call(t, http.MethodGet, srv.URL+"/readyz"); got.status != http.StatusOK || got.body.Status != "ready" {
		t.Fatalf("after start: %d %s, want 200 ready", got.status, got.raw)
	}
}
