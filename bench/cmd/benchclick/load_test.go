package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/bench/load"
)

// fakeClickRoute answers in a fixed rotation (ok, ok, rate limited, ok, bad
// body, server error) and records what the generator sent.
type fakeClickRoute struct {
	n         atomic.Int64
	mu        sync.Mutex
	issued    map[string]bool
	reusedOK  int
	reusedBad []string
	ips       map[string]int
	origins   map[string]bool
}

func (f *fakeClickRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ExistingClickID string `json:"existing_click_id"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	n := f.n.Add(1)
	id := fmt.Sprintf("cust_1_%d", n)
	f.mu.Lock()
	f.ips[r.Header.Get("X-Forwarded-For")]++
	f.origins[r.Header.Get("Origin")] = true
	if body.ExistingClickID != "" {
		if f.issued[body.ExistingClickID] {
			f.reusedOK++
		} else {
			f.reusedBad = append(f.reusedBad, body.ExistingClickID)
		}
	}
	switch n % 6 {
	case 0, 1, 3:
		f.issued[id] = true
	}
	f.mu.Unlock()
	switch n % 6 {
	case 0, 1, 3:
		writeJSON(w, http.StatusOK, map[string]any{"success": true, "click_id": id, "partner_code": "x", "cookie_window_days": 30})
	case 2:
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{"status": 429, "code": "rate_limited"}})
	case 4:
		writeJSON(w, http.StatusOK, map[string]any{"success": false})
	case 5:
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": "boom"})
	}
}

func TestRunLoadCountsEveryOutcomeApart(t *testing.T) {
	t.Parallel()
	f := &fakeClickRoute{issued: map[string]bool{}, ips: map[string]int{}, origins: map[string]bool{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	ips := publicIPs(64, 3)
	w := newWorkload([]string{"a", "b"}, 1, "http://localhost:3000", ips, 0.5, 0.5)
	res, err := runLoad(context.Background(), load.NewClient(4), LoadConfig{
		Name: "fake", URL: srv.URL, Connections: 4, Duration: time.Second, Workload: w, Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Enough for a few turns of the server's rotation, even with -race
	// on a loaded 2-core machine.
	if res.Requests < 30 {
		t.Fatalf("only %d requests in 1s against an in-memory server", res.Requests)
	}
	if got := res.OK + res.RateLimited() + res.Unexpected(); got != res.Requests {
		t.Fatalf("ok %d + 429 %d + failed %d = %d, want every response (%d)", res.OK, res.RateLimited(), res.Unexpected(), got, res.Requests)
	}
	if res.Requests != f.n.Load() || res.Latency.Count != int(res.Requests) {
		t.Fatalf("requests %d, server saw %d, latencies %d", res.Requests, f.n.Load(), res.Latency.Count)
	}
	// The rotation is 3 ok, 1 rate limited, 2 failed in every 6.
	if res.RateLimited() == 0 || res.Unexpected() == 0 || res.OK < res.RateLimited()*2 {
		t.Fatalf("ok %d, 429 %d, failed %d do not follow the server's 3:1:2 rotation", res.OK, res.RateLimited(), res.Unexpected())
	}
	if res.Statuses[http.StatusTooManyRequests] != res.RateLimited() || res.Statuses[http.StatusInternalServerError] == 0 {
		t.Fatalf("statuses %v", res.Statuses)
	}
	if res.TransportErrors != 0 || res.FirstFailure() == "" {
		t.Fatalf("transport errors %d, first failure %q", res.TransportErrors, res.FirstFailure())
	}
	if res.Throughput() <= 0 || res.Elapsed < time.Second {
		t.Fatalf("throughput %.0f over %s", res.Throughput(), res.Elapsed)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reusedBad) > 0 || f.reusedOK == 0 {
		t.Fatalf("existing_click_id must come from earlier OK answers: %d good, bad %v", f.reusedOK, f.reusedBad)
	}
	for ip := range f.ips {
		if !slices.Contains(ips, ip) {
			t.Fatalf("X-Forwarded-For %q is not one of the workload's addresses", ip)
		}
	}
	if len(f.origins) != 1 || !f.origins["http://localhost:3000"] {
		t.Fatalf("origins sent: %v", f.origins)
	}
}

func TestRunLoadRejectsAnEmptyConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  LoadConfig
	}{
		{"no connections", LoadConfig{Duration: time.Second, Workload: newWorkload([]string{"a"}, 1, "", []string{"1.1.1.1"}, 0, 0)}},
		{"no duration", LoadConfig{Connections: 1, Workload: newWorkload([]string{"a"}, 1, "", []string{"1.1.1.1"}, 0, 0)}},
		{"no workload", LoadConfig{Connections: 1, Duration: time.Second}},
		{"no links", LoadConfig{Connections: 1, Duration: time.Second, Workload: newWorkload(nil, 1, "", []string{"1.1.1.1"}, 0, 0)}},
		{"no addresses", LoadConfig{Connections: 1, Duration: time.Second, Workload: newWorkload([]string{"a"}, 1, "", nil, 0, 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := runLoad(context.Background(), http.DefaultClient, tt.cfg); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}
