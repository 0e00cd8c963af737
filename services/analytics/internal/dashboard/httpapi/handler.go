// Package httpapi is the dashboard routes' HTTP transport:
// GET /api/tracking/{performance,status,sources,partners}/{programId},
// behind a dashboard session token (Authorization: Bearer <token>,
// verified locally with accounts' public key, and refused when the catalog
// replica says it was signed out or its user suspended; CLI login tokens
// and program API keys are not sessions), in the platform envelope; and
// GET /api/v1/programs/me/analytics/sources with a program API key, in
// the typed envelope (keyroute.go).
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/analytics/internal/dashboard"
	"github.com/svc-dev/svc/services/analytics/internal/dashboard/endpoints"
)

// Paths of the routes.
const (
	PathPerformance = "/api/tracking/performance/"
	PathStatus      = "/api/tracking/status/"
	PathSources     = "/api/tracking/sources/"
	PathPartners    = "/api/tracking/partners/"
	// PathActivity is ours (not the spec's): the console's latest real
	// click and lead.
	PathActivity = "/api/tracking/activity/"
)

// Config carries what the transport needs besides the endpoints.
type Config struct {
	// Sessions checks dashboard session tokens against the replica's
	// revocations and suspensions; nil accepts none (every caller is
	// signed out).
	Sessions *session.Checker
	Logger   *slog.Logger
}

// Routes lists the dashboard routes.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	enc := errorEncoder{logger: cfg.Logger}
	opts := httpkit.ServerOptions(enc.encode, cfg.Logger)
	h := func(e func(context.Context, any) (any, error), dec kithttp.DecodeRequestFunc) http.Handler {
		return kithttp.NewServer(e, httpkit.RefuseNULQuery(dec), encodeResponse(enc), opts...)
	}
	return []httpkit.Route{
		{Pattern: "GET " + PathPerformance + "{programId}", Name: "dashboard_performance", Handler: h(set.Performance, decodePerformance(cfg.Sessions))},
		{Pattern: "GET " + PathStatus + "{programId}", Name: "dashboard_status", Handler: h(set.Status, decodeStatus(cfg.Sessions))},
		{Pattern: "GET " + PathSources + "{programId}", Name: "dashboard_sources", Handler: h(set.Sources, decodeSources(cfg.Sessions))},
		{Pattern: "GET " + PathPartners + "{programId}", Name: "dashboard_partners", Handler: h(set.Partners, decodeSources(cfg.Sessions))},
		{Pattern: "GET " + PathActivity + "{programId}", Name: "dashboard_activity", Handler: h(set.Activity, decodeStatus(cfg.Sessions))},
	}
}

// userID is the dashboard session's user, 0 when the request carries no
// session that stands (the use case answers as the spec says for each
// route); an error is a failed revocation lookup.
func userID(c *session.Checker, r *http.Request) (int64, error) {
	token, res := apikey.ParseBearer(r.Header.Get("Authorization"))
	if res != apikey.ParseOK || c == nil {
		return 0, nil
	}
	claims, err := c.Check(r.Context(), token)
	if errors.Is(err, session.ErrInvalidToken) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return claims.UserID, nil
}

// programID reads the path's id: a positive integer, else 0 (no such
// program).
func programID(r *http.Request) (int64, string) {
	raw := r.PathValue("programId")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 || strings.HasPrefix(raw, "+") {
		return 0, raw
	}
	return id, raw
}

func decodePerformance(c *session.Checker) kithttp.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		uid, err := userID(c, r)
		if err != nil {
			return nil, err
		}
		id, _ := programID(r)
		return endpoints.PerformanceRequest{UserID: uid, ProgramID: id, RangeQuery: rangeQuery(r)}, nil
	}
}

// rangeQuery reads period, dateFrom, dateTo and timezone.
func rangeQuery(r *http.Request) dashboard.RangeQuery {
	q := r.URL.Query()
	return dashboard.RangeQuery{Period: q.Get("period"), DateFrom: q.Get("dateFrom"), DateTo: q.Get("dateTo"), TimeZone: q.Get("timezone")}
}

// decodeSources reads a dashboard sources or partners request.
func decodeSources(c *session.Checker) kithttp.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		uid, err := userID(c, r)
		if err != nil {
			return nil, err
		}
		id, _ := programID(r)
		return endpoints.SourcesRequest{UserID: uid, ProgramID: id, Limit: r.URL.Query().Get("limit"), RangeQuery: rangeQuery(r)}, nil
	}
}

func decodeStatus(c *session.Checker) kithttp.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		uid, err := userID(c, r)
		if err != nil {
			return nil, err
		}
		id, raw := programID(r)
		return endpoints.StatusRequest{UserID: uid, ProgramID: id, RawID: raw}, nil
	}
}

// encodeResponse writes a success, or the business error an endpoint's
// response carries.
func encodeResponse(enc errorEncoder) kithttp.EncodeResponseFunc {
	return func(ctx context.Context, w http.ResponseWriter, resp any) error {
		if f, ok := resp.(interface{ Failed() error }); ok && f.Failed() != nil {
			enc.encode(ctx, f.Failed(), w)
			return nil
		}
		return httpkit.WriteJSON(w, http.StatusOK, resp)
	}
}

// errorEncoder is the service's one error table: a decoding problem keeps
// its status, otherwise the kind decides (invalid 400, unauthenticated
// 401, forbidden 403, not found 404); anything else is 500 with the spec's
// word and its cause logged, never shown.
type errorEncoder struct{ logger *slog.Logger }

func (e errorEncoder) encode(ctx context.Context, err error, w http.ResponseWriter) {
	status := errkind.Status(err)
	var de *httpkit.DecodeError
	if errors.As(err, &de) {
		status = de.Status
	}
	if status >= http.StatusInternalServerError {
		if e.logger != nil {
			e.logger.ErrorContext(ctx, "dashboard request failed", "request_id", httpkit.RequestIDFrom(ctx), "err", err)
		}
		_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, "Internal server error")
		return
	}
	message := err.Error()
	if de != nil {
		message = de.Message
	} else if kind := errkind.Of(err); kind != nil {
		message = strings.TrimSuffix(message, ": "+kind.Error())
	}
	_ = httpkit.WritePlatformError(w, status, message)
}
