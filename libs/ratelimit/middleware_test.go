package ratelimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/libs/ratelimit"
)

// countingHandler records how often the endpoint ran.
type countingHandler struct {
	mu    sync.Mutex
	calls int
}

func (h *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	_ = httpkit.WriteJSON(w, http.StatusOK, map[string]bool{"success": true})
}

func (h *countingHandler) Calls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

func request(remote string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/api/v1/track/click", strings.NewReader(`{}`))
	r.RemoteAddr = remote
	return r
}

func TestMiddlewareHeadersAndRefusal(t *testing.T) {
	clock := newFakeClock(noon.Add(45 * time.Second))
	l := newLimiter(t, ratelimit.Config{Limit: 2, Now: clock.Now})
	var refusedRoutes []string
	next := &countingHandler{}
	h := ratelimit.Middleware(l, ratelimit.ByIP(nil),
		ratelimit.WithRoute("track_click"),
		ratelimit.WithOnRefuse(func(route string) { refusedRoutes = append(refusedRoutes, route) }),
	)(next)

	resetUnix := strconv.FormatInt(noon.Add(time.Minute).Unix(), 10)
	steps := []struct {
		name      string
		status    int
		remaining string
		calls     int
	}{
		{"first allowed", 200, "1", 1},
		{"second allowed, none left", 200, "0", 2},
		{"third refused before the handler", 429, "0", 2},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, request("203.0.113.5:1000"))
			if rec.Code != st.status {
				t.Fatalf("status = %d, want %d", rec.Code, st.status)
			}
			hdr := rec.Header()
			if hdr.Get("X-RateLimit-Limit") != "2" || hdr.Get("X-RateLimit-Remaining") != st.remaining || hdr.Get("X-RateLimit-Reset") != resetUnix {
				t.Errorf("headers limit=%q remaining=%q reset=%q, want 2, %s, %s",
					hdr.Get("X-RateLimit-Limit"), hdr.Get("X-RateLimit-Remaining"), hdr.Get("X-RateLimit-Reset"), st.remaining, resetUnix)
			}
			if got := next.Calls(); got != st.calls {
				t.Errorf("handler ran %d times, want %d", got, st.calls)
			}
			retryAfter := hdr.Values("Retry-After")
			if st.status != 429 {
				if len(retryAfter) != 0 {
					t.Errorf("Retry-After %v on a %d", retryAfter, st.status)
				}
				return
			}
			if len(retryAfter) != 1 || retryAfter[0] != "15" {
				t.Errorf("Retry-After = %v, want [15]", retryAfter)
			}
			want := `{"error":{"status":429,"code":"rate_limited","message":"Too many requests. Retry after 15 seconds.","retry_after_seconds":15}}`
			if rec.Body.String() != want {
				t.Errorf("body\n got: %s\nwant: %s", rec.Body.String(), want)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Errorf("Content-Type = %q", ct)
			}
		})
	}
	if strings.Join(refusedRoutes, ",") != "track_click" {
		t.Errorf("OnRefuse routes = %v, want [track_click]", refusedRoutes)
	}
}

func TestRetryAfterIsWholeSecondsAtLeastOne(t *testing.T) {
	tests := []struct {
		name    string
		at      time.Duration // offset from noon when refused
		want    int
		message string
	}{
		{"half a second left rounds up to one", time.Minute - 500*time.Millisecond, 1, "Too many requests. Retry after 1 second."},
		{"one nanosecond left is one second", time.Minute - 1, 1, "Too many requests. Retry after 1 second."},
		{"fraction rounds up", 200 * time.Millisecond, 60, "Too many requests. Retry after 60 seconds."},
		{"exact seconds kept", 30 * time.Second, 30, "Too many requests. Retry after 30 seconds."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock(noon.Add(tt.at))
			l := newLimiter(t, ratelimit.Config{Limit: 1, Now: clock.Now})
			h := ratelimit.Middleware(l, ratelimit.ByIP(nil))(&countingHandler{})
			h.ServeHTTP(httptest.NewRecorder(), request("203.0.113.5:1"))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, request("203.0.113.5:1"))
			if rec.Code != 429 || rec.Header().Get("Retry-After") != strconv.Itoa(tt.want) {
				t.Fatalf("status %d, Retry-After %q, want 429 and %d", rec.Code, rec.Header().Get("Retry-After"), tt.want)
			}
			want := fmt.Sprintf(`{"error":{"status":429,"code":"rate_limited","message":%q,"retry_after_seconds":%d}}`, tt.message, tt.want)
			if rec.Body.String() != want {
				t.Errorf("body\n got: %s\nwant: %s", rec.Body.String(), want)
			}
		})
	}
}

func TestWindowResetLetsRequestsThroughAgain(t *testing.T) {
	clock := newFakeClock(noon)
	l := newLimiter(t, ratelimit.Config{Limit: 1, Now: clock.Now})
	next := &countingHandler{}
	h := ratelimit.Middleware(l, ratelimit.ByIP(nil))(next)
	codes := []int{}
	for _, at := range []time.Duration{0, 59 * time.Second, time.Minute, time.Minute + time.Second} {
		clock.Set(noon.Add(at))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, request("203.0.113.5:1"))
		codes = append(codes, rec.Code)
	}
	if fmt.Sprint(codes) != "[200 429 200 429]" || next.Calls() != 2 {
		t.Errorf("codes %v, handler calls %d; want [200 429 200 429] and 2", codes, next.Calls())
	}
}

func TestSaleAndRefundShareOneAllowance(t *testing.T) {
	clock := newFakeClock(noon)
	shared := newLimiter(t, ratelimit.Config{Limit: 3, Now: clock.Now})
	mw := ratelimit.Middleware(shared, ratelimit.BearerOrIP(nil))
	sale, refund := mw(&countingHandler{}), mw(&countingHandler{})
	send := func(h http.Handler, key string) int {
		r := request("203.0.113.5:1")
		r.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	got := []int{send(sale, "key1"), send(refund, "key1"), send(sale, "key1"), send(refund, "key1"), send(refund, "key2")}
	if fmt.Sprint(got) != "[200 200 200 429 200]" {
		t.Errorf("codes %v, want [200 200 200 429 200]", got)
	}
}

func TestRefusalCarriesRequestIDWhenInsideRequestID(t *testing.T) {
	clock := newFakeClock(noon)
	l := newLimiter(t, ratelimit.Config{Limit: 1, Now: clock.Now})
	h := httpkit.RequestID(ratelimit.Middleware(l, ratelimit.ByIP(nil))(&countingHandler{}))
	h.ServeHTTP(httptest.NewRecorder(), request("203.0.113.5:1"))
	r := request("203.0.113.5:1")
	r.Header.Set("X-Request-ID", "req-429")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != 429 || rec.Header().Get("X-Request-ID") != "req-429" {
		t.Errorf("status %d, X-Request-ID %q", rec.Code, rec.Header().Get("X-Request-ID"))
	}
}

func TestKeyFuncs(t *testing.T) {
	res, err := httpkit.NewIPResolver("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		key    ratelimit.KeyFunc
		remote string
		xff    string
		auth   string
		want   string // exact key, or "token" for a hashed token key
	}{
		{"ByIP untrusted peer", ratelimit.ByIP(res), "203.0.113.5:1", "1.1.1.1", "", "ip:203.0.113.5"},
		{"ByIP behind trusted proxy", ratelimit.ByIP(res), "10.0.0.1:1", "198.51.100.7", "", "ip:198.51.100.7"},
		{"ByIP nil resolver uses peer", ratelimit.ByIP(nil), "10.0.0.1:1", "198.51.100.7", "", "ip:10.0.0.1"},
		{"ByIP ipv6 is keyed by its /64", ratelimit.ByIP(res), "[2001:db8:1:2:aaaa::1]:1", "", "", "ip:2001:db8:1:2::/64"},
		{"ByIP ipv6 zone dropped", ratelimit.ByIP(res), "[fe80::1%eth0]:1", "", "", "ip:fe80::/64"},
		{"ByIP ipv4-mapped ipv6 is the ipv4 address", ratelimit.ByIP(res), "[::ffff:203.0.113.5]:1", "", "", "ip:203.0.113.5"},
		{"ByIP ipv6 behind trusted proxy", ratelimit.ByIP(res), "10.0.0.1:1", "2001:db8:9::77", "", "ip:2001:db8:9::/64"},
		{"BearerOrIP no token, ipv6 /64", ratelimit.BearerOrIP(res), "[2001:db8::1]:1", "", "", "ip:2001:db8::/64"},
		{"ByIP unreadable address", ratelimit.ByIP(res), "garbage", "", "", "ip:unknown"},
		{"ByIP ignores token", ratelimit.ByIP(res), "203.0.113.5:1", "", "Bearer sk_live_1", "ip:203.0.113.5"},
		{"BearerOrIP token", ratelimit.BearerOrIP(res), "203.0.113.5:1", "", "Bearer sk_live_1", "token"},
		{"BearerOrIP empty token falls back to IP", ratelimit.BearerOrIP(res), "203.0.113.5:1", "", "Bearer ", "ip:203.0.113.5"},
		{"BearerOrIP other scheme falls back to IP", ratelimit.BearerOrIP(res), "203.0.113.5:1", "", "Basic dXNlcg==", "ip:203.0.113.5"},
		{"BearerOrIP lowercase scheme is not Bearer", ratelimit.BearerOrIP(res), "203.0.113.5:1", "", "bearer sk_live_1", "ip:203.0.113.5"},
		{"BearerOrIP no header uses resolver", ratelimit.BearerOrIP(res), "10.0.0.1:1", "198.51.100.7", "", "ip:198.51.100.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request(tt.remote)
			if tt.xff != "" {
				r.Header.Set("X-Forwarded-For", tt.xff)
			}
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			got := tt.key(r)
			if tt.want != "token" {
				if got != tt.want {
					t.Errorf("key = %q, want %q", got, tt.want)
				}
				return
			}
			if !strings.HasPrefix(got, "t:") || len(got) != 18 || strings.Contains(got, "sk_live_1") {
				t.Errorf("token key %q: want t: plus a 16-byte hash, never the raw token", got)
			}
		})
	}
}

func TestBearerKeysSeparateTokensAndPreferContextIP(t *testing.T) {
	key := ratelimit.BearerOrIP(nil)
	a, b := request("203.0.113.5:1"), request("203.0.113.5:1")
	a.Header.Set("Authorization", "Bearer one")
	b.Header.Set("Authorization", "Bearer two")
	if key(a) == key(b) {
		t.Error("two tokens share a bucket")
	}
	again := request("198.51.100.1:1")
	again.Header.Set("Authorization", "Bearer one")
	if key(a) != key(again) {
		t.Error("one token from two addresses got two buckets")
	}

	// The address stored by the IP middleware wins over re-resolving.
	res, err := httpkit.NewIPResolver("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	var got string
	h := res.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = ratelimit.ByIP(nil)(r) }))
	r := request("10.0.0.1:1")
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if got != "ip:198.51.100.7" {
		t.Errorf("key inside IP middleware = %q", got)
	}
}

func TestRefusalCounterCountsPerRouteAndSharesRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	c1, err := ratelimit.NewRefusalCounter(reg)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := ratelimit.NewRefusalCounter(reg)
	if err != nil {
		t.Fatalf("second registration: %v", err)
	}
	clock := newFakeClock(noon)
	l := newLimiter(t, ratelimit.Config{Limit: 1, Now: clock.Now})
	click := ratelimit.Middleware(l, ratelimit.ByIP(nil), ratelimit.WithRoute("track_click"), ratelimit.WithOnRefuse(c1.Inc))(&countingHandler{})
	for range 3 {
		click.ServeHTTP(httptest.NewRecorder(), request("203.0.113.5:1"))
	}
	c2.Inc("track_lead")
	want := `
# HELP rate_limit_refusals_total Requests refused with 429 by the per-instance rate limiter.
# TYPE rate_limit_refusals_total counter
rate_limit_refusals_total{route="track_click"} 2
rate_limit_refusals_total{route="track_lead"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rate_limit_refusals_total"); err != nil {
		t.Error(err)
	}
}

func TestMiddlewareConcurrentRequestsAdmitExactlyTheLimit(t *testing.T) {
	const limit, requests = 60, 400
	clock := newFakeClock(noon)
	l := newLimiter(t, ratelimit.Config{Limit: limit, Now: clock.Now})
	next := &countingHandler{}
	h := ratelimit.Middleware(l, ratelimit.ByIP(nil))(next)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range requests {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, request("203.0.113.5:1"))
			mu.Lock()
			codes[rec.Code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[200] != limit || codes[429] != requests-limit || next.Calls() != limit {
		t.Errorf("codes %v, handler calls %d; want %d allowed", codes, next.Calls(), limit)
	}
}

// An IPv6 client rotating addresses inside its /64 shares one bucket; the
// next /64 is another client.
func TestIPv6ClientsShareTheirSlash64(t *testing.T) {
	l := newLimiter(t, ratelimit.Config{Limit: 2, Now: newFakeClock(noon).Now})
	h := ratelimit.Middleware(l, ratelimit.ByIP(nil))(&countingHandler{})
	for i, remote := range []string{"[2001:db8:0:1::1]:1", "[2001:db8:0:1:ffff:ffff:ffff:ffff]:1", "[2001:db8:0:1::abcd]:1"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, request(remote))
		if want := []int{200, 200, 429}[i]; rec.Code != want {
			t.Fatalf("request %d from %s: %d, want %d", i, remote, rec.Code, want)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, request("[2001:db8:0:2::1]:1"))
	if rec.Code != 200 {
		t.Fatalf("the next /64 was limited: %d", rec.Code)
	}
}

func TestPeekNeitherCountsNorCreatesABucket(t *testing.T) {
	clock := newFakeClock(noon.Add(50 * time.Second))
	l := newLimiter(t, ratelimit.Config{Limit: 2, Now: clock.Now})
	for range 5 {
		if d := l.Peek("a"); !d.Allowed || d.Remaining != 2 || d.Limit != 2 || !d.Reset.Equal(noon.Add(time.Minute)) {
			t.Fatalf("peek of an unknown key: %+v", d)
		}
	}
	if n := l.Len(); n != 0 {
		t.Fatalf("peek created %d buckets", n)
	}
	l.Allow("a")
	if d := l.Peek("a"); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("after one allow: %+v", d)
	}
	l.Allow("a")
	if d := l.Peek("a"); d.Allowed || d.Remaining != 0 || d.RetryAfter != 10*time.Second {
		t.Fatalf("after the limit: %+v", d)
	}
	clock.Set(noon.Add(time.Minute))
	if d := l.Peek("a"); !d.Allowed || d.Remaining != 2 {
		t.Fatalf("next window: %+v", d)
	}
}

// statusHandler answers the status its request asks for in X-Want, as an
// authentication middleware would (401 for a bad credential).
type statusHandler struct {
	mu    sync.Mutex
	calls int
}

func (h *statusHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	status, _ := strconv.Atoi(r.Header.Get("X-Want"))
	_ = httpkit.WriteJSON(w, status, map[string]int{"status": status})
}

func (h *statusHandler) Calls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

func TestFailedAuthLimitsFailuresPerIPBeforeTheLookup(t *testing.T) {
	clock := newFakeClock(noon.Add(45 * time.Second))
	l := newLimiter(t, ratelimit.Config{Limit: 3, Now: clock.Now})
	var refused []string
	auth := &statusHandler{}
	h := ratelimit.FailedAuth(l, ratelimit.ByIP(nil), ratelimit.WithRoute("failed_auth"),
		ratelimit.WithOnRefuse(func(route string) { refused = append(refused, route) }))(auth)
	send := func(remote string, status int) *httptest.ResponseRecorder {
		r := request(remote)
		r.Header.Set("X-Want", strconv.Itoa(status))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	resetUnix := strconv.FormatInt(noon.Add(time.Minute).Unix(), 10)
	steps := []struct {
		name      string
		remote    string
		status    int // what the authentication answers
		want      int
		remaining string
		calls     int
	}{
		{"a success counts nothing", "203.0.113.5:1", 200, 200, "3", 1},
		{"first 401 counted", "203.0.113.5:1", 401, 401, "2", 2},
		{"a 403 after authentication counts nothing", "203.0.113.5:1", 403, 403, "2", 3},
		{"a 500 counts nothing", "203.0.113.5:1", 500, 500, "2", 4},
		{"second 401", "203.0.113.5:2", 401, 401, "1", 5},
		{"third 401 uses the allowance up", "203.0.113.5:3", 401, 401, "0", 6},
		{"then refused before the lookup", "203.0.113.5:1", 401, 429, "0", 6},
		{"even with a credential that would work", "203.0.113.5:1", 200, 429, "0", 6},
		{"another IP is not limited", "198.51.100.9:1", 401, 401, "2", 7},
		{"another IP's success", "198.51.100.9:1", 200, 200, "2", 8},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			rec := send(st.remote, st.status)
			hdr := rec.Header()
			if rec.Code != st.want || hdr.Get("X-RateLimit-Limit") != "3" || hdr.Get("X-RateLimit-Remaining") != st.remaining || hdr.Get("X-RateLimit-Reset") != resetUnix {
				t.Fatalf("%d %v, want %d remaining %s", rec.Code, hdr, st.want, st.remaining)
			}
			if got := auth.Calls(); got != st.calls {
				t.Fatalf("authentication ran %d times, want %d", got, st.calls)
			}
			if st.want != 429 {
				if hdr.Get("Retry-After") != "" {
					t.Fatal("Retry-After on a non-429")
				}
				return
			}
			want := `{"error":{"status":429,"code":"rate_limited","message":"Too many requests. Retry after 15 seconds.","retry_after_seconds":15}}`
			if rec.Body.String() != want || hdr.Get("Retry-After") != "15" {
				t.Fatalf("429 %s %v", rec.Body.String(), hdr)
			}
		})
	}
	if strings.Join(refused, ",") != "failed_auth,failed_auth" {
		t.Errorf("refusals %v", refused)
	}
	if n := l.Len(); n != 2 {
		t.Errorf("%d buckets, want one per failing IP", n)
	}
	clock.Set(noon.Add(time.Minute))
	if rec := send("203.0.113.5:1", 200); rec.Code != 200 {
		t.Fatalf("next window: %d", rec.Code)
	}
}

// A flood of invented tokens from one IP ends in 429s after the allowance
// and creates one bucket, not one per token.
func TestFailedAuthFloodOfTokensHoldsOneBucket(t *testing.T) {
	l := newLimiter(t, ratelimit.Config{Limit: 30, Now: newFakeClock(noon).Now})
	auth := &statusHandler{}
	h := ratelimit.FailedAuth(l, ratelimit.ByIP(nil))(auth)
	var refused int
	for i := range 10_000 {
		r := request("[2001:db8::1]:1")
		r.RemoteAddr = fmt.Sprintf("[2001:db8::%x]:1", i) // rotating within one /64
		r.Header.Set("Authorization", "Bearer guess-"+strconv.Itoa(i))
		r.Header.Set("X-Want", "401")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code == 429 {
			refused++
		}
	}
	if auth.Calls() != 30 || refused != 10_000-30 || l.Len() != 1 {
		t.Fatalf("lookups %d, refused %d, buckets %d", auth.Calls(), refused, l.Len())
	}
}

// A handler that writes its body without WriteHeader (an implicit 200) or
// flushes counts nothing, and the writer still flushes.
func TestFailedAuthImplicitStatusAndFlush(t *testing.T) {
	l := newLimiter(t, ratelimit.Config{Limit: 1, Now: newFakeClock(noon).Now})
	h := ratelimit.FailedAuth(l, ratelimit.ByIP(nil))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush: %v", err)
		}
		w.WriteHeader(http.StatusUnauthorized) // superfluous: the status is sent
	}))
	for range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, request("203.0.113.5:1"))
		if rec.Code != 200 || !rec.Flushed {
			t.Fatalf("%d flushed=%v", rec.Code, rec.Flushed)
		}
	}
}

// A URL that is not UTF-8, passed on by httpkit.DeferURLCheck, is counted
// and refused 400 in the route's envelope with the bucket's headers; the
// route never runs. A valid URL is untouched, and over the limit the 429
// stands.
func TestMiddlewareRefusesADeferredURL(t *testing.T) {
	l := newLimiter(t, ratelimit.Config{Limit: 2, Now: newFakeClock(noon).Now})
	next := &countingHandler{}
	limited := ratelimit.Middleware(l, ratelimit.ByIP(nil))(next)
	h := httpkit.DeferURLCheck(limited, httpkit.TypedRefusal)

	bad := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/programs/me/readiness?x=%FF", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	rec := bad()
	if rec.Code != 400 || rec.Header().Get(ratelimit.HeaderLimit) != "2" || rec.Header().Get(ratelimit.HeaderRemaining) != "1" ||
		!strings.Contains(rec.Body.String(), `"code":"invalid_request"`) || !strings.Contains(rec.Body.String(), httpkit.MsgInvalidURL) {
		t.Fatalf("bad URL: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, request("192.0.2.1:1234"))
	if rec.Code != 200 || next.Calls() != 1 || rec.Header().Get(ratelimit.HeaderRemaining) != "0" {
		t.Fatalf("valid URL: %d, %d calls, %v", rec.Code, next.Calls(), rec.Header())
	}
	if rec = bad(); rec.Code != 429 || next.Calls() != 1 {
		t.Fatalf("over the limit: %d, %d calls", rec.Code, next.Calls())
	}
	// Without the deferral the URL is not the limiter's business.
	rec = httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/x?y=%FF", nil)
	r.RemoteAddr = "192.0.2.9:1"
	limited.ServeHTTP(rec, r)
	if rec.Code != 200 || next.Calls() != 2 {
		t.Fatalf("not deferred: %d, %d calls", rec.Code, next.Calls())
	}
}
