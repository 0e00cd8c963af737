package attribution

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The answers tracking gives that the stack cannot easily produce: each
// status and body maps to one error of the caller's.
func TestDecodeResponseMapsEveryAnswer(t *testing.T) {
	t.Parallel()
	envelope := func(code, msg string) string {
		return `{"data":null,"error":{"status":0,"name":"X","message":"` + msg + `","code":"` + code + `"}}`
	}
	for _, c := range []struct {
		name   string
		status int
		body   string
		want   error
	}{
		{"503 not configured", 503, envelope("not_configured", "internal API not configured"), ErrUnavailable},
		{"500 attribution failed", 500, envelope("internal_error", "Attribution failed"), ErrUnavailable},
		{"502 from a proxy, not JSON", 502, "<html>bad gateway</html>", ErrUnavailable},
		{"401 wrong token", 401, envelope("unauthorized", "Invalid internal token"), ErrUnavailable},
		{"404 without tracking's code (not tracking at TRACKING_URL)", 404, envelope("", "No route for POST /internal/v1/attributions"), ErrUnavailable},
		{"404 customer not found", 404, envelope("customer_not_found", "Customer not found. Provide customer_key or click_id."), ErrCustomerNotFound},
		{"409 (tracking keeps decisions per program and never answers it)", 409, envelope("duplicate_transaction", "?"), ErrUnavailable},
		{"400 invalid", 400, envelope("invalid_request", "Unknown program_id"), ErrInvalid},
		{"413 too large", 413, envelope("", "Request body too large"), ErrInvalid},
		{"200 without data", 200, `{"data":null}`, ErrUnavailable},
		{"200 with an unknown outcome", 200, `{"data":{"outcome":"maybe"}}`, ErrUnavailable},
		{"200 not JSON", 200, `ok`, ErrUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := decodeResponse(context.Background(), &http.Response{StatusCode: c.status, Body: io.NopCloser(strings.NewReader(c.body))})
			var e *Error
			if !errors.Is(err, c.want) || !errors.As(err, &e) || e.Status != c.status {
				t.Fatalf("%v, want %v with status %d", err, c.want, c.status)
			}
		})
	}
	d, err := decodeResponse(context.Background(), &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(
		`{"data":{"outcome":"refused","customer_id":3,"click_id":"c","partner_id":4,"link_id":5,"customer_status":"click","refusal":{"code":"no_attribution","message":"m"},"replayed":true}}`))})
	if err != nil || d.(Decision).Refusal.Message != "m" || !d.(Decision).Replayed || d.(Decision).PartnerID != 4 {
		t.Fatalf("%+v %v", d, err)
	}
}
