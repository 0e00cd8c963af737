package inbox

import (
	"testing"
	"time"
)

func TestEveryLogLetsOneLinePerPeriodThrough(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l := &everyLog{every: 30 * time.Second}
	steps := []struct {
		at             time.Duration
		wantOK         bool
		wantSuppressed int
	}{
		{at: 0, wantOK: true},
		{at: time.Second, wantOK: false},
		{at: 29 * time.Second, wantOK: false},
		{at: 30 * time.Second, wantOK: true, wantSuppressed: 2},
		{at: 31 * time.Second, wantOK: false},
		{at: 5 * time.Minute, wantOK: true, wantSuppressed: 1},
	}
	for _, s := range steps {
		suppressed, ok := l.allow(t0.Add(s.at))
		if ok != s.wantOK || suppressed != s.wantSuppressed {
			t.Fatalf("at %s: allow = (%d, %v), want (%d, %v)", s.at, suppressed, ok, s.wantSuppressed, s.wantOK)
		}
	}
}
