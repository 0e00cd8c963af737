// Package load is the one load generator of the benchmarks: a closed loop
// of workers (one request at a time each, back to back) for a duration or
// over a fixed number of jobs, every answer's latency kept and read as
// exact nearest-rank percentiles, and one report format (report.go).
package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one run: Connections workers send requests back to back until
// Duration has passed (requests in flight then complete and count), the
// Jobs are all sent, or ctx ends, whichever comes first.
type Config struct {
	Name        string
	Connections int
	// Duration is how long new requests start; 0 is no limit (Jobs then
	// bounds the run).
	Duration time.Duration
	// Jobs is how many requests there are to send (one fresh customer per
	// sale, a fixed count of queries); negative is unbounded.
	Jobs int
	// Do sends job from worker (0..Connections-1) and says what came back.
	// It is called from the worker's goroutine only.
	Do func(ctx context.Context, worker, job int) Outcome
}

// Outcome is what one request got.
type Outcome struct {
	// Err with no Status is no answer at all (a transport error): it has
	// no latency. Once ctx has ended it is not counted.
	Err error
	// Status is the answer's HTTP status; 0 for an answer that has none
	// (a query).
	Status int
	// OK says the answer is a success; any other answer counts as failed.
	OK bool
	// Label, on a success, is counted in Result.Labels (a refund's status,
	// "reused"); "" counts nothing.
	Label string
	// Detail, on a failure, says why; the first of each status is kept.
	Detail string
}

// Result is what one run measured. Latency covers every answer (successes
// and failures alike); transport errors have none.
type Result struct {
	Name            string
	Elapsed         time.Duration
	Requests        int64 // answers received
	OK              int64 // successes
	Failed          int64 // answers that were not a success
	TransportErrors int64
	Statuses        map[int]int64    // every status received (0: answers without one)
	Labels          map[string]int64 // of the successes, by label
	Failures        map[int]string   // the first failure of each status
	FirstTransport  string
	Exhausted       bool  // every job was sent before Duration passed
	Done            []int // jobs that succeeded, in no particular order
	Latency         Latency
	// CPU is the machine's busy CPU time during the run (every process:
	// the load generator, the services, Postgres; /proc/stat, 0 where it
	// cannot be read). Per success it is steadier than throughput on a
	// shared machine whose speed varies from one minute to the next.
	CPU time.Duration
}

// CPUPerOK is the machine's busy CPU time per success (0: not measured).
func (r Result) CPUPerOK() time.Duration {
	if r.OK == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.OK)
}

// busyCPU reads the machine's busy CPU time so far (user, nice, system,
// irq and softirq of every CPU; not idle, iowait or steal).
func busyCPU() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0
		}
		ticks += n
	}
	// USER_HZ is 100 on Linux.
	return time.Duration(ticks) * 10 * time.Millisecond
}

// Throughput is successes per second of wall time.
func (r Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// FirstFailure is the first failed answer of the lowest status, else the
// first transport error, else "".
func (r Result) FirstFailure() string {
	for _, code := range slices.Sorted(maps.Keys(r.Failures)) {
		return r.Failures[code]
	}
	return r.FirstTransport
}

type workerStats struct {
	samples   []time.Duration
	statuses  map[int]int64
	labels    map[string]int64
	failures  map[int]string
	done      []int
	ok, bad   int64
	transport int64
	firstErr  string
}

// Run drives cfg and returns what it measured; the error is a config that
// cannot run.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Connections < 1 || cfg.Duration < 0 || (cfg.Duration == 0 && cfg.Jobs < 0) || cfg.Do == nil {
		return Result{}, errors.New("load: need connections >= 1, a positive duration or a job count, and a request")
	}
	stats := make([]workerStats, cfg.Connections)
	var next atomic.Int64
	var exhausted atomic.Bool
	cpu0 := busyCPU()
	start := time.Now()
	end := start.Add(cfg.Duration)
	var wg sync.WaitGroup
	for w := range stats {
		wg.Go(func() {
			s := &stats[w]
			s.samples = make([]time.Duration, 0, 8192)
			s.statuses, s.labels, s.failures = map[int]int64{}, map[string]int64{}, map[int]string{}
			for ctx.Err() == nil && (cfg.Duration == 0 || time.Now().Before(end)) {
				job := int(next.Add(1) - 1)
				if cfg.Jobs >= 0 && job >= cfg.Jobs {
					exhausted.Store(true)
					return
				}
				t0 := time.Now()
				o := cfg.Do(ctx, w, job)
				s.record(ctx, job, time.Since(t0), o)
			}
		})
	}
	wg.Wait()
	var cpu time.Duration
	if cpu0 > 0 {
		cpu = busyCPU() - cpu0
	}
	res := Result{
		Name: cfg.Name, Elapsed: time.Since(start), Exhausted: exhausted.Load(), CPU: cpu,
		Statuses: map[int]int64{}, Labels: map[string]int64{}, Failures: map[int]string{},
	}
	n := 0
	for i := range stats {
		n += len(stats[i].samples)
	}
	all := make([]time.Duration, 0, n)
	for i := range stats {
		s := &stats[i]
		all = append(all, s.samples...)
		res.Done = append(res.Done, s.done...)
		res.OK += s.ok
		res.Failed += s.bad
		res.TransportErrors += s.transport
		for code, c := range s.statuses {
			res.Statuses[code] += c
		}
		for l, c := range s.labels {
			res.Labels[l] += c
		}
		for code, msg := range s.failures {
			if _, ok := res.Failures[code]; !ok {
				res.Failures[code] = msg
			}
		}
		if res.FirstTransport == "" {
			res.FirstTransport = s.firstErr
		}
	}
	res.Requests = int64(len(all))
	res.Latency = Summarize(all)
	return res, nil
}

func (s *workerStats) record(ctx context.Context, job int, took time.Duration, o Outcome) {
	if o.Err != nil && o.Status == 0 {
		if ctx.Err() != nil {
			return
		}
		s.transport++
		if s.firstErr == "" {
			s.firstErr = o.Err.Error()
		}
		return
	}
	s.samples = append(s.samples, took)
	s.statuses[o.Status]++
	if !o.OK {
		s.bad++
		if _, ok := s.failures[o.Status]; !ok {
			s.failures[o.Status] = o.Detail
		}
		return
	}
	s.ok++
	s.done = append(s.done, job)
	if o.Label != "" {
		s.labels[o.Label]++
	}
}

// NewClient returns a client whose transport keeps one idle connection per
// worker, so a closed-loop run never re-dials: the default of 2 idle
// connections per host would close and reopen connections all run long
// and measure TCP setup instead of the route.
func NewClient(connections int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        connections,
			MaxIdleConnsPerHost: connections,
			MaxConnsPerHost:     connections,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
}

// Send sends one request with client and reads at most 64 KiB of the
// answer. body nil sends none; header, when set, adds the request's
// headers. A transport error or an unreadable answer is err with status 0.
func Send(ctx context.Context, client *http.Client, method, url string, body []byte, header func(http.Header)) (status int, answer []byte, err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if header != nil {
		header(req.Header)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, nil, fmt.Errorf("read answer: %w", err)
	}
	return resp.StatusCode, answer, nil
}

// Latency summarises one run's latencies. Samples are kept whole and sorted
// once at the end: a 20 s run at 64 connections yields a few hundred
// thousand samples (a few MB), so exact percentiles cost less than adding
// a histogram dependency.
type Latency struct {
	Count                   int
	P50, P90, P95, P99, Max time.Duration
	Mean                    time.Duration
}

// Summarize sorts samples in place and reads nearest-rank percentiles.
func Summarize(samples []time.Duration) Latency {
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
		P50:   Percentile(samples, 50),
		P90:   Percentile(samples, 90),
		P95:   Percentile(samples, 95),
		P99:   Percentile(samples, 99),
		Max:   samples[len(samples)-1],
		Mean:  sum / time.Duration(len(samples)),
	}
}

// Percentile is the nearest-rank percentile of sorted: the smallest sample
// such that at least p% of the samples are at or below it.
func Percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}
