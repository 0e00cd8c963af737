package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"sync"

	"github.com/svc-dev/svc/libs/httpkit"
)

// The gateway's own probes, so a script can wait for `make run` (poll
// /readyz until 200) instead of guessing how long the stack takes. No
// service owns these paths: each service answers its own /healthz and
// /readyz, and the gateway's /readyz asks every one of them.
const (
	healthzPath = "/healthz"
	readyzPath  = "/readyz"
)

// Option changes what New's gateway does.
type Option func(*options)

type options struct {
	started <-chan struct{}
}

// StartedWhen holds the gateway's /readyz at 503 "starting" until started
// is closed, even with every service ready: `make run` closes it once the
// demo catalog is seeded, which goes through this same gateway and so
// cannot wait for the stack to be ready before the gateway serves.
func StartedWhen(started <-chan struct{}) Option {
	return func(o *options) { o.started = started }
}

// Readiness is the body of the gateway's /readyz: Status is "ready" (the
// answer is 200), "not_ready" when a service is not ready or "starting"
// when every service is but the stack is still starting (both 503);
// Services holds each running service's own /readyz answer.
type Readiness struct {
	Status   string                  `json:"status"`
	Services map[string]ServiceReady `json:"services"`
}

// ServiceReady is one service's answer to its /readyz: its status
// ("ready", "not_ready", "shutting_down"; "unreachable" when it did not
// answer JSON) and its checks ("postgres": "ok" or "failed").
type ServiceReady struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks,omitempty"`
}

// withProbes answers the gateway's /healthz and /readyz and hands every
// other path to next.
func withProbes(services map[string]http.Handler, o options, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != healthzPath && r.URL.Path != readyzPath {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			_ = httpkit.WritePlatformError(w, http.StatusMethodNotAllowed, "Method "+r.Method+" is not allowed on "+r.URL.Path)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		if r.URL.Path == healthzPath {
			// The gateway serves: it says nothing about the services,
			// as a service's own /healthz checks no dependency.
			writeProbe(w, http.StatusOK, map[string]string{"status": "ok"})
			return
		}
		res := readiness(r, services, o.started)
		status := http.StatusOK
		if res.Status != "ready" {
			status = http.StatusServiceUnavailable
		}
		writeProbe(w, status, res)
	})
}

// readiness asks every service's /readyz at once (each bounds its own
// checks, so one slow service delays the answer only by its timeout).
func readiness(r *http.Request, services map[string]http.Handler, started <-chan struct{}) Readiness {
	res := Readiness{Status: "ready", Services: make(map[string]ServiceReady, len(services))}
	names := make([]string, 0, len(services))
	for name := range services {
		names = append(names, name)
	}
	slices.Sort(names)
	answers := make([]ServiceReady, len(names))
	ready := make([]bool, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { answers[i], ready[i] = probe(r, services[name]) })
	}
	wg.Wait()
	for i, name := range names {
		res.Services[name] = answers[i]
		if !ready[i] {
			res.Status = "not_ready"
		}
	}
	if res.Status == "ready" && started != nil {
		select {
		case <-started:
		default:
			res.Status = "starting"
		}
	}
	return res
}

// probe sends GET /readyz to one service's handler (its public side: both
// of a service's ports answer it alike) and reads its answer; only a 200
// is ready, whatever the body says.
func probe(r *http.Request, h http.Handler) (ServiceReady, bool) {
	req := r.Clone(r.Context())
	req.Method, req.URL.Path, req.URL.RawPath, req.URL.RawQuery = http.MethodGet, readyzPath, "", ""
	req.Body, req.ContentLength = http.NoBody, 0
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	h.ServeHTTP(rec, req)
	var got ServiceReady
	if err := json.Unmarshal(rec.body.Bytes(), &got); err != nil || got.Status == "" {
		got = ServiceReady{Status: "unreachable"}
	}
	ready := rec.code == http.StatusOK
	if !ready && got.Status == "ready" {
		got.Status = "not_ready"
	}
	return got, ready
}

func writeProbe(w http.ResponseWriter, status int, body any) {
	raw, err := json.Marshal(body)
	if err != nil {
		_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, "Internal error")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(raw, '\n'))
}

// recorder keeps a service's in-process answer to the gateway's probe.
type recorder struct {
	header http.Header
	body   bytes.Buffer
	code   int
	wrote  bool
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.wrote = true
	return r.body.Write(p)
}
