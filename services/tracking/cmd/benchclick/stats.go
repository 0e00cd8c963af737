package main

import (
	"slices"
	"time"
)

// Latency summarises one run's request latencies. Samples are kept whole and
// sorted once at the end: a 20 s run at 64 connections yields a few hundred
// thousand samples (a few MB), so exact percentiles cost less than adding a
// histogram dependency.
type Latency struct {
	Count         int
	P50, P90, P99 time.Duration
	Max           time.Duration
	Mean          time.Duration
}

// summarize sorts samples in place and reads nearest-rank percentiles.
func summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	slices.Sort(samples)
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	return Latency{
		Count: len(samples),
		P50:   percentile(samples, 50),
		P90:   percentile(samples, 90),
		P99:   percentile(samples, 99),
		Max:   samples[len(samples)-1],
		Mean:  sum / time.Duration(len(samples)),
	}
}

// percentile is the nearest-rank percentile of sorted: the smallest sample
// such that at least p% of the samples are at or below it.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}
