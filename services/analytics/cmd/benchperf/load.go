package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// op is one timed request. It returns what it got, for check, which runs
// after the clock stops.
type op func(ctx context.Context) (any, error)

// check judges one answer; an error counts the request as failed.
type check func(got any) error

// Result is what one run of fixed size measured. Latency covers the
// requests that succeeded and passed the check.
type Result struct {
	Name      string
	Requests  int
	OK        int
	Failed    int
	FirstFail string
	Elapsed   time.Duration
	Latency   Latency
}

// Throughput is successful requests per second of wall time.
func (r Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// Latency are nearest-rank percentiles of the successful requests.
type Latency struct {
	Count              int
	P50, P95, P99, Max time.Duration
}

// runFixed sends n requests with concurrency workers in a closed loop
// (each worker one request at a time, back to back) and times each.
func runFixed(ctx context.Context, name string, n, concurrency int, do op, ok check) Result {
	var next atomic.Int64
	var mu sync.Mutex
	res := Result{Name: name, Requests: n}
	samples := make([]time.Duration, 0, n)
	start := time.Now()
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, n/concurrency+1)
			var failed int
			var first string
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				t := time.Now()
				got, err := do(ctx)
				took := time.Since(t)
				if err == nil {
					err = ok(got)
				}
				if err != nil {
					failed++
					if first == "" {
						first = err.Error()
					}
					continue
				}
				mine = append(mine, took)
			}
			mu.Lock()
			samples = append(samples, mine...)
			res.Failed += failed
			if res.FirstFail == "" {
				res.FirstFail = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.OK = len(samples)
	res.Latency = summarize(samples)
	return res
}

func summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	slices.Sort(samples)
	return Latency{
		Count: len(samples),
		P50:   percentile(samples, 50),
		P95:   percentile(samples, 95),
		P99:   percentile(samples, 99),
		Max:   samples[len(samples)-1],
	}
}

// percentile is the nearest-rank percentile of sorted: the smallest sample
// such that at least p% of the samples are at or below it.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

// ms formats a duration in milliseconds with two decimals.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}
