// Package httpapi is the tracking service's HTTP transport: the public
// /api/v1/track/* routes with their rate limits, CORS policy, optional
// program-key authentication and the spec's envelopes.
package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/auth/bearer"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/libs/ratelimit"
	"github.com/svc-dev/svc/services/tracking/internal/ingest/endpoints"
)

// Limits are the per-minute limits of the spec, per client IP. (The sale
// route, limited per API key together with refund, is the commissions
// service's.)
type Limits struct {
	Click, Lead, Visit, Config int
	// Preflight is the CORS preflights (OPTIONS on the four routes,
	// together) per client IP: beyond the spec's table, so a flood of
	// preflights with new origins cannot make a database query each.
	Preflight int
}

// DefaultLimits are the spec's Limits table, and the preflights'.
func DefaultLimits() Limits {
	return Limits{Click: 60, Lead: 30, Visit: 120, Config: 60, Preflight: DefaultPreflightLimit}
}

// DefaultPreflightLimit: a browser asks once per route and origin and
// keeps the answer 10 minutes (Access-Control-Max-Age 600), so a page
// needs a handful; 120 leaves room for many tabs behind one address.
const DefaultPreflightLimit = 120

// Limiters are the routes' rate limiters, built from Limits in the wiring
// (building one fails only on a limit out of range).
type Limiters struct {
	Click, Lead, Visit, Config, Preflight *ratelimit.Limiter
}

// NewLimiters builds one limiter per limited route.
func NewLimiters(l Limits, now func() time.Time) (Limiters, error) {
	var out Limiters
	for _, x := range []struct {
		name  string
		limit int
		into  **ratelimit.Limiter
	}{{"click", l.Click, &out.Click}, {"lead", l.Lead, &out.Lead}, {"visit", l.Visit, &out.Visit}, {"config", l.Config, &out.Config},
		{"preflight", l.Preflight, &out.Preflight}} {
		lim, err := ratelimit.New(ratelimit.Config{Limit: x.limit, Now: now})
		if err != nil {
			return Limiters{}, fmt.Errorf("%s rate limit: %w", x.name, err)
		}
		*x.into = lim
	}
	return out, nil
}

// Config carries what the transport needs besides the endpoints.
type Config struct {
	Logger   *slog.Logger
	Now      func() time.Time
	Keys     *apikey.Authenticator
	IPs      *httpkit.IPResolver
	Limiters Limiters
	OnLimit  func(route string)
	// Origins answers whether any program allows a browser origin (for
	// preflights and CORS headers; the program's own check is the
	// service's).
	Origins func(ctx context.Context, origin string) (bool, error)
	// InternalToken authenticates the other services on the /internal/v1
	// routes (its SHA-256 only; nil: not configured, those routes answer
	// 503).
	InternalToken bearer.Token
	// Extra routes served by the service (the browser tracker).
	Extra []httpkit.Route
}

// Routes lists every tracking route with its middleware.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	byIP := func(route string, l *ratelimit.Limiter) func(http.Handler) http.Handler {
		return ratelimit.Middleware(l, ratelimit.ByIP(cfg.IPs), ratelimit.WithRoute(route), ratelimit.WithOnRefuse(cfg.OnLimit))
	}
	server := func(e endpoint.Endpoint, dec kithttp.DecodeRequestFunc, errs routeErrors) http.Handler {
		ee := errorEncoder{logger: cfg.Logger, route: errs}.encode
		return kithttp.NewServer(e, dec, encodeResponse(ee), kithttp.ServerErrorEncoder(ee))
	}
	cors := corsPolicy{origins: cfg.Origins, logger: cfg.Logger}
	keyOptional := clickKey(cfg.Keys)
	leadKey := cfg.Keys.Middleware(apikey.LeadMessages(), errorEncoder{logger: cfg.Logger, route: leadErrors}.internal)

	// The limiter runs before the origin check (cors), on the routes and
	// their preflights alike: a new Origin costs a database query (cached
	// after), so a refused request must never reach it. A refused request
	// gets no CORS permission; the page cannot read a 429 either way.
	click := byIP("click", cfg.Limiters.Click)(cors.wrap(keyOptional(server(set.Click, decodeClick(cfg.Now), clickErrors))))
	lead := byIP("lead", cfg.Limiters.Lead)(cors.wrap(leadKey(server(set.Lead, decodeLead(cfg.Now), leadErrors))))
	visit := byIP("visit", cfg.Limiters.Visit)(cors.wrap(server(set.Visit, decodeVisit, visitErrors)))
	config := byIP("config", cfg.Limiters.Config)(cors.wrap(server(set.Config, decodeConfig, configErrors)))
	// One preflight bucket per client IP for the four routes.
	preflight := byIP("preflight", cfg.Limiters.Preflight)(cors.preflight())
	routes := []httpkit.Route{
		{Pattern: "POST /api/v1/track/click", Name: "track_click", Handler: click, LimitChecksURL: true},
		{Pattern: "POST /api/v1/track/lead", Name: "track_lead", Handler: lead, LimitChecksURL: true},
		{Pattern: "POST /api/v1/track/visit", Name: "track_visit", Handler: visit, LimitChecksURL: true},
		{Pattern: "GET /api/v1/track/config", Name: "track_config", Handler: config, LimitChecksURL: true},
		{Pattern: "OPTIONS /api/v1/track/click", Name: "track_preflight", Handler: preflight, LimitChecksURL: true},
		{Pattern: "OPTIONS /api/v1/track/lead", Name: "track_preflight", Handler: preflight, LimitChecksURL: true},
		{Pattern: "OPTIONS /api/v1/track/visit", Name: "track_preflight", Handler: preflight, LimitChecksURL: true},
		{Pattern: "OPTIONS /api/v1/track/config", Name: "track_preflight", Handler: preflight, LimitChecksURL: true},
	}
	// Internal: on tracking's own port only (neither the gateway nor the
	// Ingress routes /internal/), for the commissions service.
	attribution := bearer.InternalGuard(cfg.InternalToken, server(set.Attribution, decodeAttribution(cfg.Now), attributionErrors))
	routes = append(routes, httpkit.Route{Pattern: "POST " + AttributionsPath, Name: "internal_attribution", Handler: attribution})
	return append(routes, cfg.Extra...)
}

// encodeResponse writes an endpoint's response as the 200 body, or its
// business error through ee.
func encodeResponse(ee kithttp.ErrorEncoder) kithttp.EncodeResponseFunc {
	return func(ctx context.Context, w http.ResponseWriter, resp any) error {
		if f, ok := resp.(endpoint.Failer); ok && f.Failed() != nil {
			ee(ctx, f.Failed(), w)
			return nil
		}
		return httpkit.WriteJSON(w, http.StatusOK, resp)
	}
}

// clickKey recognises a program key on the click route without ever
// refusing: the key only unlocks visitor_ip and the test-mode program check.
// A key past its deadline is still recognised (and marked unusable) so the
// service can tell; one being rotated gets the rotation signalling.
func clickKey(a *apikey.Authenticator) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key, outcome, err := a.Authenticate(r.Context(), r)
			if err != nil || !(outcome.Authenticated() || outcome == apikey.OutcomeRetired) {
				next.ServeHTTP(w, r)
				return
			}
			r = r.WithContext(apikey.WithKey(r.Context(), key))
			if outcome != apikey.OutcomeRotating {
				next.ServeHTTP(w, r)
				return
			}
			rw := apikey.WithRotationWarnings(w, key, a.Now(), a.DocsURL)
			next.ServeHTTP(rw, r)
			_ = rw.Finish()
		})
	}
}

// corsPolicy lets browsers on an allowed origin call the browser-mode
// routes. Requests carrying Authorization are server mode and never get
// CORS permission.
type corsPolicy struct {
	origins func(ctx context.Context, origin string) (bool, error)
	logger  *slog.Logger
}

const exposedHeaders = "X-Request-ID, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After"

func (c corsPolicy) allowed(r *http.Request, origin string) bool {
	if origin == "" {
		return false
	}
	ok, err := c.origins(r.Context(), origin)
	if err != nil {
		c.logger.WarnContext(r.Context(), "origin check failed", "err", err)
		return false
	}
	return ok
}

func (c corsPolicy) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" {
			w.Header().Add("Vary", "Origin")
		}
		if r.Header.Get("Authorization") == "" && c.allowed(r, origin) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Expose-Headers", exposedHeaders)
		}
		next.ServeHTTP(w, r)
	})
}

func (c corsPolicy) preflight() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		h := w.Header()
		h.Add("Vary", "Origin")
		h.Add("Vary", "Access-Control-Request-Headers")
		wantsAuth := false
		for _, v := range strings.Split(r.Header.Get("Access-Control-Request-Headers"), ",") {
			if strings.EqualFold(strings.TrimSpace(v), "authorization") {
				wantsAuth = true
			}
		}
		// A browser asking to send Authorization is trying server mode:
		// answer without permission, so the browser refuses.
		if !wantsAuth && c.allowed(r, origin) {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type")
			h.Set("Access-Control-Max-Age", "600")
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
