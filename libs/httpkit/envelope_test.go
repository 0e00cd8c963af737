package httpkit_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/svc-dev/svc/libs/httpkit"
)

func TestStatusNameMatchesContract(t *testing.T) {
	tests := []struct {
		status int
		want   string
	}{
		{400, "BadRequestError"},
		{401, "UnauthorizedError"},
		{403, "ForbiddenError"},
		{404, "NotFoundError"},
		{409, "ConflictError"},
		{410, "GoneError"},
		{413, "PayloadTooLargeError"},
		{415, "UnsupportedMediaTypeError"},
		{422, "UnprocessableEntityError"},
		{429, "TooManyRequestsError"},
		{500, "InternalServerError"},
		{503, "ServiceUnavailableError"},
		{504, "GatewayTimeoutError"},
		{405, "MethodNotAllowedError"},
		{408, "RequestTimeoutError"},
		{418, "ImATeapotError"},
		{502, "BadGatewayError"},
		{299, "Error"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			if got := httpkit.StatusName(tt.status); got != tt.want {
				t.Errorf("StatusName(%d) = %q, want %q", tt.status, got, tt.want)
			}
		})
	}
}

func TestWritePlatformErrorExactBytes(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		message string
		opts    []httpkit.EnvelopeOption
		want    string
	}{
		{
			name:    "refund not found with code",
			status:  404,
			message: "Sale not found for transaction_id",
			opts:    []httpkit.EnvelopeOption{httpkit.WithCode("not_found")},
			want:    `{"data":null,"error":{"status":404,"name":"NotFoundError","message":"Sale not found for transaction_id","details":{},"code":"not_found"}}`,
		},
		{
			name:    "no code omits the key and details stay an object",
			status:  400,
			message: "affiliate_url is required",
			want:    `{"data":null,"error":{"status":400,"name":"BadRequestError","message":"affiliate_url is required","details":{}}}`,
		},
		{
			name:    "angle brackets are not escaped",
			status:  401,
			message: "Missing or malformed Authorization header. Expected: Bearer <token>",
			opts:    []httpkit.EnvelopeOption{httpkit.WithCode("unauthorized")},
			want:    `{"data":null,"error":{"status":401,"name":"UnauthorizedError","message":"Missing or malformed Authorization header. Expected: Bearer <token>","details":{},"code":"unauthorized"}}`,
		},
		{
			name:    "duplicate sale names the sale in details",
			status:  409,
			message: "Duplicate transaction_id. This sale has already been recorded.",
			opts:    []httpkit.EnvelopeOption{httpkit.WithCode("duplicate_transaction"), httpkit.WithDetail("sale_id", 42)},
			want:    `{"data":null,"error":{"status":409,"name":"ConflictError","message":"Duplicate transaction_id. This sale has already been recorded.","details":{"sale_id":42},"code":"duplicate_transaction"}}`,
		},
		{
			name:    "CLI login refusal carries its code in details",
			status:  403,
			message: "Your account has been suspended.",
			opts:    []httpkit.EnvelopeOption{httpkit.WithDetails(map[string]any{"code": "ACCOUNT_BLOCKED"})},
			want:    `{"data":null,"error":{"status":403,"name":"ForbiddenError","message":"Your account has been suspended.","details":{"code":"ACCOUNT_BLOCKED"}}}`,
		},
		{
			name:    "details keys sorted and top-level siblings after error",
			status:  500,
			message: "Failed to get status (request_id: abc)",
			opts: []httpkit.EnvelopeOption{
				httpkit.WithDetails(map[string]any{"request_id": "abc", "b": true}),
				httpkit.WithTopLevel(map[string]any{"warnings": []string{}, "data": "ignored", "error": "ignored"}),
			},
			want: `{"data":null,"error":{"status":500,"name":"InternalServerError","message":"Failed to get status (request_id: abc)","details":{"b":true,"request_id":"abc"}},"warnings":[]}`,
		},
		{
			name:    "typed-only option is ignored",
			status:  422,
			message: "currency GBP is not supported",
			opts:    []httpkit.EnvelopeOption{httpkit.WithStatusField(), httpkit.WithCode("unsupported_currency")},
			want:    `{"data":null,"error":{"status":422,"name":"UnprocessableEntityError","message":"currency GBP is not supported","details":{},"code":"unsupported_currency"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if err := httpkit.WritePlatformError(rec, tt.status, tt.message, tt.opts...); err != nil {
				t.Fatalf("WritePlatformError: %v", err)
			}
			assertResponse(t, rec, tt.status, tt.want)
		})
	}
}

func TestWriteTypedErrorExactBytes(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		code    string
		message string
		extra   map[string]any
		opts    []httpkit.EnvelopeOption
		want    string
	}{
		{
			name:    "readiness invalid key",
			status:  401,
			code:    "invalid_key",
			message: "Missing or malformed Authorization header. Expected: Bearer <api_token>.",
			want:    `{"error":{"code":"invalid_key","message":"Missing or malformed Authorization header. Expected: Bearer <api_token>."}}`,
		},
		{
			name:    "readiness internal error with retry",
			status:  500,
			code:    "internal_error",
			message: "Failed to compute readiness. Retry shortly.",
			extra:   map[string]any{"retry_after_seconds": 10},
			want:    `{"error":{"code":"internal_error","message":"Failed to compute readiness. Retry shortly.","retry_after_seconds":10}}`,
		},
		{
			name:    "rate limited carries status first",
			status:  429,
			code:    "rate_limited",
			message: "Too many requests. Retry after 7 seconds.",
			extra:   map[string]any{"retry_after_seconds": 7},
			opts:    []httpkit.EnvelopeOption{httpkit.WithStatusField()},
			want:    `{"error":{"status":429,"code":"rate_limited","message":"Too many requests. Retry after 7 seconds.","retry_after_seconds":7}}`,
		},
		{
			name:    "retired key extras sorted",
			status:  401,
			code:    "api_key_rotation_required",
			message: "This API key was retired.",
			extra:   map[string]any{"hint": "Rotate the key.", "docs_url": "https://docs.example/rotate?a=1&b=2"},
			want:    `{"error":{"code":"api_key_rotation_required","message":"This API key was retired.","docs_url":"https://docs.example/rotate?a=1&b=2","hint":"Rotate the key."}}`,
		},
		{
			name:    "click link disabled keeps top-level success and message",
			status:  410,
			code:    "link_disabled",
			message: "This referral link is disabled.",
			extra:   map[string]any{"hint": "Ask the partner for a new link."},
			opts:    []httpkit.EnvelopeOption{httpkit.WithTopLevel(map[string]any{"success": false, "message": "This referral link is disabled."})},
			want:    `{"error":{"code":"link_disabled","message":"This referral link is disabled.","hint":"Ask the partner for a new link."},"message":"This referral link is disabled.","success":false}`,
		},
		{
			name:    "extras cannot override envelope fields",
			status:  400,
			code:    "x",
			message: "m",
			extra:   map[string]any{"code": "y", "message": "n", "status": 1, "z": nil},
			want:    `{"error":{"code":"x","message":"m","z":null}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if err := httpkit.WriteTypedError(rec, tt.status, tt.code, tt.message, tt.extra, tt.opts...); err != nil {
				t.Fatalf("WriteTypedError: %v", err)
			}
			assertResponse(t, rec, tt.status, tt.want)
		})
	}
}

func TestWriteJSONUnencodableValueGivesCleanInternalError(t *testing.T) {
	rec := httptest.NewRecorder()
	err := httpkit.WriteJSON(rec, http.StatusOK, map[string]any{"c": make(chan int)})
	if err == nil {
		t.Fatal("WriteJSON of a channel: want error, got nil")
	}
	assertResponse(t, rec, 500, `{"data":null,"error":{"status":500,"name":"InternalServerError","message":"Internal Server Error","details":{}}}`)
}

func TestWriteJSONWritesCompactBodyWithoutNewline(t *testing.T) {
	rec := httptest.NewRecorder()
	if err := httpkit.WriteJSON(rec, http.StatusCreated, map[string]any{"b": "<x>&", "a": 1}); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	assertResponse(t, rec, 201, `{"a":1,"b":"<x>&"}`)
}

func TestKindStatus(t *testing.T) {
	notFoundSale := fmt.Errorf("sale: %w", httpkit.ErrNotFound)
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 200},
		{"invalid", httpkit.ErrInvalid, 400},
		{"unauthenticated", httpkit.ErrUnauthenticated, 401},
		{"forbidden", httpkit.ErrForbidden, 403},
		{"wrapped not found", fmt.Errorf("load sale 1: %w", notFoundSale), 404},
		{"conflict", httpkit.ErrConflict, 409},
		{"gone", httpkit.ErrGone, 410},
		{"unprocessable", httpkit.ErrUnprocessable, 422},
		{"unavailable", httpkit.ErrUnavailable, 503},
		{"internal", httpkit.ErrInternal, 500},
		{"unknown", errors.New("boom"), 500},
		{"Error kind", httpkit.NewError(httpkit.ErrGone, "retired"), 410},
		{"Error wrapped", fmt.Errorf("x: %w", httpkit.NewError(httpkit.ErrConflict, "dup")), 409},
		{"Error with cause keeps kind", httpkit.NewError(httpkit.ErrUnavailable, "down").WithCause(errors.New("dial")), 503},
		{"decode error", &httpkit.DecodeError{Status: 413, Message: "big"}, 413},
		{"field error", &httpkit.FieldError{Field: "a", Want: "a string"}, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := httpkit.KindStatus(tt.err); got != tt.want {
				t.Errorf("KindStatus(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestErrorUnwrapsKindAndCause(t *testing.T) {
	cause := errors.New("pg: connection refused")
	err := fmt.Errorf("refund: %w", httpkit.NewError(httpkit.ErrInternal, "Refund tracking failed").WithCode("internal_error").WithCause(cause))
	if !errors.Is(err, httpkit.ErrInternal) {
		t.Error("errors.Is(err, ErrInternal) = false")
	}
	if !errors.Is(err, cause) {
		t.Error("errors.Is(err, cause) = false")
	}
	var e *httpkit.Error
	if !errors.As(err, &e) || e.Code != "internal_error" {
		t.Errorf("errors.As: got %+v", e)
	}
}

func TestErrorStatusCode(t *testing.T) {
	tests := []struct {
		name string
		err  *httpkit.Error
		want int
	}{
		{"kind decides", httpkit.NewError(httpkit.ErrForbidden, "no"), 403},
		{"no kind is a server failure", &httpkit.Error{Message: "x"}, 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.StatusCode(); got != tt.want {
				t.Errorf("StatusCode = %d, want %d", got, tt.want)
			}
			if got := httpkit.KindStatus(tt.err); got != tt.want {
				t.Errorf("KindStatus = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestErrorWithDetailDoesNotShareMaps(t *testing.T) {
	base := httpkit.NewError(httpkit.ErrConflict, "dup").WithDetail("a", 1)
	derived := base.WithDetail("b", 2)
	if len(base.Details) != 1 || len(derived.Details) != 2 {
		t.Errorf("base details %v, derived details %v", base.Details, derived.Details)
	}
}

func TestEncodePlatformError(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		want   string
	}{
		{
			name:   "kinded error with code and details",
			err:    fmt.Errorf("record sale: %w", httpkit.NewError(httpkit.ErrConflict, "Duplicate transaction_id. This sale has already been recorded.").WithCode("duplicate_transaction").WithDetail("sale_id", 7)),
			status: 409,
			want:   `{"data":null,"error":{"status":409,"name":"ConflictError","message":"Duplicate transaction_id. This sale has already been recorded.","details":{"sale_id":7},"code":"duplicate_transaction"}}`,
		},
		{
			name:   "unknown error does not leak its text",
			err:    errors.New("pq: password authentication failed for user svc"),
			status: 500,
			want:   `{"data":null,"error":{"status":500,"name":"InternalServerError","message":"Internal Server Error","details":{}}}`,
		},
		{
			name:   "bare kind gives status text",
			err:    fmt.Errorf("lookup: %w", httpkit.ErrNotFound),
			status: 404,
			want:   `{"data":null,"error":{"status":404,"name":"NotFoundError","message":"Not Found","details":{}}}`,
		},
		{
			name:   "decode error",
			err:    &httpkit.DecodeError{Status: 400, Message: httpkit.MsgUnsupportedMediaType},
			status: 400,
			want:   `{"data":null,"error":{"status":400,"name":"BadRequestError","message":"Content-Type must be application/json","details":{}}}`,
		},
		{
			name:   "field error",
			err:    &httpkit.FieldError{Field: "livemode", Want: "a boolean"},
			status: 400,
			want:   `{"data":null,"error":{"status":400,"name":"BadRequestError","message":"livemode must be a boolean","details":{}}}`,
		},
		{
			name:   "internal cause stays out of the body",
			err:    httpkit.NewError(httpkit.ErrInternal, "Sale tracking failed").WithCode("internal_error").WithCause(errors.New("deadlock detected")),
			status: 500,
			want:   `{"data":null,"error":{"status":500,"name":"InternalServerError","message":"Sale tracking failed","details":{},"code":"internal_error"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			httpkit.EncodePlatformError(t.Context(), tt.err, rec)
			assertResponse(t, rec, tt.status, tt.want)
		})
	}
}

func assertResponse(t *testing.T, rec *httptest.ResponseRecorder, status int, body string) {
	t.Helper()
	if rec.Code != status {
		t.Errorf("status = %d, want %d", rec.Code, status)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if got := rec.Body.String(); got != body {
		t.Errorf("body\n got: %s\nwant: %s", got, body)
	}
}

func TestWriteServerErrorWithRequestID(t *testing.T) {
	h := httpkit.RequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = httpkit.WriteServerErrorWithRequestID(r.Context(), w, "Failed to get status")
	}))
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("X-Request-ID", "req-123")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	want := `{"data":null,"error":{"status":500,"name":"InternalServerError","message":"Failed to get status (request_id: req-123)","details":{"request_id":"req-123"}}}`
	if rec.Code != 500 || rec.Body.String() != want || rec.Header().Get("X-Request-ID") != "req-123" {
		t.Fatalf("%d %s %v", rec.Code, rec.Body.String(), rec.Header())
	}
}
