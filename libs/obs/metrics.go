package obs

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/felixge/httpsnoop"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a fresh registry with the Go runtime and process
// collectors, the baseline every service exposes on /metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves the metrics of g (a *prometheus.Registry) for /metrics.
// Gathering errors are served as HTTP 500 rather than partial data so a
// broken collector is noticed.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
}

// HTTPMetrics records request counts and latencies per route pattern.
type HTTPMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
}

// NewHTTPMetrics registers http_requests_total and
// http_request_duration_seconds on reg. Registering twice on one registry
// (two handlers in one process) reuses the collectors already there instead
// of failing.
func NewHTTPMetrics(reg prometheus.Registerer) (*HTTPMetrics, error) {
	labels := []string{"route", "method", "status"}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "http_requests_total",
		Help: "HTTP requests served, by route pattern, method and status code.",
	}, labels)
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "http_request_duration_seconds",
		Help:    "HTTP request latency in seconds, by route pattern, method and status code.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, labels)
	// In flight, by route: what a shutdown waits for, and the long waits
	// (the sync barrier) that no finished-request metric shows.
	inFlight := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "http_requests_in_flight",
		Help: "HTTP requests being served, by route pattern (\"*\" for a whole mux, whose pattern is known only once matched).",
	}, []string{"route"})
	var err error
	if inFlight, err = registerOrReuse(reg, inFlight); err != nil {
		return nil, fmt.Errorf("register http_requests_in_flight: %w", err)
	}
	if requests, err = registerOrReuse(reg, requests); err != nil {
		return nil, fmt.Errorf("register http_requests_total: %w", err)
	}
	if duration, err = registerOrReuse(reg, duration); err != nil {
		return nil, fmt.Errorf("register http_request_duration_seconds: %w", err)
	}
	return &HTTPMetrics{requests: requests, duration: duration, inFlight: inFlight}, nil
}

func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// Middleware records requests to next under the given route pattern. route
// must be the pattern ("POST /api/v1/track/sale"), never the raw path, to
// keep label cardinality bounded.
func (m *HTTPMetrics) Middleware(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(route, next, w, r)
	})
}

// Wrap records requests to a whole http.ServeMux, labelled with the pattern
// the mux matched (r.Pattern, which the mux sets on the request it is given);
// requests matching no pattern are labelled "unmatched" so scanners cannot
// inflate cardinality.
func (m *HTTPMetrics) Wrap(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve("", mux, w, r)
	})
}

func (m *HTTPMetrics) serve(route string, next http.Handler, w http.ResponseWriter, r *http.Request) {
	flying := route
	if flying == "" {
		flying = "*"
	}
	g := m.inFlight.WithLabelValues(flying)
	g.Inc()
	defer g.Dec()
	// httpsnoop keeps Flusher, Hijacker and ReaderFrom of the original
	// writer, which a hand-rolled status recorder would hide.
	stats := httpsnoop.CaptureMetrics(next, w, r)
	if route == "" {
		route = r.Pattern
		if route == "" {
			route = "unmatched"
		}
	}
	status := strconv.Itoa(stats.Code)
	method := normalizeMethod(r.Method)
	m.requests.WithLabelValues(route, method, status).Inc()
	m.duration.WithLabelValues(route, method, status).Observe(stats.Duration.Seconds())
}

// normalizeMethod folds unknown methods into OTHER: the method is
// client-controlled and would otherwise be an unbounded label.
func normalizeMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}

// GroupCommits records how many calls each committed transaction of a
// group-committed write carried (pg.Group), per write, and the
// transactions that failed: the proof that concurrent writes share their
// commits, the size to tune a group's limit by, and groups that keep
// failing (each of their calls then runs alone).
type GroupCommits struct {
	calls    *prometheus.HistogramVec
	failures *prometheus.CounterVec
}

// NewGroupCommits registers db_group_commit_calls and
// db_group_commit_failures_total.
func NewGroupCommits(reg prometheus.Registerer) (*GroupCommits, error) {
	g := &GroupCommits{
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "db_group_commit_calls",
			Help:    "Calls committed by one transaction of a group-committed write (1: the call ran alone).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}, []string{"write"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "db_group_commit_failures_total",
			Help: "Transactions of a group-committed write that failed (a group's calls then run alone).",
		}, []string{"write"}),
	}
	for _, c := range []prometheus.Collector{g.calls, g.failures} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register group commit metrics: %w", err)
		}
	}
	return g, nil
}

// Observer is the pg.GroupOptions.Observe of write.
func (g *GroupCommits) Observer(write string) func(calls int, err error) {
	h, f := g.calls.WithLabelValues(write), g.failures.WithLabelValues(write)
	return func(calls int, err error) {
		if err != nil {
			f.Inc()
			return
		}
		h.Observe(float64(calls))
	}
}
