package platformtest_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

var start = time.Date(2031, time.May, 6, 7, 8, 9, 0, time.UTC)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		move func(c *platformtest.Clock)
		want time.Time
	}{
		{name: "stands still", move: func(*platformtest.Clock) {}, want: start},
		{name: "advance", move: func(c *platformtest.Clock) { c.Advance(90 * time.Minute) }, want: start.Add(90 * time.Minute)},
		{name: "advance twice", move: func(c *platformtest.Clock) { c.Advance(time.Hour); c.Advance(24 * time.Hour) }, want: start.Add(25 * time.Hour)},
		{name: "advance back", move: func(c *platformtest.Clock) { c.Advance(-time.Second) }, want: start.Add(-time.Second)},
		{name: "set", move: func(c *platformtest.Clock) { c.Set(start.AddDate(1, 0, 0)) }, want: start.AddDate(1, 0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := platformtest.NewClock(start)
			tt.move(c)
			if got := c.Now(); !got.Equal(tt.want) {
				t.Fatalf("Now() = %s, want %s", got, tt.want)
			}
			if got := c.Now(); !got.Equal(tt.want) {
				t.Fatalf("second Now() = %s, want %s: the clock moved by itself", got, tt.want)
			}
		})
	}
}

func TestClockAdvanceReturnsTheNewTime(t *testing.T) {
	t.Parallel()
	c := platformtest.NewClock(start)
	if got := c.Advance(time.Minute); !got.Equal(start.Add(time.Minute)) || !got.Equal(c.Now()) {
		t.Fatalf("Advance = %s, Now = %s; want both %s", got, c.Now(), start.Add(time.Minute))
	}
}

func TestClockIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	c := platformtest.NewClock(start)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 100 {
				c.Advance(time.Second)
			}
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				_ = c.Now()
			}
		}()
	}
	wg.Wait()
	if got, want := c.Now(), start.Add(800*time.Second); !got.Equal(want) {
		t.Fatalf("after 800 concurrent one-second advances: %s, want %s", got, want)
	}
}

// clockSpec answers GET /now with the service's clock, as every rule of a
// service reads it (Platform.Now).
func clockSpec() platform.Spec {
	return platform.Spec{
		Name:       "clocked",
		Migrations: fstest.MapFS{"00001_notes.sql": {Data: []byte("-- +goose Up\nCREATE TABLE notes (id int);\n")}},
		Wire: func(_ context.Context, p *platform.Platform) ([]platform.Route, error) {
			now := p.Now
			return []platform.Route{{Pattern: "GET /now", Name: "now", Handler: http.HandlerFunc(
				func(w http.ResponseWriter, _ *http.Request) {
					_, _ = io.WriteString(w, now().UTC().Format(time.RFC3339Nano))
				})}}, nil
		},
	}
}

func TestServiceStartedWithAFakeClockSeesItsTime(t *testing.T) {
	t.Parallel()
	clock := platformtest.NewClock(start)
	inst := platformtest.Start(t, clockSpec(), platformtest.Env(t), platform.WithClock(clock.Now))
	base := "http://" + inst.Addr()
	steps := []struct {
		name string
		move func()
		want time.Time
	}{
		{name: "at start", move: func() {}, want: start},
		{name: "an hour and a half later", move: func() { clock.Advance(90 * time.Minute) }, want: start.Add(90 * time.Minute)},
		{name: "past a 30-day window", move: func() { clock.Advance(30 * 24 * time.Hour) }, want: start.Add(90*time.Minute + 30*24*time.Hour)},
		{name: "set back", move: func() { clock.Set(start) }, want: start},
	}
	for _, st := range steps {
		st.move()
		if code, body := get(t, base+"/now"); code != http.StatusOK || body != st.want.Format(time.RFC3339Nano) {
			t.Fatalf("%s: GET /now = %d %q, want %s", st.name, code, body, st.want.Format(time.RFC3339Nano))
		}
		if got := inst.Platform().Now(); !got.Equal(st.want) {
			t.Fatalf("%s: Platform().Now() = %s, want %s", st.name, got, st.want)
		}
	}
}

func TestServiceStartedWithoutAClockSeesTheRealTime(t *testing.T) {
	t.Parallel()
	inst := platformtest.Start(t, clockSpec(), platformtest.Env(t))
	before := time.Now().Add(-time.Second)
	_, body := get(t, "http://"+inst.Addr()+"/now")
	after := time.Now().Add(time.Second)
	got, err := time.Parse(time.RFC3339Nano, body)
	if err != nil || got.Before(before) || got.After(after) {
		t.Fatalf("GET /now = %q (%v), want a time between %s and %s", body, err, before, after)
	}
}
