package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/svc-dev/svc/bench/internal/rig"
	"github.com/svc-dev/svc/bench/load"
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

// Result is what one run measured: the load generator's figures (a
// success is a 2xx carrying a click id, labelled "reused" when it was sent
// with existing_click_id), and around the measured run the CPU it cost and
// the machine's load.
type Result struct {
	load.Result
	Connections int
	WarmupOK    int64  // OK answers of the warm-up before this run, for the row-count check
	CPU         CPUUse // CPU spent during the measured run
	LoadBefore  string // 1-minute load average before and after the run (context on a shared machine)
	LoadAfter   string
}

// RateLimited is the answers 429.
func (r Result) RateLimited() int64 { return r.Statuses[http.StatusTooManyRequests] }

// Reused is the recorded clicks that were sent with existing_click_id.
func (r Result) Reused() int64 { return r.Labels[labelReused] }

// Unexpected is the failed answers other than 429: any other status, or a
// 2xx without a click id.
func (r Result) Unexpected() int64 { return r.Failed - r.RateLimited() }

const labelReused = "reused"

// runLoad drives cfg.URL until cfg.Duration has passed (requests in flight
// then complete and count) or ctx ends.
func runLoad(ctx context.Context, client *http.Client, cfg LoadConfig) (Result, error) {
	if cfg.Connections < 1 || cfg.Duration <= 0 || cfg.Workload == nil || len(cfg.Workload.Codes) == 0 || len(cfg.Workload.IPs) == 0 {
		return Result{}, errors.New("load: need connections >= 1, a positive duration, link codes and client addresses")
	}
	gens := make([]*generator, cfg.Connections)
	for i := range gens {
		gens[i] = cfg.Workload.generator(cfg.Seed + uint64(i))
	}
	res, err := load.Run(ctx, load.Config{Name: cfg.Name, Connections: cfg.Connections, Duration: cfg.Duration, Jobs: -1,
		Do: func(ctx context.Context, worker, _ int) load.Outcome {
			return sendClick(ctx, client, cfg, gens[worker])
		}})
	return Result{Result: res, Connections: cfg.Connections}, err
}

// sendClick sends the generator's next click and lets it see the click id
// answered.
func sendClick(ctx context.Context, client *http.Client, cfg LoadConfig, g *generator) load.Outcome {
	c, err := g.next()
	if err != nil {
		return load.Outcome{Err: err}
	}
	status, answer, err := load.Send(ctx, client, http.MethodPost, cfg.URL, c.body, func(h http.Header) {
		h.Set("User-Agent", c.userAgent)
		h.Set("Origin", cfg.Workload.Origin)
		h.Set("X-Forwarded-For", c.clientIP)
	})
	switch {
	case err != nil:
		return load.Outcome{Err: err}
	case status < 200 || status >= 300:
		return load.Outcome{Status: status, Detail: fmt.Sprintf("%d: %.300s", status, bytes.TrimSpace(answer))}
	}
	id, ok := rig.ClickID(answer)
	if !ok {
		return load.Outcome{Status: status, Detail: fmt.Sprintf("%d without success/click_id: %.200s", status, answer)}
	}
	g.observe(id)
	o := load.Outcome{Status: status, OK: true}
	if c.reused {
		o.Label = labelReused
	}
	return o
}
