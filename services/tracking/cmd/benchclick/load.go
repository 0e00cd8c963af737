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
	"sync"
	"time"
)

// LoadConfig is one closed-loop run against one target: Connections
// workers, each with its own keep-alive connection, send clicks back to back
// for Duration.
type LoadConfig struct {
	Name        string
	URL         string // the click route, e.g. http://127.0.0.1:4321/api/v1/track/click
	Connections int
	Duration    time.Duration
	Workload    *Workload
	Seed        uint64 // worker i draws from Seed+i, so runs are repeatable
}

// Result is what one run measured. Latency covers every response received
// (any status); transport errors have no latency.
type Result struct {
	Name            string
	Connections     int
	Elapsed         time.Duration
	Requests        int64 // responses received
	OK              int64 // 2xx answers carrying a click id
	Reused          int64 // of OK, clicks sent with existing_click_id
	RateLimited     int64 // 429
	Failed          int64 // any other status, or a 2xx without a click id
	TransportErrors int64
	Statuses        map[int]int64
	FirstFailure    string // the first failed answer or transport error, for the report
	WarmupOK        int64  // OK answers of the warm-up before this run, for the row-count check
	CPU             CPUUse // CPU spent during the measured run
	LoadBefore      string // 1-minute load average before and after the run (context on a shared machine)
	LoadAfter       string
	Latency         Latency
}

// Throughput is recorded clicks per second of wall time.
func (r Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// newClient returns a client whose transport keeps exactly one idle
// connection per worker, so a closed-loop run never re-dials: the default
// MaxIdleConnsPerHost of 2 would close and reopen connections all run long
// and measure TCP setup instead of the route.
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
	samples                                []time.Duration
	statuses                               map[int]int64
	ok, reused, limited, failed, transport int64
	firstFailure                           string
	err                                    error
}

func (w *workerStats) fail(msg string) {
	if w.firstFailure == "" {
		w.firstFailure = msg
	}
}

// runLoad drives cfg.URL until cfg.Duration has passed (requests in flight
// then complete and count) or ctx ends.
func runLoad(ctx context.Context, client *http.Client, cfg LoadConfig) (Result, error) {
	if cfg.Connections < 1 || cfg.Duration <= 0 || cfg.Workload == nil || len(cfg.Workload.Codes) == 0 || len(cfg.Workload.IPs) == 0 {
		return Result{}, errors.New("load: need connections >= 1, a positive duration, link codes and client addresses")
	}
	stats := make([]workerStats, cfg.Connections)
	start := time.Now()
	end := start.Add(cfg.Duration)
	var wg sync.WaitGroup
	for i := range stats {
		wg.Go(func() {
			drive(ctx, client, cfg, cfg.Workload.generator(cfg.Seed+uint64(i)), end, &stats[i])
		})
	}
	wg.Wait()
	res := Result{Name: cfg.Name, Connections: cfg.Connections, Elapsed: time.Since(start), Statuses: map[int]int64{}}
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
		for code, c := range s.statuses {
			res.Statuses[code] += c
		}
		res.OK += s.ok
		res.Reused += s.reused
		res.RateLimited += s.limited
		res.Failed += s.failed
		res.TransportErrors += s.transport
		if res.FirstFailure == "" {
			res.FirstFailure = s.firstFailure
		}
	}
	res.Requests = int64(len(all))
	res.Latency = summarize(all)
	return res, nil
}

// drive is one worker: one request at a time, back to back.
func drive(ctx context.Context, client *http.Client, cfg LoadConfig, g *generator, end time.Time, s *workerStats) {
	s.samples = make([]time.Duration, 0, 16384)
	s.statuses = map[int]int64{}
	var body bytes.Buffer
	for ctx.Err() == nil && time.Now().Before(end) {
		c, err := g.next()
		if err != nil {
			s.err = err
			return
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(c.body))
		if err != nil {
			s.err = fmt.Errorf("build request: %w", err)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("User-Agent", c.userAgent)
		req.Header.Set("Origin", cfg.Workload.Origin)
		req.Header.Set("X-Forwarded-For", c.clientIP)

		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.transport++
			s.fail(err.Error())
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
			s.fail("read answer: " + err.Error())
			continue
		}
		s.samples = append(s.samples, lat)
		s.statuses[resp.StatusCode]++
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			s.limited++
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			id, ok := clickIDOf(body.Bytes())
			if !ok {
				s.failed++
				s.fail(fmt.Sprintf("%d without success/click_id: %.200s", resp.StatusCode, body.Bytes()))
				continue
			}
			s.ok++
			if c.reused {
				s.reused++
			}
			g.observe(id)
		default:
			s.failed++
			s.fail(fmt.Sprintf("%d: %.300s", resp.StatusCode, bytes.TrimSpace(body.Bytes())))
		}
	}
}

// clickIDOf reads the click id from a success answer
// `{success: true, click_id, partner_code, cookie_window_days}`.
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
