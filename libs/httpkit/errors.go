package httpkit

import (
	"context"
	"errors"
	"net/http"

	"github.com/svc-dev/svc/libs/errkind"
)

// Error kinds: the errkind vocabulary under the names transport code has
// always used (the same values, so errors.Is matches either name). Domain
// packages import errkind, which needs nothing but the standard library.
var (
	ErrInvalid         = errkind.Invalid
	ErrUnauthenticated = errkind.Unauthenticated
	ErrForbidden       = errkind.Forbidden
	ErrNotFound        = errkind.NotFound
	ErrConflict        = errkind.Conflict
	ErrGone            = errkind.Gone
	ErrUnprocessable   = errkind.Unprocessable
	ErrUnavailable     = errkind.Unavailable
	ErrInternal        = errkind.Internal
)

// KindStatus maps an error to its HTTP status: a *DecodeError or *FieldError
// gives its own status, otherwise the first kind found with errors.Is decides;
// nil gives 200 and anything unrecognised 500.
func KindStatus(err error) int {
	if err == nil {
		return http.StatusOK
	}
	var de *DecodeError
	if errors.As(err, &de) {
		return de.Status
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return http.StatusBadRequest
	}
	return errkind.Status(err)
}

// Error is a kinded error carrying what the client may see: Message is shown
// as error.message even on 5xx, so put only client-safe text in it and keep
// internals in Cause (logged, never written).
type Error struct {
	Kind    error
	Message string
	Code    string
	Details map[string]any
	Cause   error
}

// NewError returns an *Error of the given kind with a client-facing message.
func NewError(kind error, message string) *Error {
	return &Error{Kind: kind, Message: message}
}

// WithCode returns a copy carrying error.code.
func (e *Error) WithCode(code string) *Error {
	c := *e
	c.Code = code
	return &c
}

// WithDetail returns a copy with one more error.details entry.
func (e *Error) WithDetail(key string, value any) *Error {
	c := *e
	c.Details = make(map[string]any, len(e.Details)+1)
	for k, v := range e.Details {
		c.Details[k] = v
	}
	c.Details[key] = value
	return &c
}

// WithCause returns a copy wrapping the internal cause.
func (e *Error) WithCause(cause error) *Error {
	c := *e
	c.Cause = cause
	return &c
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" && e.Kind != nil {
		msg = e.Kind.Error()
	}
	if e.Cause != nil {
		return msg + ": " + e.Cause.Error()
	}
	return msg
}

// Unwrap exposes both the kind and the cause to errors.Is/As.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

// StatusCode lets go-kit's DefaultErrorEncoder pick the status too. An
// Error without a kind is a server failure.
func (e *Error) StatusCode() int {
	if e.Kind == nil {
		return http.StatusInternalServerError
	}
	return KindStatus(e.Kind)
}

// EncodePlatformError is a go-kit ErrorEncoder writing the platform envelope:
// status from KindStatus; message, code and details from an *Error, or the
// message of a *DecodeError or *FieldError. Any other error gets the status
// text as message, so internal error text never reaches the client. Services
// needing other envelopes or messages write their own encoder with the
// Write* functions and may fall back to this one.
func EncodePlatformError(_ context.Context, err error, w http.ResponseWriter) {
	status := KindStatus(err)
	message := http.StatusText(status)
	var opts []EnvelopeOption
	var e *Error
	var de *DecodeError
	var fe *FieldError
	switch {
	case errors.As(err, &e):
		if e.Message != "" {
			message = e.Message
		}
		opts = append(opts, WithCode(e.Code), WithDetails(e.Details))
	case errors.As(err, &de):
		message = de.Message
	case errors.As(err, &fe):
		message = fe.Error()
	}
	_ = WritePlatformError(w, status, message, opts...)
}
