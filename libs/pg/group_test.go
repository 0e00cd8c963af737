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
		release := make(chan struct{})
		var mu sync.Mutex
		var sizes []int
		g := NewGroup(func(_ context.Context, in []int) ([]GroupResult[string], error) {
			mu.Lock()
			sizes = append(sizes, len(in))
			first := len(sizes) == 1
			mu.Unlock()
			if first {
				<-release // the first transaction runs while the others queue
			}
			out := make([]GroupResult[string], len(in))
			for i, v := range in {
				out[i].Out = fmt.Sprint(v * 10)
				if v == 7 {
					out[i] = GroupResult[string]{Err: errors.New("seven refused")}
				}
			}
			return out, nil
		}, GroupOptions[int]{Concurrent: 1})
		var wg sync.WaitGroup
		got := make([]GroupResult[string], 11)
		do := func(i int) {
			defer wg.Done()
			out, err := g.Do(context.Background(), i)
			got[i] = GroupResult[string]{Out: out, Err: err}
		}
		wg.Add(1)
		go do(0)
		waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(sizes) == 1 })
		for i := 1; i < 11; i++ {
			wg.Add(1)
			go do(i)
		}
		waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.queue) == 10 })
		close(release)
		wg.Wait()
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
		release := make(chan struct{})
		var mu sync.Mutex
		var runs [][]int
		g := NewGroup(func(_ context.Context, in []int) ([]GroupResult[int], error) {
			mu.Lock()
			runs = append(runs, slices.Clone(in))
			first := len(runs) == 1
			mu.Unlock()
			if first {
				<-release
			}
			if slices.Contains(in, 3) {
				return nil, errors.New("deadlock detected")
			}
			out := make([]GroupResult[int], len(in))
			for i, v := range in {
				out[i].Out = v
			}
			return out, nil
		}, GroupOptions[int]{Concurrent: 1})
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
		waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(runs) == 1 })
		for i := 1; i < 5; i++ {
			wg.Add(1)
			go do(i)
		}
		waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.queue) == 4 })
		close(release)
		wg.Wait()
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
		release := make(chan struct{})
		var mu sync.Mutex
		runs := 0
		g := NewGroup(func(_ context.Context, in []int) ([]GroupResult[int], error) {
			mu.Lock()
			runs++
			first := runs == 1
			mu.Unlock()
			if first {
				<-release
			}
			if slices.Contains(in, 2) {
				panic("a bug")
			}
			out := make([]GroupResult[int], len(in))
			for i, v := range in {
				out[i].Out = v
			}
			return out, nil
		}, GroupOptions[int]{Concurrent: 1})
		var wg sync.WaitGroup
		errs := make([]error, 4)
		do := func(i int) {
			defer wg.Done()
			_, errs[i] = g.Do(context.Background(), i)
		}
		wg.Add(1)
		go do(0)
		waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return runs == 1 })
		for i := 1; i < 4; i++ {
			wg.Add(1)
			go do(i)
		}
		waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.queue) == 3 })
		close(release)
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
		release := make(chan struct{})
		var mu sync.Mutex
		var ran []int
		g := NewGroup(func(_ context.Context, in []int) ([]GroupResult[int], error) {
			mu.Lock()
			ran = append(ran, in...)
			first := len(ran) == 1
			mu.Unlock()
			if first {
				<-release
			}
			return make([]GroupResult[int], len(in)), nil
		}, GroupOptions[int]{Concurrent: 1})
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = g.Do(context.Background(), 0) })
		waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(ran) == 1 })
		ctx, cancel := context.WithCancel(context.Background())
		left := make(chan error, 1)
		go func() { _, err := g.Do(ctx, 1); left <- err }()
		waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.queue) == 1 })
		cancel()
		if err := <-left; !errors.Is(err, context.Canceled) {
			t.Fatalf("left with %v, want its context's error", err)
		}
		close(release)
		wg.Wait()
		if _, err := g.Do(context.Background(), 2); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ran, []int{0, 2}) {
			t.Errorf("ran %v, want [0 2]: call 1 left before it ran", ran)
		}
	})
	t.Run("calls with one key never share a transaction", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		var mu sync.Mutex
		var runs [][]string
		g := NewGroup(func(_ context.Context, in []string) ([]GroupResult[string], error) {
			mu.Lock()
			runs = append(runs, slices.Clone(in))
			first := len(runs) == 1
			mu.Unlock()
			if first {
				<-release
			}
			out := make([]GroupResult[string], len(in))
			for i, v := range in {
				out[i].Out = v
			}
			return out, nil
		}, GroupOptions[string]{Concurrent: 1, Max: 3, Key: func(s string) string { return s[:1] }})
		var wg sync.WaitGroup
		do := func(s string) {
			defer wg.Done()
			if v, err := g.Do(context.Background(), s); err != nil || v != s {
				t.Errorf("%s: %q %v", s, v, err)
			}
		}
		wg.Add(1)
		go do("x0")
		waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(runs) == 1 })
		for _, s := range []string{"a1", "a2", "b1", "a3", "c1", "d1"} {
			wg.Add(1)
			go do(s)
			waitFor(t, func() bool {
				g.mu.Lock()
				defer g.mu.Unlock()
				return len(g.queue) > 0 && g.queue[len(g.queue)-1].in == s
			})
		}
		close(release)
		wg.Wait()
		want := [][]string{{"x0"}, {"a1", "b1", "c1"}, {"a2", "d1"}, {"a3"}}
		if !slices.EqualFunc(runs, want, slices.Equal) {
			t.Errorf("runs %v, want %v (one call a key, at most three, in their order)", runs, want)
		}
	})
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
