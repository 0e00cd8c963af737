package main

import (
	"testing"
	"time"
)

func TestSummarizeReadsNearestRankPercentiles(t *testing.T) {
	t.Parallel()
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // unsorted on purpose: summarize sorts
	}
	tests := []struct {
		name    string
		samples []time.Duration
		want    Latency
	}{
		{"no samples", nil, Latency{}},
		{"one sample is every percentile", ms(7), Latency{Count: 1, P50: 7 * time.Millisecond, P90: 7 * time.Millisecond, P99: 7 * time.Millisecond, Max: 7 * time.Millisecond, Mean: 7 * time.Millisecond}},
		{"1..100 ms", ms(hundred...), Latency{Count: 100, P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond, Mean: 50500 * time.Microsecond}},
		{"one slow outlier in ten sets p99 and max only", ms(1, 1, 1, 1, 1, 1, 1, 1, 1, 40), Latency{Count: 10, P50: time.Millisecond, P90: time.Millisecond, P99: 40 * time.Millisecond, Max: 40 * time.Millisecond, Mean: 4900 * time.Microsecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := summarize(tt.samples); got != tt.want {
				t.Fatalf("summarize = %+v, want %+v", got, tt.want)
			}
		})
	}
}
