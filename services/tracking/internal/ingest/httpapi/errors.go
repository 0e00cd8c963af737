package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// routeErrors is the data of one route's error answers: what a failure
// (5xx) says, and the route's error.code per kind when its contract has
// codes (the internal attributions route; the public tracking routes carry
// none).
type routeErrors struct {
	failMsg string
	codes   []kindCode
}

// kindCode gives error.code for errors wrapping kind (the first match wins,
// so a domain sentinel comes before the kind it wraps).
type kindCode struct {
	kind error
	code string
}

var (
	clickErrors  = routeErrors{failMsg: "Click tracking failed"}
	leadErrors   = routeErrors{failMsg: "Lead tracking failed"}
	visitErrors  = routeErrors{failMsg: "Visit tracking failed"}
	configErrors = routeErrors{failMsg: "Failed to load tracking config"}
)

const (
	codeInternal = "internal_error"
	codeInvalid  = "invalid_request" // any other 4xx of a coded route
)

// code is error.code for err answered with status, "" on routes without
// codes.
func (r routeErrors) code(status int, err error) string {
	if r.codes == nil {
		return ""
	}
	if status >= 500 {
		return codeInternal
	}
	for _, kc := range r.codes {
		if errors.Is(err, kc.kind) {
			return kc.code
		}
	}
	return codeInvalid
}

// statusOf is the status of err: a decoding failure's own (400, 413), else
// its kind's through errkind.Status, the one kind → status table.
func statusOf(err error) int {
	var de *httpkit.DecodeError
	if errors.As(err, &de) {
		return de.Status
	}
	return errkind.Status(err)
}

// errorEncoder is the service's one error encoder: status from the kind,
// the platform envelope with the route's message and code, the disabled
// link in its typed envelope, and any failure as the route's failMsg (the
// request id is in the X-Request-ID header; internals only in the log).
type errorEncoder struct {
	logger *slog.Logger
	route  routeErrors
}

func (e errorEncoder) encode(ctx context.Context, err error, w http.ResponseWriter) {
	status := statusOf(err)
	var opts []httpkit.EnvelopeOption
	if code := e.route.code(status, err); code != "" {
		opts = append(opts, httpkit.WithCode(code))
	}
	var be *ingest.Error
	var de *httpkit.DecodeError
	switch {
	case status >= 500:
		e.fail(ctx, w, err)
	case errors.Is(err, ingest.ErrLinkDisabled) && errors.As(err, &be):
		_ = httpkit.WriteTypedError(w, status, "link_disabled", be.Message, map[string]any{"hint": be.Hint},
			httpkit.WithTopLevel(map[string]any{"success": false, "message": be.Message}))
	case errors.As(err, &de):
		_ = httpkit.WritePlatformError(w, status, de.Message, opts...)
	case errors.As(err, &be):
		_ = httpkit.WritePlatformError(w, status, be.Message, opts...)
	default:
		// Not one of the routes' refusals: its text is internal (the
		// log's), the answer the route's 500.
		e.fail(ctx, w, err)
	}
}

// fail answers the route's 500 and logs the cause.
func (e errorEncoder) fail(ctx context.Context, w http.ResponseWriter, err error) {
	e.logger.ErrorContext(ctx, "tracking request failed", "err", err)
	var opts []httpkit.EnvelopeOption
	if code := e.route.code(http.StatusInternalServerError, err); code != "" {
		opts = append(opts, httpkit.WithCode(code))
	}
	_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, e.route.failMsg, opts...)
}

// internal answers a failure outside the endpoint (the key lookup of the
// auth middleware): always the route's 500, whatever err wraps.
func (e errorEncoder) internal(w http.ResponseWriter, r *http.Request, err error) {
	e.logger.ErrorContext(r.Context(), "tracking request failed", "err", err)
	var opts []httpkit.EnvelopeOption
	if code := e.route.code(http.StatusInternalServerError, err); code != "" {
		opts = append(opts, httpkit.WithCode(code))
	}
	_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, e.route.failMsg, opts...)
}
