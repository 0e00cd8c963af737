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
// Routes that share an allowance (sale and refund: 120 combined) share one
// Limiter. Place it inside httpkit.RequestID (so 429s carry the id) and
// inside the client IP middleware, before authentication (the contract
// refuses before the endpoint does anything).
func Middleware(l *Limiter, key KeyFunc, opts ...Option) func(http.Handler) http.Handler {
	var cfg middlewareConfig
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d := l.Allow(key(r))
			h := w.Header()
			h.Set(HeaderLimit, strconv.Itoa(d.Limit))
			h.Set(HeaderRemaining, strconv.Itoa(d.Remaining))
			h.Set(HeaderReset, strconv.FormatInt(unixCeil(d.Reset), 10))
			if d.Allowed {
				next.ServeHTTP(w, r)
				return
			}
			secs := RetryAfterSeconds(d.RetryAfter)
			h.Set(HeaderRetryAfter, strconv.Itoa(secs))
			if cfg.onRefuse != nil {
				cfg.onRefuse(cfg.route)
			}
			_ = httpkit.WriteTypedError(w, http.StatusTooManyRequests, CodeRateLimited, RefusalMessage(secs),
				map[string]any{"retry_after_seconds": secs}, httpkit.WithStatusField())
		})
	}
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
// (nil res: the TCP peer). Requests whose address cannot be read share the
// bucket "ip:unknown".
func ByIP(res *httpkit.IPResolver) KeyFunc {
	return func(r *http.Request) string {
		return "ip:" + clientIP(r, res)
	}
}

// BearerOrIP buckets by the Bearer token sent (API key, login or session
// token), else by client address. Tokens are hashed (SHA-256, first 16
// bytes) before use so the limiter never holds a secret; the "t:" and "ip:"
// prefixes keep the two namespaces apart. The token is not validated here:
// an invalid token gets its own bucket, which is what limits guessing.
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
