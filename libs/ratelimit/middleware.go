package ratelimit

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svc-dev/svc/libs/httpkit"
)

// Response headers of limited routes.
const (
	HeaderLimit      = "X-RateLimit-Limit"
	HeaderRemaining  = "X-RateLimit-Remaining"
	HeaderReset      = "X-RateLimit-Reset"
	HeaderRetryAfter = "Retry-After"
)

// CodeRateLimited is the typed envelope's error.code on 429.
const CodeRateLimited = "rate_limited"

// KeyFunc names the bucket a request counts against.
type KeyFunc func(r *http.Request) string

// Option adjusts Middleware.
type Option func(*middlewareConfig)

type middlewareConfig struct {
	route    string
	onRefuse func(route string)
}

// WithRoute names the route in refusal callbacks (a metric label: keep it a
// low-cardinality route pattern, never a raw path with ids).
func WithRoute(route string) Option {
	return func(c *middlewareConfig) { c.route = route }
}

// WithOnRefuse is called once per refused request, e.g. with
// (*RefusalCounter).Inc to count rate_limit_refusals_total.
func WithOnRefuse(fn func(route string)) Option {
	return func(c *middlewareConfig) { c.onRefuse = fn }
}

// Middleware limits the wrapped handler with l, counting per key(r). Every
// response carries X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset (Unix seconds of the window end); over the limit the
// handler is not called and the answer is 429 with Retry-After (whole
// seconds, at least 1) and the typed envelope
//
//	{"error":{"status":429,"code":"rate_limited","message":"Too many requests. Retry after N seconds.","retry_after_seconds":N}}
//
// A request whose URL httpkit.DeferURLCheck found not UTF-8 is counted,
// then refused with 400 in the route's envelope, its headers set.
//
// Routes that share an allowance (sale and refund: 120 combined) share one
// Limiter. Place it inside httpkit.RequestID (so 429s carry the id) and
// inside the client IP middleware, before authentication (the contract
// refuses before the endpoint does anything).
func Middleware(l *Limiter, key KeyFunc, opts ...Option) func(http.Handler) http.Handler {
	cfg := newMiddlewareConfig(opts)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d := l.Allow(key(r))
			setHeaders(w.Header(), d)
			if !d.Allowed {
				cfg.refuse(w, d)
				return
			}
			if refuse, ok := httpkit.URLRefusal(r.Context()); ok {
				refuse(w, http.StatusBadRequest, httpkit.MsgInvalidURL)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// FailedAuth limits failed authentications per key(r), normally ByIP: it
// wraps a route's authentication (and everything inside it) and
//   - before the handler runs, so before any key or token lookup, refuses
//     with the 429 of Middleware when the key's allowance for the window
//     is used up (l.Peek: checking creates no bucket);
//   - counts one failure (l.Allow) for every 401 the handler answers;
//     other answers, successful authentications included, count nothing.
//
// Every response carries the X-RateLimit-* headers of the failed-auth
// bucket; a limiter inside the authentication (the per-token bucket of an
// authenticated request) overwrites them with its own. Requests of one
// client in flight together are checked before any of them fails, so up
// to that many lookups can pass the allowance; the count stays exact.
//
// It replaces keying the route limiter by an unchecked Bearer token, where
// every invented token got a fresh bucket: guessing was never limited and a
// flood of tokens evicted real counters.
func FailedAuth(l *Limiter, key KeyFunc, opts ...Option) func(http.Handler) http.Handler {
	cfg := newMiddlewareConfig(opts)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k := key(r)
			d := l.Peek(k)
			setHeaders(w.Header(), d)
			if !d.Allowed {
				cfg.refuse(w, d)
				return
			}
			next.ServeHTTP(&failureCounter{ResponseWriter: w, l: l, key: k}, r)
		})
	}
}

// failureCounter counts a 401 against its key when the status is written,
// and updates the headers to what is left after it.
type failureCounter struct {
	http.ResponseWriter
	l       *Limiter
	key     string
	written bool
}

func (f *failureCounter) WriteHeader(status int) {
	if !f.written && status >= 200 {
		f.written = true
		if status == http.StatusUnauthorized {
			setHeaders(f.Header(), f.l.Allow(f.key))
		}
	}
	f.ResponseWriter.WriteHeader(status)
}

func (f *failureCounter) Write(b []byte) (int, error) {
	f.written = true
	return f.ResponseWriter.Write(b)
}

// Flush passes a handler's flush through (a status not written yet is 200).
func (f *failureCounter) Flush() {
	f.written = true
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (f *failureCounter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

func setHeaders(h http.Header, d Decision) {
	h.Set(HeaderLimit, strconv.Itoa(d.Limit))
	h.Set(HeaderRemaining, strconv.Itoa(d.Remaining))
	h.Set(HeaderReset, strconv.FormatInt(unixCeil(d.Reset), 10))
}

// refuse writes the 429 for a refused decision.
func (c middlewareConfig) refuse(w http.ResponseWriter, d Decision) {
	secs := RetryAfterSeconds(d.RetryAfter)
	w.Header().Set(HeaderRetryAfter, strconv.Itoa(secs))
	if c.onRefuse != nil {
		c.onRefuse(c.route)
	}
	_ = httpkit.WriteTypedError(w, http.StatusTooManyRequests, CodeRateLimited, RefusalMessage(secs),
		map[string]any{"retry_after_seconds": secs}, httpkit.WithStatusField())
}

// RetryAfterSeconds rounds a wait up to whole seconds, at least 1, so a
// client that waits exactly that long lands in the next window.
func RetryAfterSeconds(d time.Duration) int {
	secs := int(math.Ceil(d.Seconds()))
	return max(secs, 1)
}

// RefusalMessage is the 429 error.message.
func RefusalMessage(secs int) string {
	unit := "seconds"
	if secs == 1 {
		unit = "second"
	}
	return fmt.Sprintf("Too many requests. Retry after %d %s.", secs, unit)
}

// unixCeil rounds up so the advertised reset is never before the real one.
func unixCeil(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// ByIP buckets by client address: the one stored by
// (*httpkit.IPResolver).Middleware when present, else resolved with res
// (nil res: the TCP peer). An IPv4 client is its address; an IPv6 client
// is its /64 ("ip:2001:db8:1:2::/64"), the block one subscriber gets, since
// a client can rotate addresses within it at will. Requests whose address
// cannot be read share the bucket "ip:unknown".
func ByIP(res *httpkit.IPResolver) KeyFunc {
	return func(r *http.Request) string {
		return "ip:" + clientIP(r, res)
	}
}

// BearerOrIP buckets by the Bearer token sent (API key, login or session
// token), else by client address (as ByIP). Tokens are hashed (SHA-256,
// first 16 bytes) before use so the limiter never holds a secret; the "t:"
// and "ip:" prefixes keep the two namespaces apart. The token is not
// validated here, so a Middleware keyed by it belongs inside the route's
// authentication, with FailedAuth outside: a bucket per unchecked token
// would let every invented token start a fresh allowance.
func BearerOrIP(res *httpkit.IPResolver) KeyFunc {
	return func(r *http.Request) string {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if tok = strings.TrimSpace(tok); tok != "" {
				sum := sha256.Sum256([]byte(tok))
				return "t:" + string(sum[:16])
			}
		}
		return "ip:" + clientIP(r, res)
	}
}

func clientIP(r *http.Request, res *httpkit.IPResolver) string {
	a, ok := httpkit.ClientIPFrom(r.Context())
	if !ok {
		if res == nil {
			a = peerAddr(r.RemoteAddr)
		} else {
			a = res.ClientIP(r)
		}
	}
	if !a.IsValid() {
		return "unknown"
	}
	if a = a.Unmap(); a.Is6() {
		if p, err := a.WithZone("").Prefix(64); err == nil {
			return p.String()
		}
	}
	return a.String()
}

func peerAddr(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap()
	}
	if a, err := netip.ParseAddr(remote); err == nil {
		return a.Unmap()
	}
	return netip.Addr{}
}

// RefusalCounter counts rate_limit_refusals_total{route}.
type RefusalCounter struct {
	vec *prometheus.CounterVec
}

// NewRefusalCounter registers rate_limit_refusals_total on reg; when the
// collector is already registered there (several limiters in one process),
// the existing one is shared.
func NewRefusalCounter(reg prometheus.Registerer) (*RefusalCounter, error) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rate_limit_refusals_total",
		Help: "Requests refused with 429 by the per-instance rate limiter.",
	}, []string{"route"})
	if err := reg.Register(vec); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("register rate_limit_refusals_total: %w", err)
		}
		existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			return nil, fmt.Errorf("register rate_limit_refusals_total: existing collector is %T", are.ExistingCollector)
		}
		vec = existing
	}
	return &RefusalCounter{vec: vec}, nil
}

// Inc counts one refusal; pass it to WithOnRefuse.
func (c *RefusalCounter) Inc(route string) {
	c.vec.WithLabelValues(route).Inc()
}

func newMiddlewareConfig(opts []Option) middlewareConfig {
	var cfg middlewareConfig
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	return cfg
}
