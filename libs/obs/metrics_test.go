package obs_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/svc-dev/svc/libs/obs"
)

func newMetrics(t *testing.T) (*prometheus.Registry, *obs.HTTPMetrics) {
	t.Helper()
	reg := obs.NewRegistry()
	m, err := obs.NewHTTPMetrics(reg)
	if err != nil {
		t.Fatalf("NewHTTPMetrics: %v", err)
	}
	return reg, m
}

func TestHTTPMetrics_MiddlewareRecordsRouteMethodStatus(t *testing.T) {
	t.Parallel()
	reg, m := newMetrics(t)
	h := m.Middleware("POST /api/v1/track/sale", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Fail") != "" {
			w.WriteHeader(http.StatusConflict)
			return
		}
		_, _ = io.WriteString(w, "ok") // implicit 200
	}))

	for _, fail := range []bool{false, false, true} {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/track/sale?id=123", nil)
		if fail {
			req.Header.Set("X-Fail", "1")
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
	}

	want := `
# HELP http_requests_total HTTP requests served, by route pattern, method and status code.
# TYPE http_requests_total counter
http_requests_total{method="POST",route="POST /api/v1/track/sale",status="200"} 2
http_requests_total{method="POST",route="POST /api/v1/track/sale",status="409"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "http_requests_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "http_request_duration_seconds"); n != 2 {
		t.Fatalf("duration series = %d, want 2", n)
	}
}

func TestHTTPMetrics_WrapLabelsByMuxPatternNeverRawPath(t *testing.T) {
	t.Parallel()
	reg, m := newMetrics(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/tracking/status/{programId}", func(w http.ResponseWriter, r *http.Request) {})
	h := m.Wrap(mux)

	for _, path := range []string{"/api/tracking/status/1", "/api/tracking/status/2", "/no/such/route"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("BREW", "/api/tracking/status/3", nil))

	want := `
# HELP http_requests_total HTTP requests served, by route pattern, method and status code.
# TYPE http_requests_total counter
http_requests_total{method="GET",route="GET /api/tracking/status/{programId}",status="200"} 2
http_requests_total{method="GET",route="unmatched",status="404"} 1
http_requests_total{method="OTHER",route="unmatched",status="405"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "http_requests_total"); err != nil {
		t.Fatal(err)
	}
}

func TestNewHTTPMetrics_TwiceOnOneRegistryShareCollectors(t *testing.T) {
	t.Parallel()
	reg, m1 := newMetrics(t)
	m2, err := obs.NewHTTPMetrics(reg)
	if err != nil {
		t.Fatalf("second NewHTTPMetrics: %v", err)
	}
	noop := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	m1.Middleware("a", noop).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	m2.Middleware("a", noop).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	want := `
# HELP http_requests_total HTTP requests served, by route pattern, method and status code.
# TYPE http_requests_total counter
http_requests_total{method="GET",route="a",status="200"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "http_requests_total"); err != nil {
		t.Fatal(err)
	}
}

func TestNewHTTPMetrics_ConflictingCollectorIsAnError(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "http_requests_total", Help: "other"}))
	if _, err := obs.NewHTTPMetrics(reg); err == nil {
		t.Fatal("NewHTTPMetrics on a conflicting registry succeeded, want error")
	}
}

func TestHandler_ServesRegistryIncludingRuntimeCollectors(t *testing.T) {
	t.Parallel()
	reg, m := newMetrics(t)
	m.Middleware("x", http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))

	rec := httptest.NewRecorder()
	obs.Handler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	body := rec.Body.String()
	for _, name := range []string{"go_goroutines", "process_", `http_requests_total{method="GET",route="x",status="404"} 1`, "http_request_duration_seconds_bucket"} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %q", name)
		}
	}
}
