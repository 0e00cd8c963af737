package httpkit_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/httpkit"
)

func TestPathIDTakesPlainPositiveDigitsOnly(t *testing.T) {
	for v, want := range map[string]int64{"1": 1, "42": 42, "9223372036854775807": 9223372036854775807, "": 0, "0": 0, "-1": 0,
		"+1": 0, "1e3": 0, "01x": 0, "9223372036854775808": 0, " 1": 0} {
		r := httptest.NewRequest("GET", "/", nil)
		r.SetPathValue("id", v)
		if got := httpkit.PathID(r, "id"); got != want {
			t.Errorf("PathID(%q) = %d, want %d", v, got, want)
		}
	}
}

func TestQueryRefusesUnknownRepeatedAndNUL(t *testing.T) {
	tests := []struct {
		raw, field, message string
	}{
		{raw: "status=x&cursor=c"},
		{raw: "zeta=1&alpha=2", field: "alpha", message: "Unknown parameter: alpha. Send status, cursor"},
		{raw: "status=a&status=b", field: "status", message: "status must be sent once"},
		{raw: "%ff=1", field: "\xff", message: `Unknown parameter: "\xff". Send status, cursor`},
		{raw: "status=a%00b", field: "status", message: "status must not contain the NUL character"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/?"+tt.raw, nil)
		q, err := httpkit.Query(r, "status", "cursor")
		if tt.message == "" {
			if err != nil || q["status"] != "x" || q["cursor"] != "c" {
				t.Errorf("%s: %v %v", tt.raw, q, err)
			}
			continue
		}
		var fe *httpkit.FieldError
		var de *httpkit.DecodeError
		switch {
		case errors.As(err, &fe):
			if fe.Field != tt.field || fe.Error() != tt.message {
				t.Errorf("%s: field %q, %q; want %q, %q", tt.raw, fe.Field, fe.Error(), tt.field, tt.message)
			}
		case errors.As(err, &de):
			if de.Field != tt.field || de.Message != tt.message || de.Status != 400 {
				t.Errorf("%s: %+v", tt.raw, de)
			}
		default:
			t.Errorf("%s: %v, want a refusal", tt.raw, err)
		}
	}
	if got := httpkit.UnknownMessage("field", "x", nil); got != "Unknown field: x. Send none" {
		t.Errorf("no field taken: %q", got)
	}
}

func TestDecodeKnownObject(t *testing.T) {
	tests := []struct {
		body     string
		optional bool
		status   int
		message  string
	}{
		{body: `{"url":"x"}`},
		{body: ``, optional: true},
		{body: ` `, status: 400, message: "Request body is required"},
		{body: `{"url":"x","zap":1}`, status: 400, message: "Unknown field: zap. Send url, events"},
		{body: "{\"url\":\"\xff\"}", status: 400, message: "the body is not valid UTF-8"},
		{body: `{"url":"` + strings.Repeat("a", 70) + `"}`, status: 413, message: "Request body must not exceed 64 bytes"},
		{body: `[1]`, status: 400},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/", strings.NewReader(tt.body))
		r.Header.Set("Content-Type", "application/json")
		_, err := httpkit.DecodeKnownObject(r, 64, tt.optional, "url", "events")
		if tt.status == 0 {
			if err != nil {
				t.Errorf("%q: %v", tt.body, err)
			}
			continue
		}
		status, message := 0, ""
		var fe *httpkit.FieldError
		var de *httpkit.DecodeError
		switch {
		case errors.As(err, &fe):
			status, message = fe.StatusCode(), fe.Error()
		case errors.As(err, &de):
			status, message = de.Status, de.Message
		}
		if status != tt.status || (tt.message != "" && message != tt.message) {
			t.Errorf("%q: %d %q (%v), want %d %q", tt.body, status, message, err, tt.status, tt.message)
		}
	}
}
