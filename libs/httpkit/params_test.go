package httpkit_test

import (
	"errors"
	"net/http/httptest"
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
