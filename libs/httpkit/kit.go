package httpkit

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/go-kit/kit/endpoint"
	"github.com/go-kit/kit/transport"
	kithttp "github.com/go-kit/kit/transport/http"
)

// ServerOptions returns the options every go-kit HTTP server of a service
// gets: the service's single error encoder, and transport errors logged
// through slog (go-kit would otherwise log through its own logger, which we
// do not use). extra options are appended.
//
// Request ids and client IPs are not go-kit options: they are net/http
// middlewares (RequestID, (*IPResolver).Middleware) wrapped around the whole
// handler, and go-kit passes r.Context() on to decoders, endpoints and
// encoders, so RequestIDFrom and ClientIPFrom work inside them.
func ServerOptions(errorEncoder kithttp.ErrorEncoder, logger *slog.Logger, extra ...kithttp.ServerOption) []kithttp.ServerOption {
	if errorEncoder == nil {
		errorEncoder = EncodePlatformError
	}
	opts := []kithttp.ServerOption{
		kithttp.ServerErrorEncoder(errorEncoder),
		kithttp.ServerErrorHandler(SlogErrorHandler(logger)),
	}
	return append(opts, extra...)
}

// SlogErrorHandler logs errors go-kit reports (decode, endpoint, encode
// failures) with the request id. Client errors (4xx by KindStatus) log at
// debug level, so a flood of bad requests does not flood the logs; the rest
// at error level.
func SlogErrorHandler(logger *slog.Logger) transport.ErrorHandler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return transport.ErrorHandlerFunc(func(ctx context.Context, err error) {
		status := KindStatus(err)
		level := slog.LevelError
		if status < http.StatusInternalServerError {
			level = slog.LevelDebug
		}
		logger.Log(ctx, level, "http transport error",
			slog.String("request_id", RequestIDFrom(ctx)),
			slog.Int("status", status),
			slog.Any("err", err))
	})
}

// NewResponseEncoder returns a go-kit response encoder: a response that
// implements endpoint.Failer with a non-nil error (a business error carried
// in the response, per house style) goes to errorEncoder; otherwise the
// response is written as JSON with status 200, or the status given by its
// StatusCode() method (kithttp.StatusCoder), plus any headers from its
// Headers() method (kithttp.Headerer).
func NewResponseEncoder(errorEncoder kithttp.ErrorEncoder) kithttp.EncodeResponseFunc {
	if errorEncoder == nil {
		errorEncoder = EncodePlatformError
	}
	return func(ctx context.Context, w http.ResponseWriter, response any) error {
		if f, ok := response.(endpoint.Failer); ok && f.Failed() != nil {
			errorEncoder(ctx, f.Failed(), w)
			return nil
		}
		if h, ok := response.(kithttp.Headerer); ok {
			for k, values := range h.Headers() {
				for _, v := range values {
					w.Header().Add(k, v)
				}
			}
		}
		status := http.StatusOK
		if sc, ok := response.(kithttp.StatusCoder); ok {
			status = sc.StatusCode()
		}
		return WriteJSON(w, status, response)
	}
}

// RefuseNULQuery wraps a go-kit request decoder: a query parameter holding
// the NUL character is refused with CheckValuesNUL's 400 before dec runs
// (Postgres text cannot hold U+0000, so it would fail the query as a 500).
// Route groups whose decoders read query values wrap every decoder with it.
func RefuseNULQuery(dec kithttp.DecodeRequestFunc) kithttp.DecodeRequestFunc {
	return func(ctx context.Context, r *http.Request) (any, error) {
		if err := CheckValuesNUL(r.URL.Query()); err != nil {
			return nil, err
		}
		return dec(ctx, r)
	}
}
