package delivery

import "time"

// Jitter is the share (either way) by which a wait is spread, so endpoints
// that failed together are not all retried in the same second.
const Jitter = 0.1

// Backoff returns the wait after failed attempt n (1-based): 5 s, 5 min,
// 30 min, 2 h, 5 h, then 10 h each time. r is a random number in [0, 1)
// (math/rand/v2's Float64; injected so tests choose it): 0.5 gives the
// schedule's value, 0 and 1 its bounds.
func Backoff(n int, r float64) time.Duration {
	var d time.Duration
	switch {
	case n <= 1:
		d = 5 * time.Second
	case n == 2:
		d = 5 * time.Minute
	case n == 3:
		d = 30 * time.Minute
	case n == 4:
		d = 2 * time.Hour
	case n == 5:
		d = 5 * time.Hour
	default:
		d = 10 * time.Hour
	}
	return time.Duration(float64(d) * (1 + Jitter*(2*r-1)))
}
