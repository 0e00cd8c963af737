// Package obstest reads metrics back in tests.
package obstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric sums the series of the metric name in g whose labels include the
// name/value pairs given: counters and gauges by value, histograms by
// sample count. A metric with no such series reads 0.
func Metric(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	value, _ := read(t, g, name, labels)
	return value
}

// HistogramSum sums the sample sums of the histogram name's series in g
// whose labels include the name/value pairs given (Metric gives their
// sample count).
func HistogramSum(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	_, sum := read(t, g, name, labels)
	return sum
}

// read sums the matching series' values (Metric's) and histogram sample
// sums.
func read(t testing.TB, g prometheus.Gatherer, name string, labels []string) (value, histSum float64) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue metrics
				}
			}
			switch {
			case m.GetCounter() != nil:
				value += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				value += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				value += float64(m.GetHistogram().GetSampleCount())
				histSum += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return value, histSum
}
