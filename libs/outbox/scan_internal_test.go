package outbox

import (
	"testing"
	"time"
)

func TestRelayScanState(t *testing.T) {
	t.Parallel()
	const timeout = 5 * time.Minute
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// started is a session whose first batch read up to id 10 at t0.
	started := func() *scanState {
		s := &scanState{}
		s.record(t0, 0, []int64{3, 10}, nil, false)
		return s
	}
	tests := []struct {
		name string
		// steps run on a started session; the floor is then asked at now.
		steps func(s *scanState)
		now   time.Time
		want  int64
	}{
		{
			name:  "the first batch sets the cursor without gaps below it",
			steps: func(*scanState) {},
			now:   t0, want: 10,
		},
		{
			name:  "ids read past are gaps: the next batch reads from below the lowest",
			steps: func(s *scanState) { s.record(t0, 10, []int64{12, 15}, nil, false) },
			now:   t0, want: 10,
		},
		{
			name: "a gap is resolved when its row is read",
			steps: func(s *scanState) {
				s.record(t0, 10, []int64{12, 15}, nil, false) // gaps 11, 13, 14
				s.record(t0, 10, []int64{11, 13}, nil, false)
			},
			now: t0, want: 13,
		},
		{
			name:  "gaps expire after the timeout",
			steps: func(s *scanState) { s.record(t0, 10, []int64{12, 15}, nil, false) },
			now:   t0.Add(timeout), want: 0, // expired, and a full scan is due as well
		},
		{
			name: "after expiry the floor is the cursor",
			steps: func(s *scanState) {
				s.record(t0, 10, []int64{12, 15}, nil, false)
				s.floor(t0.Add(timeout), timeout)
				s.record(t0.Add(timeout), 0, nil, nil, false) // the full scan
			},
			now: t0.Add(timeout), want: 15,
		},
		{
			name:  "a row read but not published is read again",
			steps: func(s *scanState) { s.record(t0, 10, []int64{11, 12, 13}, []int64{12}, false) },
			now:   t0, want: 11,
		},
		{
			name: "a full batch tells nothing of leftovers past its last row",
			steps: func(s *scanState) {
				s.record(t0, 10, []int64{11, 12, 13}, []int64{13}, false)
				s.record(t0, 12, []int64{13}, []int64{13}, false)
				s.record(t0, 10, []int64{11}, nil, true) // leftover 13 is past it: kept
			},
			now: t0, want: 12,
		},
		{
			name: "a leftover a batch covered but did not read is gone",
			steps: func(s *scanState) {
				s.record(t0, 10, []int64{11, 12, 13}, []int64{12}, false)
				s.record(t0, 11, []int64{13}, nil, false)
			},
			now: t0, want: 13,
		},
		{
			name:  "the session's start is read from the beginning while held",
			steps: func(s *scanState) { s.hold(t0.Add(timeout), 10, "100") },
			now:   t0.Add(time.Second), want: 0,
		},
		{
			name: "the hold ends once its transactions ended and a batch read past it",
			steps: func(s *scanState) {
				s.hold(t0.Add(timeout), 10, "100")
				s.holdEnded = true
				s.record(t0, 0, []int64{4, 11}, nil, true)
			},
			now: t0.Add(time.Second), want: 11,
		},
		{
			name: "the hold stays while a full batch from the start stopped short of it",
			steps: func(s *scanState) {
				s.hold(t0.Add(timeout), 10, "100")
				s.holdEnded = true
				s.record(t0, 0, []int64{4, 5}, nil, true)
			},
			now: t0.Add(time.Second), want: 0,
		},
		{
			name:  "the hold expires after the timeout",
			steps: func(s *scanState) { s.hold(t0.Add(timeout), 10, "100"); s.record(t0.Add(timeout), 0, nil, nil, false) },
			now:   t0.Add(timeout + time.Second), want: 10,
		},
		{
			name:  "a full scan is due every fullScanEvery",
			steps: func(*scanState) {},
			now:   t0.Add(fullScanEvery), want: 0,
		},
		{
			name:  "a full scan is due when rows were unparked",
			steps: func(s *scanState) { s.fullDue = true },
			now:   t0, want: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := started()
			tt.steps(s)
			if got, _ := s.floor(tt.now, timeout); got != tt.want {
				t.Fatalf("floor = %d, want %d (state %+v)", got, tt.want, *s)
			}
		})
	}

	t.Run("the gap set is capped, dropping the oldest", func(t *testing.T) {
		s := started()
		dropped := s.record(t0, 10, []int64{11 + maxGaps + 5}, nil, false)
		if len(s.gaps) != maxGaps || dropped != 5 {
			t.Fatalf("%d gaps, %d dropped; want %d and 5", len(s.gaps), dropped, maxGaps)
		}
		if s.gaps[0].id != 16 {
			t.Fatalf("lowest gap %d, want 16 (11..15 dropped)", s.gaps[0].id)
		}
	})
	t.Run("a jump of the sequence keeps only the highest ids", func(t *testing.T) {
		s := started()
		dropped := s.record(t0, 10, []int64{1 << 40}, nil, false)
		if len(s.gaps) != maxGaps || s.gaps[len(s.gaps)-1].id != 1<<40-1 || dropped < (1<<40)-maxGaps-20 {
			t.Fatalf("%d gaps up to %d, %d dropped", len(s.gaps), s.gaps[len(s.gaps)-1].id, dropped)
		}
	})
}
