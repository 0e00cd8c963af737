package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// LoadConfig is one closed-loop run against one URL: Connections workers,
// each with its own keep-alive connection, send requests back to back until
// Duration has passed or the Jobs requests are all sent, whichever comes
// first.
type LoadConfig struct {
	Name        string // e.g. "sale service"
	URL         string
	APIKey      string // sent as Authorization: Bearer, when set
	Connections int
	Duration    time.Duration
	// Jobs is how many requests there are to send (one fresh customer per
	// sale, one refund per recorded sale); negative is unbounded.
	Jobs int
	// Body returns request i's JSON body.
	Body func(i int) []byte
}

// Result is what one run measured. Latency covers every response received
// (any status); transport errors have no latency.
type Result struct {
	Name            string
	Elapsed         time.Duration
	Requests        int64 // responses received
	OK              int64 // 200 answers
	TransportErrors int64
	Statuses        map[int]int64    // every status received
	Outcomes        map[string]int64 // of the 200s, the answer's "status" field (refunds), when present
	Failures        map[int]string   // the first answer of each non-200 status, for the report
	FirstTransport  string
	Exhausted       bool  // every job was sent before Duration passed
	Done            []int // jobs answered 200, in no particular order
	Latency         Latency
}

// Throughput is 200 answers per second of wall time.
func (r Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// newClient returns a client whose transport keeps one idle connection per
// worker, so a closed-loop run never re-dials (the default of 2 idle
// connections per host would measure TCP setup instead of the route).
func newClient(connections int) *http.Client {
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

type workerStats struct {
	samples   []time.Duration
	statuses  map[int]int64
	outcomes  map[string]int64
	failures  map[int]string
	done      []int
	transport int64
	firstErr  string
	err       error
}

// runLoad drives cfg.URL until cfg.Duration has passed (requests in flight
// then complete and count), the jobs run out, or ctx ends.
func runLoad(ctx context.Context, client *http.Client, cfg LoadConfig) (Result, error) {
	if cfg.Connections < 1 || cfg.Duration <= 0 || cfg.Body == nil {
		return Result{}, errors.New("load: need connections >= 1, a positive duration and a body")
	}
	stats := make([]workerStats, cfg.Connections)
	var next atomic.Int64
	var exhausted atomic.Bool
	start := time.Now()
	end := start.Add(cfg.Duration)
	var wg sync.WaitGroup
	for i := range stats {
		wg.Go(func() { drive(ctx, client, cfg, &next, &exhausted, end, &stats[i]) })
	}
	wg.Wait()
	res := Result{
		Name: cfg.Name, Elapsed: time.Since(start), Exhausted: exhausted.Load(),
		Statuses: map[int]int64{}, Outcomes: map[string]int64{}, Failures: map[int]string{},
	}
	n := 0
	for i := range stats {
		n += len(stats[i].samples)
	}
	all := make([]time.Duration, 0, n)
	for i := range stats {
		s := &stats[i]
		if s.err != nil {
			return Result{}, s.err
		}
		all = append(all, s.samples...)
		res.Done = append(res.Done, s.done...)
		for code, c := range s.statuses {
			res.Statuses[code] += c
		}
		for o, c := range s.outcomes {
			res.Outcomes[o] += c
		}
		for code, msg := range s.failures {
			if _, ok := res.Failures[code]; !ok {
				res.Failures[code] = msg
			}
		}
		res.TransportErrors += s.transport
		if res.FirstTransport == "" {
			res.FirstTransport = s.firstErr
		}
	}
	res.OK = res.Statuses[http.StatusOK]
	res.Requests = int64(len(all))
	res.Latency = summarize(all)
	return res, nil
}

// drive is one worker: one request at a time, back to back.
func drive(ctx context.Context, client *http.Client, cfg LoadConfig, next *atomic.Int64, exhausted *atomic.Bool, end time.Time, s *workerStats) {
	s.samples = make([]time.Duration, 0, 8192)
	s.statuses, s.outcomes, s.failures = map[int]int64{}, map[string]int64{}, map[int]string{}
	var body bytes.Buffer
	for ctx.Err() == nil && time.Now().Before(end) {
		i := int(next.Add(1) - 1)
		if cfg.Jobs >= 0 && i >= cfg.Jobs {
			exhausted.Store(true)
			return
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(cfg.Body(i)))
		if err != nil {
			s.err = fmt.Errorf("build request: %w", err)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		if cfg.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
		}
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.transport++
			if s.firstErr == "" {
				s.firstErr = err.Error()
			}
			continue
		}
		body.Reset()
		_, err = body.ReadFrom(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		lat := time.Since(t0)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.transport++
			if s.firstErr == "" {
				s.firstErr = "read answer: " + err.Error()
			}
			continue
		}
		s.samples = append(s.samples, lat)
		s.statuses[resp.StatusCode]++
		if resp.StatusCode != http.StatusOK {
			if _, ok := s.failures[resp.StatusCode]; !ok {
				s.failures[resp.StatusCode] = fmt.Sprintf("%.300s", bytes.TrimSpace(body.Bytes()))
			}
			continue
		}
		s.done = append(s.done, i)
		if o := outcomeOf(body.Bytes()); o != "" {
			s.outcomes[o]++
		}
	}
}

// outcomeOf reads the "status" field of a 200 answer (the refund route
// answers {success, status: refunded|reversed|skipped|no_commission}).
func outcomeOf(b []byte) string {
	var a struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(b, &a) != nil {
		return ""
	}
	return a.Status
}

// Latency summarises one run's request latencies, from every sample kept
// and sorted once (exact nearest-rank percentiles).
type Latency struct {
	Count         int
	P50, P90, P99 time.Duration
	Max           time.Duration
}

func summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	slices.Sort(samples)
	return Latency{
		Count: len(samples),
		P50:   percentile(samples, 50),
		P90:   percentile(samples, 90),
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

// clickIDOf reads the click id of a click's success answer
// `{success: true, click_id, ...}`.
func clickIDOf(b []byte) (string, bool) {
	var a struct {
		Success bool   `json:"success"`
		ClickID string `json:"click_id"`
	}
	if err := json.Unmarshal(b, &a); err != nil || !a.Success || a.ClickID == "" {
		return "", false
	}
	return a.ClickID, true
}
