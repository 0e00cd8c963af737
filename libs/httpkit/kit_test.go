package httpkit_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/httpkit"
)

type refundRequest struct{ TransactionID string }

type refundResponse struct {
	Success bool   `json:"success"`
	Status  string `json:"status,omitempty"`
	Err     error  `json:"-"`
}

func (r refundResponse) Failed() error { return r.Err }

type createdResponse struct {
	ID int `json:"id"`
}

func (createdResponse) StatusCode() int { return http.StatusCreated }

func (createdResponse) Headers() http.Header { return http.Header{"Location": {"/things/1"}} }

var errSaleNotFound = httpkit.NewError(httpkit.ErrNotFound, "Sale not found for transaction_id").WithCode("not_found")

// newRefundServer mimics a service transport: decode with DecodeObject,
// business errors in the response, one error encoder.
func newRefundServer(logger *slog.Logger, seenID *string) http.Handler {
	endpoint := func(ctx context.Context, request any) (any, error) {
		*seenID = httpkit.RequestIDFrom(ctx)
		req := request.(refundRequest)
		switch req.TransactionID {
		case "missing":
			return refundResponse{Err: errSaleNotFound}, nil
		case "broken":
			return nil, errors.New("pg: connection refused")
		}
		return refundResponse{Success: true, Status: "reversed"}, nil
	}
	decode := func(_ context.Context, r *http.Request) (any, error) {
		obj, err := httpkit.DecodeObject(r, 0)
		if err != nil {
			return nil, err
		}
		id, ok, err := obj.String("transaction_id")
		if !ok || err != nil {
			return nil, httpkit.NewError(httpkit.ErrInvalid, "transaction_id is required").WithCode("invalid_request")
		}
		return refundRequest{TransactionID: id}, nil
	}
	srv := kithttp.NewServer(endpoint, decode, httpkit.NewResponseEncoder(httpkit.EncodePlatformError),
		httpkit.ServerOptions(httpkit.EncodePlatformError, logger)...)
	return httpkit.RequestID(srv)
}

func TestGoKitServerWiring(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		body        string
		status      int
		want        string
		logged      string
	}{
		{"success", "application/json", `{"transaction_id":"t1"}`, 200, `{"success":true,"status":"reversed"}`, ""},
		{"business error in response", "application/json", `{"transaction_id":"missing"}`, 404,
			`{"data":null,"error":{"status":404,"name":"NotFoundError","message":"Sale not found for transaction_id","details":{},"code":"not_found"}}`, ""},
		{"decode error from the service", "application/json", `{}`, 400,
			`{"data":null,"error":{"status":400,"name":"BadRequestError","message":"transaction_id is required","details":{},"code":"invalid_request"}}`, "level=DEBUG"},
		{"decode error from the lib", "text/plain", `x`, 400,
			`{"data":null,"error":{"status":400,"name":"BadRequestError","message":"Content-Type must be application/json","details":{}}}`, "level=DEBUG"},
		{"infrastructure error hidden", "application/json", `{"transaction_id":"broken"}`, 500,
			`{"data":null,"error":{"status":500,"name":"InternalServerError","message":"Internal Server Error","details":{}}}`, "level=ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			var seenID string
			h := newRefundServer(logger, &seenID)
			req := jsonRequest(tt.body, tt.contentType)
			req.Header.Set(httpkit.HeaderRequestID, "req-1")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			assertResponse(t, rec, tt.status, tt.want)
			if got := rec.Header().Get(httpkit.HeaderRequestID); got != "req-1" {
				t.Errorf("X-Request-ID = %q", got)
			}
			if tt.logged == "" {
				if seenID != "req-1" {
					t.Errorf("endpoint saw request id %q", seenID)
				}
				return
			}
			if !strings.Contains(logs.String(), tt.logged) || !strings.Contains(logs.String(), "request_id=req-1") {
				t.Errorf("log %q lacks %q and request_id", logs.String(), tt.logged)
			}
		})
	}
}

func TestResponseEncoderHonoursStatusCoderAndHeaderer(t *testing.T) {
	rec := httptest.NewRecorder()
	enc := httpkit.NewResponseEncoder(nil)
	if err := enc(t.Context(), rec, createdResponse{ID: 1}); err != nil {
		t.Fatal(err)
	}
	assertResponse(t, rec, 201, `{"id":1}`)
	if rec.Header().Get("Location") != "/things/1" {
		t.Errorf("Location = %q", rec.Header().Get("Location"))
	}
}
