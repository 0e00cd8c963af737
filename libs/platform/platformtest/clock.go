package platformtest

import (
	"sync"
	"time"
)

// Clock is a fake clock for services under test: it stands still until the
// test moves it. Give its Now to platform.WithClock (through Start's
// options) and the service's windows, holds, expiries and rotation deadlines
// follow it; share one Clock between the services of a stack so they agree
// on the time. It is safe for concurrent use.
//
// Only the service's own rules read it. Postgres's now() (column defaults,
// the inbox's applied_at), the broker, the outbox relay, the inbox sweeper
// and outside fakes not given the same clock (oidctest.WithClock) keep the
// wall clock, so a Clock started at time.Now() and moved forward keeps the
// two close enough for everything but the rule under test; one set years
// away suits rules computed in the service alone.
//
// A clock that stands still also stands still for rate limits read through
// Platform.Now: a test that sends more than a limit allows moves the clock
// past the window or raises the limit in the environment.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock reading start. Readings carry no monotonic
// part (time.Time.Round(0)): durations between them are wall-clock
// differences, the same whether the clock was set or advanced.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start.Round(0)}
}

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d (back, if d is negative) and returns the new
// time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t.Round(0)
}
