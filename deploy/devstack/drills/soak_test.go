package drills_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// soakDuration is how long the soak's traffic runs: SOAK_DURATION (`make
// soak` sets 10m), or a short run in `make test` so the soak itself keeps
// working.
func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("SOAK_DURATION")
	if v == "" {
		return 30 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 10*time.Second {
		t.Fatalf("SOAK_DURATION=%q: want a duration of at least 10s", v)
	}
	return d
}

// footprint is the process's live heap after a full collection and its
// goroutine count: the whole stack runs in this process.
type footprint struct {
	heap       uint64
	goroutines int
}

func (f footprint) String() string {
	return fmt.Sprintf("heap %.1f MiB, %d goroutines", float64(f.heap)/(1<<20), f.goroutines)
}

// measure takes the footprint, and with SOAK_PROFILE_DIR set writes a heap
// profile named name there (compare two with `go tool pprof -base`).
func measure(t *testing.T, name string) footprint {
	t.Helper()
	runtime.GC()
	runtime.GC() // the second cycle frees what the first one's finalizers released
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if dir := os.Getenv("SOAK_PROFILE_DIR"); dir != "" {
		f, err := os.Create(filepath.Join(dir, name+".heap"))
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	return footprint{heap: m.HeapAlloc, goroutines: runtime.NumGoroutine()}
}

// Drill 7, the soak: mixed traffic (clicks, leads, admin writes) through
// the gateway for SOAK_DURATION with the broker stopped and restarted
// twice. No request is refused, nothing stops, everything is delivered,
// and the process's heap and goroutines end where they were after the
// warm-up: nothing grows with time or with broker restarts.
//
// Not parallel: the footprint is the whole test process's, so the soak
// runs before the package's parallel drills start.
func TestSoak(t *testing.T) {
	total := soakDuration(t)
	outage := min(30*time.Second, total/10)
	d := startDrillStack(t)
	tr := &traffic{countOnly: true}

	// Warm-up: pools, caches, consumer groups and the first of every
	// route reach their steady size before the baseline is taken.
	run := func(dur time.Duration, during func()) {
		ctx, cancel := context.WithCancel(context.Background())
		loaded := make(chan struct{})
		go func() { d.load(ctx, tr, 3); close(loaded) }()
		if during != nil {
			during()
		}
		deadline := time.NewTimer(dur)
		<-deadline.C
		cancel()
		<-loaded
	}
	run(total/6, nil)
	d.caughtUp()
	base := measure(t, "baseline")
	t.Logf("after the warm-up: %s", base)

	var samples []string
	restart := func(at time.Duration) func() {
		return func() {
			time.AfterFunc(at, func() {
				d.broker.down()
				time.AfterFunc(outage, func() { d.broker.up() })
			})
		}
	}
	// Two halves, one broker restart in each, the soak's main part.
	half := (total - total/6) / 2
	for i := 0; i < 2; i++ {
		run(half, restart(half/3))
		d.broker.up() // in case the half ended inside the outage
		d.caughtUp()
		f := measure(t, fmt.Sprintf("half%d", i+1))
		samples = append(samples, fmt.Sprintf("after half %d: %s", i+1, f))
	}
	if len(tr.refused) > 0 {
		t.Fatalf("%d requests refused, e.g. %q", len(tr.refused), tr.refused[0])
	}
	d.wantAllRunning()
	end := measure(t, "end")
	t.Logf("soak of %s: %d clicks, %d leads, %d admin writes; %s", total, tr.nClicks, tr.leads, tr.admin, strings.Join(samples, "; "))
	t.Logf("at the end: %s (baseline %s)", end, base)

	// Flat: idle connections and timers come and go, so allow a margin,
	// but a leak per request or per restart (thousands of requests, two
	// restarts) is far beyond it.
	if end.goroutines > base.goroutines+base.goroutines/5+10 {
		t.Errorf("goroutines grew from %d to %d", base.goroutines, end.goroutines)
	}
	if end.heap > base.heap+base.heap/4+16<<20 {
		t.Errorf("live heap grew from %.1f MiB to %.1f MiB", float64(base.heap)/(1<<20), float64(end.heap)/(1<<20))
	}
}
