// Package httperr is accounts' one error encoder. Status is the one table:
// a decoding problem's own status, the two answers that are no error kind
// (the sync barrier's timeout, 504; a counted rate limit, 429), and
// otherwise the kind's status through errkind.Status. The envelope is the
// platform's; what differs between route groups (the 500 message, the
// request id in it, details.field) is data of the group (Route), not
// another table.
package httperr

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/libs/ratelimit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
	"github.com/svc-dev/svc/services/accounts/internal/integration"
)

// Status is the service's one error → HTTP status table.
func Status(err error) int {
	var de *httpkit.DecodeError
	switch {
	case errors.As(err, &de):
		return de.Status
	case errors.Is(err, catalog.ErrSyncTimeout):
		// A real timeout of a wait the client asked for, not Unavailable.
		return http.StatusGatewayTimeout
	case errors.Is(err, integration.ErrRateLimited):
		return http.StatusTooManyRequests
	}
	return errkind.Status(err)
}

// Route is how one route group answers failures.
type Route struct {
	// Fail is the message of a 500 ("Internal server error" when empty);
	// FailFor, when set, picks it per error (an operation's name).
	Fail    string
	FailFor func(error) string
	// RequestID writes a 500 as "<Fail> (request_id: <id>)" with
	// details.request_id (the command-line routes).
	RequestID bool
	// FieldDetails names the field of a validation error in details.field
	// (the admin API).
	FieldDetails bool
	// Logger, with FailureLog, logs the cause of every 500 this encoder
	// writes (routes whose go-kit error handler does not), and with
	// UnauthenticatedLog every 401 refusal at info (why an id_token was
	// refused is for the operator, not the client).
	Logger             *slog.Logger
	FailureLog         string
	UnauthenticatedLog string
}

// Failure encodes a decoding or endpoint error (go-kit's ServerErrorEncoder):
// a request problem gets its status and message; anything that would be a
// 5xx is an infrastructure failure and answers the route's 500, whatever
// kind it wraps.
func (rt Route) Failure(ctx context.Context, err error, w http.ResponseWriter) {
	if Status(err) >= http.StatusInternalServerError {
		rt.fail(ctx, err, w)
		return
	}
	rt.Refusal(ctx, err, w)
}

// Refusal encodes a business error carried in an endpoint's response
// (endpoint.Failer) or found by a middleware: its kind's status and its
// client message. Only an error of no kind (Internal) answers the route's
// 500; the 503 of an unconfigured feature and the sync barrier's 504 say
// what happened.
func (rt Route) Refusal(ctx context.Context, err error, w http.ResponseWriter) {
	status := Status(err)
	switch status {
	case http.StatusInternalServerError:
		rt.fail(ctx, err, w)
		return
	case http.StatusTooManyRequests:
		writeRateLimited(w, err)
		return
	case http.StatusUnauthorized:
		if rt.UnauthenticatedLog != "" && rt.Logger != nil {
			rt.Logger.InfoContext(ctx, rt.UnauthenticatedLog, "err", err)
		}
	}
	var (
		message = err.Error()
		opts    []httpkit.EnvelopeOption
		de      *httpkit.DecodeError
		fe      *catalog.FieldError
		hfe     *httpkit.FieldError
		ie      *identity.Error
		ke      *catalog.KeyExistsError
	)
	switch {
	case errors.As(err, &de):
		message = de.Message
		if rt.FieldDetails && de.Field != "" {
			opts = append(opts, httpkit.WithDetail("field", de.Field))
		}
	case errors.As(err, &fe):
		message = fe.Message
		if rt.FieldDetails {
			opts = append(opts, httpkit.WithDetail("field", fe.Field))
		}
	case errors.As(err, &hfe):
		message = hfe.Error()
		if rt.FieldDetails {
			opts = append(opts, httpkit.WithDetail("field", hfe.Field))
		}
	case errors.As(err, &ie):
		message = ie.Message
		if ie.Code != "" {
			opts = append(opts, httpkit.WithDetail("code", ie.Code))
		}
	case errors.As(err, &ke):
		// Admin-only routes: naming the stored key lets a client that
		// imports a fixed key recognise its own.
		opts = append(opts, httpkit.WithDetail("key_id", ke.KeyID), httpkit.WithDetail("program_id", ke.ProgramID))
	}
	_ = httpkit.WritePlatformError(w, status, message, opts...)
}

// fail writes the route's 500; the cause is logged, never sent.
func (rt Route) fail(ctx context.Context, err error, w http.ResponseWriter) {
	if rt.FailureLog != "" && rt.Logger != nil {
		rt.Logger.ErrorContext(ctx, rt.FailureLog, "err", err)
	}
	msg := rt.Fail
	if rt.FailFor != nil {
		if m := rt.FailFor(err); m != "" {
			msg = m
		}
	}
	if msg == "" {
		msg = "Internal server error"
	}
	if rt.RequestID {
		_ = httpkit.WriteServerErrorWithRequestID(ctx, w, msg)
		return
	}
	_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, msg)
}

// writeRateLimited writes a counted limit's typed 429 with Retry-After.
func writeRateLimited(w http.ResponseWriter, err error) {
	secs := ratelimit.RetryAfterSeconds(retryAfter(err))
	w.Header().Set(ratelimit.HeaderRetryAfter, strconv.Itoa(secs))
	_ = httpkit.WriteTypedError(w, http.StatusTooManyRequests, ratelimit.CodeRateLimited, limitMessage(err, secs),
		map[string]any{"retry_after_seconds": secs}, httpkit.WithStatusField())
}

func retryAfter(err error) time.Duration {
	var chain *integration.ChainLimitError
	var up *integration.UpstreamLimitError
	switch {
	case errors.As(err, &chain):
		return chain.RetryAfter
	case errors.As(err, &up):
		return up.RetryAfter
	}
	return time.Second
}

func limitMessage(err error, secs int) string {
	var chain *integration.ChainLimitError
	var up *integration.UpstreamLimitError
	switch {
	case errors.As(err, &chain):
		return chain.Error()
	case errors.As(err, &up) && up.Message != "":
		return up.Message
	}
	return ratelimit.RefusalMessage(secs)
}
