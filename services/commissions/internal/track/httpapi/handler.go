// Package httpapi is the HTTP transport of POST /api/v1/track/sale and POST
// /api/v1/track/refund: the program-key check with the spec's messages, one
// rate-limit bucket per key shared by both routes, the test key's refund
// answer, the decoders and the platform envelope with error.code.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-kit/kit/endpoint"
	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/commissions/internal/track"
	"github.com/svc-dev/svc/services/commissions/internal/track/endpoints"
)

// Paths of the routes.
const (
	SalePath   = "/api/v1/track/sale"
	RefundPath = "/api/v1/track/refund"
)

// Config carries what the transport needs besides the endpoints.
type Config struct {
	Logger *slog.Logger
	Now    func() time.Time
	Keys   *apikey.Authenticator
	// Limit is the one bucket per API key of sale and refund together (the
	// spec's 120/min combined); it runs after the key check, so only a key
	// that authenticated gets a bucket.
	Limit func(http.Handler) http.Handler
	// FailedAuth wraps the key check: a client IP whose 401s used up its
	// allowance is refused before any key lookup.
	FailedAuth func(http.Handler) http.Handler
}

// Routes lists the sale and refund routes with their middleware.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	server := func(e endpoint.Endpoint, dec kithttp.DecodeRequestFunc, errs routeErrors) http.Handler {
		enc := errorEncoder{logger: cfg.Logger, route: errs}.encode
		return kithttp.NewServer(e, dec, encodeResponse(enc), httpkit.ServerOptions(enc, cfg.Logger)...)
	}
	guard := func(m apikey.Messages, errs routeErrors, next http.Handler) http.Handler {
		key := cfg.Keys.Middleware(m, errorEncoder{logger: cfg.Logger, route: errs}.internal)
		return cfg.FailedAuth(key(cfg.Limit(next)))
	}
	sale := guard(apikey.SaleMessages(), saleErrors, server(set.Sale, decodeSale(cfg.Now), saleErrors))
	refund := guard(apikey.RefundMessages(), refundErrors, testKeyRefund(server(set.Refund, decodeRefund, refundErrors)))
	return []httpkit.Route{
		{Pattern: "POST " + SalePath, Name: "track_sale", Handler: sale, Refuse: httpkit.CodedRefusal(codeInvalid), LimitChecksURL: true},
		{Pattern: "POST " + RefundPath, Name: "track_refund", Handler: refund, Refuse: httpkit.CodedRefusal(codeInvalid), LimitChecksURL: true},
	}
}

// testKeyRefund answers a test key's refund before its body is read or
// its sale looked up: nothing is refunded.
func testKeyRefund(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if k, ok := apikey.KeyFrom(r.Context()); ok && k.Test {
			_ = httpkit.WriteJSON(w, http.StatusOK, endpoints.TestKeyRefund())
			return
		}
		next.ServeHTTP(w, r)
	})
}

// encodeResponse writes an endpoint's response as the 200 body, or its
// refusal through enc.
func encodeResponse(enc kithttp.ErrorEncoder) kithttp.EncodeResponseFunc {
	return func(ctx context.Context, w http.ResponseWriter, resp any) error {
		if f, ok := resp.(endpoint.Failer); ok && f.Failed() != nil {
			enc(ctx, f.Failed(), w)
			return nil
		}
		return httpkit.WriteJSON(w, http.StatusOK, resp)
	}
}

// routeErrors is one route's error.code per kind (first match wins) and
// the message of its failures.
type routeErrors struct {
	failMsg string
	codes   []kindCode
}

type kindCode struct {
	kind error
	code string
}

// The specification's stable codes of the sale and refund routes.
var (
	saleErrors = routeErrors{failMsg: track.MsgSaleFailed, codes: []kindCode{
		{track.ErrNoAttribution, "no_attribution"},
		{errkind.Conflict, "duplicate_transaction"},
		{errkind.Unprocessable, "unsupported_currency"},
		{errkind.Unauthenticated, "unauthorized"},
		{errkind.NotFound, "not_found"},
	}}
	refundErrors = routeErrors{failMsg: track.MsgRefundFailed, codes: []kindCode{
		{errkind.Unauthenticated, "unauthorized"},
		{errkind.NotFound, "not_found"},
	}}
)

const (
	codeInternal = "internal_error"
	codeInvalid  = "invalid_request" // any other 4xx
)

func (r routeErrors) code(status int, err error) string {
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

// errorEncoder writes every failure in the platform envelope with the
// route's error.code. A 5xx says the route's failure message (or the
// track.Error's own, "Failed to create commission"); internals go to the
// log only, the request id is in X-Request-ID.
type errorEncoder struct {
	logger *slog.Logger
	route  routeErrors
}

func (e errorEncoder) encode(ctx context.Context, err error, w http.ResponseWriter) {
	status := errkind.Status(err)
	var de *httpkit.DecodeError
	if errors.As(err, &de) {
		status = de.Status
	}
	opts := []httpkit.EnvelopeOption{httpkit.WithCode(e.route.code(status, err))}
	var te *track.Error
	switch {
	case status < 500 && errors.As(err, &de):
		_ = httpkit.WritePlatformError(w, status, de.Message, opts...)
	case status == http.StatusConflict && errors.As(err, &te) && te.SaleID != 0:
		_ = httpkit.WritePlatformError(w, status, te.Message, append(opts, httpkit.WithDetail("sale_id", te.SaleID))...)
	case status < 500 && status != http.StatusConflict && errors.As(err, &te):
		_ = httpkit.WritePlatformError(w, status, te.Message, opts...)
	default:
		// A 5xx, or an error that is not one of the route's refusals (a
		// 409 without the sale that stands, an error of another layer):
		// the route's 500. Its text is for the log, never the client.
		e.logger.ErrorContext(ctx, "track request failed", "err", err)
		msg := e.route.failMsg
		if errors.As(err, &te) && status >= 500 {
			msg = te.Message
		}
		_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, msg, httpkit.WithCode(codeInternal))
	}
}

// internal answers a failure of the key lookup: the route's 500.
func (e errorEncoder) internal(w http.ResponseWriter, r *http.Request, err error) {
	e.logger.ErrorContext(r.Context(), "track request failed", "err", err)
	_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, e.route.failMsg, httpkit.WithCode(codeInternal))
}
