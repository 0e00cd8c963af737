package obs_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/obs"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func probe(t *testing.T, h http.Handler) (int, obs.Readiness) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var r obs.Readiness
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("readyz body %q: %v", rec.Body.String(), err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	return rec.Code, r
}

func TestHealth_HealthzAlwaysOK(t *testing.T) {
	t.Parallel()
	h := obs.NewHealth(obs.Check{Name: "db", Fn: func(context.Context) error { return errors.New("down") }})
	h.Drain()
	rec := httptest.NewRecorder()
	h.Healthz().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != `{"status":"ok"}` {
		t.Fatalf("healthz = %d %q", rec.Code, rec.Body.String())
	}
}

func TestHealth_ReadyzFailsWhenACheckFailsAndRecovers(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	var dbDown atomic.Bool
	var calls atomic.Int32
	dbDown.Store(true)
	h := obs.NewHealthWithConfig(obs.HealthConfig{Now: clock.Now, CacheTTL: time.Second},
		obs.Check{Name: "postgres", Fn: func(context.Context) error {
			calls.Add(1)
			if dbDown.Load() {
				return errors.New("dial tcp postgres://app:pw@db: connection refused")
			}
			return nil
		}},
		obs.Check{Name: "kafka", Fn: func(context.Context) error { return nil }},
	)
	readyz := h.Readyz()

	rec := httptest.NewRecorder()
	readyz.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("down: status %d, want 503", rec.Code)
	}
	if want := `{"status":"not_ready","checks":{"kafka":"ok","postgres":"failed"}}`; strings.TrimSpace(rec.Body.String()) != want {
		t.Fatalf("down: body %s, want %s", rec.Body.String(), want)
	}

	// Recovered, but within the cache TTL: the cached failure is served.
	dbDown.Store(false)
	clock.Advance(999 * time.Millisecond)
	if code, _ := probe(t, readyz); code != http.StatusServiceUnavailable {
		t.Fatalf("within TTL: status %d, want cached 503", code)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("checks ran %d times within TTL, want 1", n)
	}

	clock.Advance(time.Millisecond)
	code, r := probe(t, readyz)
	if code != http.StatusOK || r.Status != "ready" || r.Checks["postgres"] != "ok" || r.Checks["kafka"] != "ok" {
		t.Fatalf("after TTL: %d %+v, want 200 ready", code, r)
	}
}

func TestHealth_ReadyzTimesOutSlowChecks(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	h := obs.NewHealthWithConfig(obs.HealthConfig{Timeout: 50 * time.Millisecond, CacheTTL: -1},
		obs.Check{Name: "honours_ctx", Fn: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
		obs.Check{Name: "ignores_ctx", Fn: func(context.Context) error { <-release; return nil }},
		obs.Check{Name: "fast", Fn: func(context.Context) error { return nil }},
	)
	code, r := probe(t, h.Readyz())
	if code != http.StatusServiceUnavailable || r.Status != "not_ready" {
		t.Fatalf("status %d %+v, want 503 not_ready", code, r)
	}
	if r.Checks["fast"] != "ok" || r.Checks["ignores_ctx"] != "timeout" {
		t.Fatalf("checks %+v", r.Checks)
	}
	if v := r.Checks["honours_ctx"]; v != "failed" && v != "timeout" {
		t.Fatalf("honours_ctx = %q, want failed or timeout", v)
	}
}

func TestHealth_ReadyzPanickingCheckFails(t *testing.T) {
	t.Parallel()
	h := obs.NewHealth(obs.Check{Name: "boom", Fn: func(context.Context) error { panic("boom") }})
	if code, r := probe(t, h.Readyz()); code != http.StatusServiceUnavailable || r.Checks["boom"] != "failed" {
		t.Fatalf("got %d %+v", code, r)
	}
}

func TestHealth_ReadyzNoChecksIsReady(t *testing.T) {
	t.Parallel()
	if code, r := probe(t, obs.NewHealth().Readyz()); code != http.StatusOK || r.Status != "ready" {
		t.Fatalf("got %d %+v", code, r)
	}
}

func TestHealth_DrainFailsReadiness(t *testing.T) {
	t.Parallel()
	h := obs.NewHealth(obs.Check{Name: "db", Fn: func(context.Context) error { return nil }})
	if code, _ := probe(t, h.Readyz()); code != http.StatusOK {
		t.Fatalf("before drain: %d", code)
	}
	h.Drain()
	if code, r := probe(t, h.Readyz()); code != http.StatusServiceUnavailable || r.Status != "shutting_down" {
		t.Fatalf("after drain: %d %+v", code, r)
	}
}

func TestHealth_ConcurrentProbesShareOneRun(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Unix(0, 0)}
	var calls atomic.Int32
	h := obs.NewHealthWithConfig(obs.HealthConfig{Now: clock.Now},
		obs.Check{Name: "db", Fn: func(context.Context) error { calls.Add(1); return nil }})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { h.Check(context.Background()) })
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("checks ran %d times for 20 concurrent probes at one instant, want 1", n)
	}
}
