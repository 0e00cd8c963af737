package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/analytics/internal/dashboard/endpoints"
)

// PathKeySources is the sources route of a program API key.
const PathKeySources = "/api/v1/programs/me/analytics/sources"

// Typed errors of the key route besides apikey's invalid_key.
const (
	CodeInvalidRequest = "invalid_request"
	CodeInternal       = "internal_error"
	MsgKeyInternal     = "Failed to compute sources. Retry shortly."
	// RetryAfterSeconds is the 500's retry_after_seconds, as readiness.
	RetryAfterSeconds = 10
)

// KeyConfig carries what the key route needs besides the endpoints.
type KeyConfig struct {
	Keys   *apikey.Authenticator
	Logger *slog.Logger
	// Limit is the per-key rate limit (30/min), run after the key check.
	Limit func(http.Handler) http.Handler
	// FailedAuth wraps the key check (readiness shares it): a client IP
	// whose 401s used up its allowance is refused before any key lookup.
	FailedAuth func(http.Handler) http.Handler
}

// KeyRoutes lists GET /api/v1/programs/me/analytics/sources: the key's
// own program, the typed envelope of readiness.
func KeyRoutes(set endpoints.Set, cfg KeyConfig) []httpkit.Route {
	fail := func(ctx context.Context, err error, w http.ResponseWriter) {
		var de *httpkit.DecodeError
		if errors.As(err, &de) {
			_ = httpkit.WriteTypedError(w, de.Status, CodeInvalidRequest, de.Message, nil)
			return
		}
		if errkind.Status(err) == http.StatusBadRequest {
			msg := strings.TrimSuffix(err.Error(), ": "+errkind.Of(err).Error())
			_ = httpkit.WriteTypedError(w, http.StatusBadRequest, CodeInvalidRequest, msg, nil)
			return
		}
		if cfg.Logger != nil {
			cfg.Logger.ErrorContext(ctx, "sources failed", "request_id", httpkit.RequestIDFrom(ctx), "err", err)
		}
		_ = httpkit.WriteTypedError(w, http.StatusInternalServerError, CodeInternal, MsgKeyInternal, map[string]any{"retry_after_seconds": RetryAfterSeconds})
	}
	encode := func(ctx context.Context, w http.ResponseWriter, resp any) error {
		if f, ok := resp.(interface{ Failed() error }); ok && f.Failed() != nil {
			fail(ctx, f.Failed(), w)
			return nil
		}
		return httpkit.WriteJSON(w, http.StatusOK, resp)
	}
	decode := func(ctx context.Context, r *http.Request) (any, error) {
		k, _ := apikey.KeyFrom(ctx)
		return endpoints.SourcesRequest{ProgramID: k.ProgramID, ViaKey: true, Limit: r.URL.Query().Get("limit"), RangeQuery: rangeQuery(r)}, nil
	}
	srv := kithttp.NewServer(set.Sources, httpkit.RefuseNULQuery(decode), encode, httpkit.ServerOptions(fail, cfg.Logger)...)
	auth := cfg.Keys.Middleware(apikey.ReadinessMessages(), func(w http.ResponseWriter, r *http.Request, err error) { fail(r.Context(), err, w) })
	h := http.Handler(srv)
	if cfg.Limit != nil {
		h = cfg.Limit(h)
	}
	h = auth(h)
	if cfg.FailedAuth != nil {
		h = cfg.FailedAuth(h)
	}
	return []httpkit.Route{{Pattern: "GET " + PathKeySources, Name: "sources", Handler: h, Refuse: httpkit.TypedRefusal,
		// The limiter refuses a URL that is not UTF-8 after its headers.
		LimitChecksURL: cfg.Limit != nil}}
}
