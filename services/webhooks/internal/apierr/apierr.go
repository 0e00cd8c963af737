// Package apierr is the webhooks service's one error table: the refusal
// its use cases return (a kind of libs/errkind, the message the client
// reads, the field of a 400) and the encoder every route of the service
// answers errors with, so the console's endpoint routes and svc listen's
// word and shape refusals alike.
package apierr

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
)

// Error is a refusal with the message the client reads; Field names the
// parameter or field of a 400 (details.field).
type Error struct {
	Kind    error
	Message string
	Field   string
}

func (e *Error) Error() string { return e.Message }

// Unwrap gives the kind.
func (e *Error) Unwrap() error { return e.Kind }

// Encoder writes an error in the platform envelope: a refusal with its
// kind's status (errkind.Status) and message, a decoding problem with its
// own status (400, 413) and message, a field's name in details.field.
// Anything else is the route's 500 with Fail as its message; its cause is
// logged (under Log) with the request id, never shown.
type Encoder struct {
	Logger *slog.Logger
	Fail   string
	Log    string
}

// Encode is a go-kit error encoder.
func (e Encoder) Encode(ctx context.Context, err error, w http.ResponseWriter) {
	var de *httpkit.DecodeError
	var fe *httpkit.FieldError
	var ae *Error
	status, message := http.StatusInternalServerError, ""
	var opts []httpkit.EnvelopeOption
	switch {
	case errors.As(err, &ae):
		status, message = errkind.Status(ae), ae.Message
		if ae.Field != "" {
			opts = append(opts, httpkit.WithDetail("field", ae.Field))
		}
	case errors.As(err, &de):
		status, message = de.Status, de.Message
		if de.Field != "" {
			opts = append(opts, httpkit.WithDetail("field", de.Field))
		}
	case errors.As(err, &fe):
		status, message = http.StatusBadRequest, fe.Error()
		opts = append(opts, httpkit.WithDetail("field", fe.Field))
	}
	if status == http.StatusInternalServerError {
		e.Logger.ErrorContext(ctx, e.Log, "request_id", httpkit.RequestIDFrom(ctx), "err", err)
		_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, e.Fail)
		return
	}
	_ = httpkit.WritePlatformError(w, status, message, opts...)
}
