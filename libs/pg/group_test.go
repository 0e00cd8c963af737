package pg

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestGroup(t *testing.T) {
	t.Parallel()
	t.Run("calls that wait run together, each answered its own result", func(t *testing.T) {
		t.Parallel()
		h := newHeld[int]()
		g := NewGroup(hold(h, func(in []int) ([]GroupResult[string], error) {
			out := make([]GroupResult[string], len(in))
			for i, v := range in {
				out[i].Out = fmt.Sprint(v * 10)
				if v == 7 {
					out[i] = GroupResult[string]{Err: errors.New("seven refused")}
				}
			}
			return out, nil
		}), GroupOptions[int]{Concurrent: 1})
		var wg sync.WaitGroup
		got := make([]GroupResult[string], 11)
		do := func(i int) {
			defer wg.Done()
			out, err := g.Do(context.Background(), i)
			got[i] = GroupResult[string]{Out: out, Err: err}
		}
		wg.Add(1)
		go do(0)
		h.waitFirst(t)
		for i := 1; i < 11; i++ {
			wg.Add(1)
			go do(i)
		}
		waitQueued(t, g, 10)
		h.release()
		wg.Wait()
		var sizes []int
		for _, r := range h.runs {
			sizes = append(sizes, len(r))
		}
		if !slices.Equal(sizes, []int{1, 10}) {
			t.Fatalf("transactions of %v calls, want [1 10]: the ten that waited run as one", sizes)
		}
		for i, r := range got {
			switch {
			case i == 7:
				if r.Err == nil || r.Err.Error() != "seven refused" {
					t.Errorf("call 7: %v, want its own error", r.Err)
				}
			case r.Err != nil || r.Out != fmt.Sprint(i*10):
				t.Errorf("call %d: %q %v, want %q", i, r.Out, r.Err, fmt.Sprint(i*10))
			}
		}
	})
	t.Run("a failed transaction runs each call alone", func(t *testing.T) {
		t.Parallel()
		h := newHeld[int]()
		g := NewGroup(hold(h, func(in []int) ([]GroupResult[int], error) {
			if slices.Contains(in, 3) {
				return nil, errors.New("deadlock detected")
			}
			return echo(in)
		}), GroupOptions[int]{Concurrent: 1})
		var wg sync.WaitGroup
		errs := make([]error, 5)
		do := func(i int) {
			defer wg.Done()
			v, err := g.Do(context.Background(), i)
			if err == nil && v != i {
				err = fmt.Errorf("answered %d", v)
			}
			errs[i] = err
		}
		wg.Add(1)
		go do(0)
		h.waitFirst(t)
		for i := 1; i < 5; i++ {
			wg.Add(1)
			go do(i)
		}
		waitQueued(t, g, 4)
		h.release()
		wg.Wait()
		runs := h.runs
		for i, err := range errs {
			if (i == 3) != (err != nil) {
				t.Errorf("call %d: %v; only call 3's own run fails", i, err)
			}
		}
		if len(runs) != 6 || len(runs[1]) != 4 {
			t.Errorf("runs %v, want the first alone, the four together, then each of the four alone", runs)
		}
	})
	t.Run("a panic is the panicking call's error alone, and the group goes on", func(t *testing.T) {
		t.Parallel()
		h := newHeld[int]()
		g := NewGroup(hold(h, func(in []int) ([]GroupResult[int], error) {
			if slices.Contains(in, 2) {
				panic("a bug")
			}
			return echo(in)
		}), GroupOptions[int]{Concurrent: 1})
		var wg sync.WaitGroup
		errs := make([]error, 4)
		do := func(i int) {
			defer wg.Done()
			_, errs[i] = g.Do(context.Background(), i)
		}
		wg.Add(1)
		go do(0)
		h.waitFirst(t)
		for i := 1; i < 4; i++ {
			wg.Add(1)
			go do(i)
		}
		waitQueued(t, g, 3)
		h.release()
		wg.Wait()
		for i, err := range errs {
			if (i == 2) != (err != nil) || (err != nil && !strings.Contains(err.Error(), "panic: a bug")) {
				t.Errorf("call %d: %v; only call 2 fails, with its panic", i, err)
			}
		}
		if v, err := g.Do(context.Background(), 9); v != 9 || err != nil {
			t.Errorf("after the panic: %d %v", v, err)
		}
	})
	t.Run("a caller whose context ends while its call waits leaves, and the call never runs", func(t *testing.T) {
		t.Parallel()
		h := newHeld[int]()
		g := NewGroup(hold(h, func(in []int) ([]GroupResult[int], error) {
			return make([]GroupResult[int], len(in)), nil
		}), GroupOptions[int]{Concurrent: 1})
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = g.Do(context.Background(), 0) })
		h.waitFirst(t)
		ctx, cancel := context.WithCancel(context.Background())
		left := make(chan error, 1)
		go func() { _, err := g.Do(ctx, 1); left <- err }()
		waitQueued(t, g, 1)
		cancel()
		if err := <-left; !errors.Is(err, context.Canceled) {
			t.Fatalf("left with %v, want its context's error", err)
		}
		h.release()
		wg.Wait()
		if _, err := g.Do(context.Background(), 2); err != nil {
			t.Fatal(err)
		}
		if ran := slices.Concat(h.runs...); !slices.Equal(ran, []int{0, 2}) {
			t.Errorf("ran %v, want [0 2]: call 1 left before it ran", ran)
		}
	})
	t.Run("calls with one key never share a transaction", func(t *testing.T) {
		t.Parallel()
		h := newHeld[string]()
		g := NewGroup(hold(h, echo[string]), GroupOptions[string]{Concurrent: 1, Max: 3, Key: func(s string) string { return s[:1] }})
		var wg sync.WaitGroup
		do := func(s string) {
			defer wg.Done()
			if v, err := g.Do(context.Background(), s); err != nil || v != s {
				t.Errorf("%s: %q %v", s, v, err)
			}
		}
		wg.Add(1)
		go do("x0")
		h.waitFirst(t)
		for _, s := range []string{"a1", "a2", "b1", "a3", "c1", "d1"} {
			wg.Add(1)
			go do(s)
			waitFor(t, func() bool {
				g.mu.Lock()
				defer g.mu.Unlock()
				return len(g.queue) > 0 && g.queue[len(g.queue)-1].in == s
			})
		}
		h.release()
		wg.Wait()
		want := [][]string{{"x0"}, {"a1", "b1", "c1"}, {"a2", "d1"}, {"a3"}}
		if !slices.EqualFunc(h.runs, want, slices.Equal) {
			t.Errorf("runs %v, want %v (one call a key, at most three, in their order)", h.runs, want)
		}
	})
	t.Run("a second transaction starts once as many calls wait as the running one took", func(t *testing.T) {
		t.Parallel()
		gt := &gated{}
		g := NewGroup(gt.exec, GroupOptions[string]{Concurrent: 2})
		var wg sync.WaitGroup
		do := func(s string) {
			wg.Go(func() {
				if v, err := g.Do(context.Background(), s); err != nil || v != s {
					t.Errorf("%s: %q %v", s, v, err)
				}
			})
		}
		// queued makes the calls, each once it waits (or ran).
		queued := func(calls ...string) {
			for _, s := range calls {
				do(s)
				waitFor(t, func() bool {
					g.mu.Lock()
					defer g.mu.Unlock()
					return len(g.queue) > 0 && g.queue[len(g.queue)-1].in == s || gt.ran(s)
				})
			}
		}
		// idle: the waiting calls are exactly these, and their head was
		// not told to start one.
		idle := func(calls ...string) {
			t.Helper()
			g.mu.Lock()
			defer g.mu.Unlock()
			var waiting []string
			for _, c := range g.queue {
				waiting = append(waiting, c.in)
			}
			if !slices.Equal(waiting, calls) || len(g.queue[0].turn) != 0 {
				t.Fatalf("waiting %v (head told: %v), want %v, not told", waiting, len(g.queue) > 0 && len(g.queue[0].turn) != 0, calls)
			}
		}
		do("a") // none runs: at once
		gt.waitRuns(t, 1)
		do("b") // one call waits, the running one took one
		gt.waitRuns(t, 2)
		queued("c", "d", "e", "f", "g") // two run: they wait
		gt.release(0)
		gt.waitRuns(t, 3) // [c … g] beside [b]
		gt.release(1)
		queued("h", "i", "j", "k") // four wait, the running one took five
		idle("h", "i", "j", "k")
		do("l")
		gt.waitRuns(t, 4) // the fifth starts [h … l] beside [c … g]
		queued("m")
		gt.release(2)
		waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.running == 1 })
		idle("m") // one waits, the running one took five
		gt.release(3)
		gt.waitRuns(t, 5) // none runs: m at once
		gt.release(4)
		wg.Wait()
		want := [][]string{{"a"}, {"b"}, {"c", "d", "e", "f", "g"}, {"h", "i", "j", "k", "l"}, {"m"}}
		if !slices.EqualFunc(gt.runs, want, slices.Equal) {
			t.Errorf("runs %v, want %v", gt.runs, want)
		}
	})
}

// gated is a group's exec that holds every transaction until released by
// its number (in the order they started) and answers each call its input.
type gated struct {
	mu    sync.Mutex
	runs  [][]string
	gates []chan struct{}
}

func (gt *gated) exec(_ context.Context, in []string) ([]GroupResult[string], error) {
	gate := make(chan struct{})
	gt.mu.Lock()
	gt.runs = append(gt.runs, slices.Clone(in))
	gt.gates = append(gt.gates, gate)
	gt.mu.Unlock()
	<-gate
	return echo(in)
}

func (gt *gated) ran(s string) bool {
	gt.mu.Lock()
	defer gt.mu.Unlock()
	return slices.Contains(slices.Concat(gt.runs...), s)
}

func (gt *gated) count() int {
	gt.mu.Lock()
	defer gt.mu.Unlock()
	return len(gt.runs)
}

func (gt *gated) waitRuns(t *testing.T, n int) {
	t.Helper()
	waitFor(t, func() bool { return gt.count() == n })
}

func (gt *gated) release(i int) {
	gt.mu.Lock()
	defer gt.mu.Unlock()
	close(gt.gates[i])
}

// held records a group's transactions (each run's calls, in runs) and
// holds the first until release: the calls made meanwhile queue, and the
// next transaction takes them. runs is read after the calls returned.
type held[I any] struct {
	mu   sync.Mutex
	runs [][]I
	hold chan struct{}
}

func newHeld[I any]() *held[I] { return &held[I]{hold: make(chan struct{})} }

// hold is a group's exec that records each run in h, holds the first, and
// answers with next.
func hold[I, O any](h *held[I], next func(in []I) ([]GroupResult[O], error)) func(context.Context, []I) ([]GroupResult[O], error) {
	return func(_ context.Context, in []I) ([]GroupResult[O], error) {
		h.mu.Lock()
		h.runs = append(h.runs, slices.Clone(in))
		first := len(h.runs) == 1
		h.mu.Unlock()
		if first {
			<-h.hold // the first transaction runs while the others queue
		}
		return next(in)
	}
}

// waitFirst waits until the first transaction runs (and is held).
func (h *held[I]) waitFirst(t *testing.T) {
	waitFor(t, func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.runs) == 1 })
}

func (h *held[I]) release() { close(h.hold) }

// echo answers each call with its input.
func echo[I any](in []I) ([]GroupResult[I], error) {
	out := make([]GroupResult[I], len(in))
	for i, v := range in {
		out[i].Out = v
	}
	return out, nil
}

// waitQueued waits until n calls wait in g's queue.
func waitQueued[I, O any](t *testing.T, g *Group[I, O], n int) {
	waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.queue) == n })
}

// waitFor polls cond until it holds (the test's deadline bounds it).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatal("condition never held")
		default:
			runtime.Gosched()
		}
	}
}
