package obs

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Check is one readiness dependency (database, broker). Fn must honour ctx:
// it is cancelled when the readiness timeout expires.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// HealthConfig tunes readiness probing. Zero values take the defaults.
type HealthConfig struct {
	// Timeout bounds one readiness run (all checks run concurrently). Default 2s.
	Timeout time.Duration
	// CacheTTL is how long a readiness result is reused, so a burst of
	// probes costs one round of checks. Default 1s; negative disables.
	CacheTTL time.Duration
	// Now is the clock used for the cache. Default time.Now.
	Now func() time.Time
	// Logger receives the error of each failing check; the HTTP answer
	// names only the check, so error text (hosts, DSNs) never leaves the
	// process. Default: discard.
	Logger *slog.Logger
}

// Health serves /healthz (liveness) and /readyz (readiness).
type Health struct {
	checks   []Check
	cfg      HealthConfig
	draining atomic.Bool

	mu       sync.Mutex // held while checks run: concurrent probes share one run
	cached   Readiness
	cachedAt time.Time
	hasCache bool
}

// Readiness is the result of one readiness run, also the /readyz body.
type Readiness struct {
	// Status is "ready", "not_ready" or "shutting_down".
	Status string `json:"status"`
	// Checks maps check name to "ok", "failed" or "timeout".
	Checks map[string]string `json:"checks"`
}

// Ready reports whether every check passed.
func (r Readiness) Ready() bool { return r.Status == "ready" }

// NewHealth returns a Health with default settings.
func NewHealth(checks ...Check) *Health {
	return NewHealthWithConfig(HealthConfig{}, checks...)
}

// NewHealthWithConfig returns a Health with explicit settings (tests inject
// the clock here).
func NewHealthWithConfig(cfg HealthConfig, checks ...Check) *Health {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Health{checks: append([]Check(nil), checks...), cfg: cfg}
}

// Drain makes /readyz answer 503 "shutting_down" from now on, so load
// balancers stop sending traffic before the server shuts down. /healthz is
// unaffected: the process still serves.
func (h *Health) Drain() { h.draining.Store(true) }

// Healthz answers 200 {"status":"ok"} whenever the process can serve HTTP.
// It checks no dependency on purpose: a failing database must not get the
// pod restarted, only taken out of rotation by /readyz.
func (h *Health) Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

// Readyz answers 200 {"status":"ready","checks":{...}} when every check
// passes, else 503 with the failing checks marked.
func (h *Health) Readyz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := h.Check(r.Context())
		status := http.StatusOK
		if !res.Ready() {
			status = http.StatusServiceUnavailable
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, status, res)
	})
}

// Check runs the readiness checks, or returns the cached result when it is
// younger than CacheTTL.
func (h *Health) Check(ctx context.Context) Readiness {
	if h.draining.Load() {
		return Readiness{Status: "shutting_down", Checks: map[string]string{}}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.cfg.Now()
	if h.hasCache && h.cfg.CacheTTL > 0 && now.Sub(h.cachedAt) < h.cfg.CacheTTL {
		return h.cached.clone()
	}
	res := h.run(ctx)
	h.cached, h.cachedAt, h.hasCache = res, now, true
	return res.clone()
}

type checkResult struct {
	name string
	err  error
}

func (h *Health) run(ctx context.Context) Readiness {
	// Detached from the probe's cancellation: the result is cached and
	// shared, so one impatient client must not record a failure for all.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.Timeout)
	defer cancel()

	// Buffered so a check that ignores ctx can finish later without
	// blocking forever; its late result is dropped.
	results := make(chan checkResult, len(h.checks))
	for _, c := range h.checks {
		go func() {
			results <- checkResult{name: c.Name, err: safeRun(ctx, c.Fn)}
		}()
	}

	out := Readiness{Status: "ready", Checks: make(map[string]string, len(h.checks))}
	for _, c := range h.checks {
		out.Checks[c.Name] = "timeout"
	}
	for range h.checks {
		select {
		case r := <-results:
			if r.err == nil {
				out.Checks[r.name] = "ok"
				continue
			}
			out.Checks[r.name] = "failed"
			h.cfg.Logger.WarnContext(ctx, "readiness check failed", "check", r.name, "err", r.err)
		case <-ctx.Done():
			for name, v := range out.Checks {
				if v == "timeout" {
					h.cfg.Logger.WarnContext(ctx, "readiness check timed out", "check", name, "timeout", h.cfg.Timeout)
				}
			}
			out.Status = "not_ready"
			return out
		}
	}
	for _, v := range out.Checks {
		if v != "ok" {
			out.Status = "not_ready"
		}
	}
	return out
}

// safeRun turns a panicking check into a failure: a probe must never take
// the server down.
func safeRun(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &checkPanic{value: p}
		}
	}()
	if fn == nil {
		return nil
	}
	return fn(ctx)
}

type checkPanic struct{ value any }

func (p *checkPanic) Error() string { return "check panicked" }

func (r Readiness) clone() Readiness {
	c := Readiness{Status: r.Status, Checks: make(map[string]string, len(r.Checks))}
	for k, v := range r.Checks {
		c.Checks[k] = v
	}
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"status":"error"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
