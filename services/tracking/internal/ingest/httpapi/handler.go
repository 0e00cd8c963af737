// Package httpapi is the tracking service's HTTP transport: the public
// /api/v1/track/* routes with their rate limits, CORS policy, optional
// program-key authentication and the spec's envelopes.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/libs/ratelimit"
	"github.com/svc-dev/svc/services/tracking/internal/ingest/endpoints"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// Route is one HTTP route, named for metrics.
type Route struct {
	Pattern string
	Name    string
	Handler http.Handler
}

// Limits are the per-minute limits of the spec: per client IP, and for
// Sale (shared with refund) per API key.
type Limits struct {
	Click, Lead, Visit, Config, Sale int
}

// DefaultLimits are the spec's Limits table.
func DefaultLimits() Limits { return Limits{Click: 60, Lead: 30, Visit: 120, Config: 60, Sale: 120} }

// Config carries what the transport needs besides the endpoints.
type Config struct {
	Logger  *slog.Logger
	Now     func() time.Time
	Keys    *apikey.Authenticator
	IPs     *httpkit.IPResolver
	Limits  Limits
	OnLimit func(route string)
	// Origins answers whether any program allows a browser origin (for
	// preflights and CORS headers; the program's own check is the
	// service's).
	Origins func(ctx context.Context, origin string) (bool, error)
	// ProcessorSecret verifies payment-processor webhook signatures; the
	// webhook route is served only when it is set.
	ProcessorSecret string
	// Extra routes served by the service (the browser tracker).
	Extra []Route
}

// Routes lists every tracking route with its middleware.
func Routes(set endpoints.Set, cfg Config) ([]Route, error) {
	limited := func(route string, limit int) (func(http.Handler) http.Handler, error) {
		l, err := ratelimit.New(ratelimit.Config{Limit: limit, Now: cfg.Now})
		if err != nil {
			return nil, err
		}
		return ratelimit.Middleware(l, ratelimit.ByIP(cfg.IPs), ratelimit.WithRoute(route), ratelimit.WithOnRefuse(cfg.OnLimit)), nil
	}
	coded := func(e func(context.Context, any) (any, error), dec kithttp.DecodeRequestFunc, enc kithttp.EncodeResponseFunc, failMsg string, code func(int, error) string) http.Handler {
		ee := encodeError(cfg.Logger, failMsg, code)
		return kithttp.NewServer(e, dec, func(ctx context.Context, w http.ResponseWriter, resp any) error {
			r := resp.(endpoints.Response)
			if r.Err != nil {
				ee(ctx, r.Err, w)
				return nil
			}
			return enc(ctx, w, r.Value)
		}, kithttp.ServerErrorEncoder(ee))
	}
	server := func(e func(context.Context, any) (any, error), dec kithttp.DecodeRequestFunc, enc kithttp.EncodeResponseFunc, failMsg string) http.Handler {
		return coded(e, dec, enc, failMsg, nil)
	}
	clickLimit, err := limited("click", cfg.Limits.Click)
	if err != nil {
		return nil, err
	}
	leadLimit, err := limited("lead", cfg.Limits.Lead)
	if err != nil {
		return nil, err
	}
	visitLimit, err := limited("visit", cfg.Limits.Visit)
	if err != nil {
		return nil, err
	}
	configLimit, err := limited("config", cfg.Limits.Config)
	if err != nil {
		return nil, err
	}
	saleLimiter, err := ratelimit.New(ratelimit.Config{Limit: cfg.Limits.Sale, Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	// The spec counts sale and refund together: a refund route served here
	// must use this limiter too.
	saleLimit := ratelimit.Middleware(saleLimiter, ratelimit.BearerOrIP(cfg.IPs), ratelimit.WithRoute("sale"), ratelimit.WithOnRefuse(cfg.OnLimit))
	cors := corsPolicy{origins: cfg.Origins, logger: cfg.Logger}
	keyOptional := clickKey(cfg.Keys)
	leadKey := cfg.Keys.Middleware(apikey.LeadMessages(), internalError(cfg.Logger, "Lead tracking failed", ""))
	saleKey := cfg.Keys.Middleware(apikey.SaleMessages(), internalError(cfg.Logger, "Sale tracking failed", "internal_error"))

	click := cors.wrap(clickLimit(keyOptional(server(set.Click, decodeClick(cfg.Now), encodeClick, "Click tracking failed"))))
	lead := cors.wrap(leadLimit(leadKey(server(set.Lead, decodeLead(cfg.Now), encodeLead, "Lead tracking failed"))))
	visit := cors.wrap(visitLimit(server(set.Visit, decodeVisit, encodeVisit, "Visit tracking failed")))
	config := cors.wrap(configLimit(server(set.Config, decodeConfig, encodeConfig, "Failed to load tracking config")))
	sale := saleLimit(saleKey(coded(set.Sale, decodeSale(cfg.Now), encodeSale, "Sale tracking failed", saleCode)))
	routes := []Route{
		{"POST /api/v1/track/click", "track_click", click},
		{"POST /api/v1/track/sale", "track_sale", sale},
		{"POST /api/v1/track/lead", "track_lead", lead},
		{"POST /api/v1/track/visit", "track_visit", visit},
		{"GET /api/v1/track/config", "track_config", config},
		{"OPTIONS /api/v1/track/click", "track_preflight", cors.preflight()},
		{"OPTIONS /api/v1/track/lead", "track_preflight", cors.preflight()},
		{"OPTIONS /api/v1/track/visit", "track_preflight", cors.preflight()},
		{"OPTIONS /api/v1/track/config", "track_preflight", cors.preflight()},
	}
	if cfg.ProcessorSecret != "" {
		hook := coded(set.ProcessorEvent, decodeProcessorEvent(cfg.ProcessorSecret, cfg.Now), encodeProcessorEvent,
			"Processor event handling failed", nil)
		routes = append(routes, Route{"POST " + ProcessorWebhookPath, "processor_webhook", hook})
	}
	return append(routes, cfg.Extra...), nil
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

func encodeClick(_ context.Context, w http.ResponseWriter, v any) error {
	out := v.(ingest.ClickOutput)
	if out.Test != nil {
		return httpkit.WriteJSON(w, http.StatusOK, testBody(out.Test))
	}
	return httpkit.WriteJSON(w, http.StatusOK, map[string]any{
		"success": true, "click_id": out.ClickID, "partner_code": out.PartnerCode, "cookie_window_days": out.CookieWindowDays,
	})
}

func testBody(t *ingest.TestEvent) map[string]any {
	return map[string]any{
		"success": true, "message": t.Message,
		"data": map[string]any{"eventId": t.EventID, "programId": t.ProgramID, "test_mode": true},
	}
}

func encodeLead(_ context.Context, w http.ResponseWriter, v any) error {
	out := v.(ingest.LeadOutput)
	switch {
	case out.Test != nil:
		return httpkit.WriteJSON(w, http.StatusOK, testBody(out.Test))
	case out.Provisional:
		return httpkit.WriteJSON(w, http.StatusOK, map[string]any{"success": true, "provisional": true, "message": out.Message})
	}
	return httpkit.WriteJSON(w, http.StatusOK, map[string]any{"success": true, "message": out.Message})
}

func encodeVisit(_ context.Context, w http.ResponseWriter, _ any) error {
	return httpkit.WriteJSON(w, http.StatusOK, map[string]any{"success": true})
}

func encodeConfig(_ context.Context, w http.ResponseWriter, v any) error {
	p := v.(ingest.Program)
	return httpkit.WriteJSON(w, http.StatusOK, map[string]any{
		"success":               true,
		"program_id":            p.ID,
		"cookie_window_days":    p.AttributionWindowDays,
		"lead_auth_policy":      p.LeadAuthPolicy,
		"browser_leads_allowed": p.LeadAuthPolicy == "browser_allowed",
	})
}

// statusOf is the service's one table from error kind to status.
func statusOf(err error) int {
	var de *httpkit.DecodeError
	switch {
	case errors.As(err, &de):
		return de.Status
	case errors.Is(err, ingest.ErrInvalid), errors.Is(err, httpkit.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ingest.ErrUnauthorized):
		return http.StatusUnauthorized
	case errors.Is(err, ingest.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, ingest.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ingest.ErrGone):
		return http.StatusGone
	case errors.Is(err, ingest.ErrNoAttribution):
		return http.StatusBadRequest
	case errors.Is(err, ingest.ErrDuplicate):
		return http.StatusConflict
	case errors.Is(err, ingest.ErrUnsupported):
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// saleCode is error.code of the sale route's platform envelope (the
// specification's stable codes); the other tracking routes carry none.
func saleCode(status int, err error) string {
	switch {
	case status >= 500:
		return "internal_error"
	case errors.Is(err, ingest.ErrNoAttribution):
		return "no_attribution"
	case status == http.StatusConflict:
		return "duplicate_transaction"
	case status == http.StatusUnprocessableEntity:
		return "unsupported_currency"
	case status == http.StatusUnauthorized:
		return "unauthorized"
	case status == http.StatusNotFound:
		return "not_found"
	}
	return "invalid_request"
}

// encodeError writes business errors in the platform envelope, the disabled
// link in its typed one, and any failure as failMsg (the request id is in
// the X-Request-ID header; internals only in the log). code, when set,
// gives error.code.
func encodeError(logger *slog.Logger, failMsg string, code func(int, error) string) kithttp.ErrorEncoder {
	return func(ctx context.Context, err error, w http.ResponseWriter) {
		status := statusOf(err)
		var opts []httpkit.EnvelopeOption
		if code != nil {
			opts = append(opts, httpkit.WithCode(code(status, err)))
		}
		var be *ingest.Error
		var de *httpkit.DecodeError
		switch {
		case status == http.StatusGone && errors.As(err, &be):
			_ = httpkit.WriteTypedError(w, status, "link_disabled", be.Message, map[string]any{"hint": be.Hint},
				httpkit.WithTopLevel(map[string]any{"success": false, "message": be.Message}))
		case status >= 500:
			logger.ErrorContext(ctx, "tracking request failed", "err", err)
			_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, failMsg, opts...)
		case errors.As(err, &de):
			_ = httpkit.WritePlatformError(w, status, de.Message, opts...)
		case errors.As(err, &be) && be.SaleID != 0:
			_ = httpkit.WritePlatformError(w, status, be.Message, append(opts, httpkit.WithDetail("sale_id", be.SaleID))...)
		default:
			_ = httpkit.WritePlatformError(w, status, err.Error(), opts...)
		}
	}
}

func internalError(logger *slog.Logger, failMsg, code string) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		logger.ErrorContext(r.Context(), "tracking request failed", "err", err)
		var opts []httpkit.EnvelopeOption
		if code != "" {
			opts = append(opts, httpkit.WithCode(code))
		}
		_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, failMsg, opts...)
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
