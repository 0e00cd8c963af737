package obstest_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svc-dev/svc/libs/obs/obstest"
)

func TestMetricSumsTheMatchingSeries(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "events_total"}, []string{"topic", "outcome"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "backlog"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lag_seconds"})
	reg.MustRegister(c, g, h)
	c.WithLabelValues("a", "ok").Add(2)
	c.WithLabelValues("b", "ok").Add(3)
	c.WithLabelValues("a", "failed").Inc()
	g.Set(7)
	h.Observe(1)
	h.Observe(2)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"events_total", nil, 6},
		{"events_total", []string{"outcome", "ok"}, 5},
		{"events_total", []string{"topic", "a", "outcome", "ok"}, 2},
		{"events_total", []string{"topic", "c"}, 0},
		{"backlog", nil, 7},
		{"lag_seconds", nil, 2},
		{"missing", nil, 0},
	} {
		if got := obstest.Metric(t, reg, tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s %v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}
