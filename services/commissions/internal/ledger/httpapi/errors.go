package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
)

// Status is the ledger transport's one error → status table: a decoding
// problem keeps its own status (400, 413), a field error is 400, and
// otherwise the kind decides (errkind.Status: invalid 400, not found 404,
// conflict 409, unprocessable 422, anything else 500).
func Status(err error) int {
	var de *httpkit.DecodeError
	var fe *httpkit.FieldError
	switch {
	case errors.As(err, &de):
		return de.Status
	case errors.As(err, &fe):
		return http.StatusBadRequest
	}
	return errkind.Status(err)
}

// errorEncoder writes every failure in the platform envelope; a field's
// name goes in details.field. A 5xx never shows its cause: it is logged.
type errorEncoder struct{ logger *slog.Logger }

func (e errorEncoder) encode(ctx context.Context, err error, w http.ResponseWriter) {
	status := Status(err)
	if status >= http.StatusInternalServerError {
		if e.logger != nil {
			e.logger.ErrorContext(ctx, "admin request failed", "request_id", httpkit.RequestIDFrom(ctx), "err", err)
		}
		_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, "Internal server error")
		return
	}
	message := clientMessage(err)
	var opts []httpkit.EnvelopeOption
	var de *httpkit.DecodeError
	var fe *httpkit.FieldError
	switch {
	case errors.As(err, &de):
		message = de.Message
		if de.Field != "" {
			opts = append(opts, httpkit.WithDetail("field", de.Field))
		}
	case errors.As(err, &fe):
		message = fe.Error()
		opts = append(opts, httpkit.WithDetail("field", fe.Field))
	}
	_ = httpkit.WritePlatformError(w, status, message, opts...)
}

// clientMessage is a domain error's text without its kind's own word (a
// sentinel reads "commission not found: not found"): the status already
// says it.
func clientMessage(err error) string {
	kind := errkind.Of(err).Error()
	parts := strings.Split(err.Error(), ": ")
	kept := parts[:0]
	for _, p := range parts {
		if p != kind {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ": ")
}
