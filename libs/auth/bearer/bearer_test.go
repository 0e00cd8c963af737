package bearer_test

import (
	"net/http/httptest"
	"testing"

	"github.com/svc-dev/svc/libs/auth/bearer"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		token  string
		header string
		want   bearer.Result
	}{
		{"the token", "s3cret", "Bearer s3cret", bearer.OK},
		{"no header", "s3cret", "", bearer.Missing},
		{"another scheme", "s3cret", "Basic czNjcmV0", bearer.Missing},
		{"lower-case scheme", "s3cret", "bearer s3cret", bearer.Missing},
		{"wrong token", "s3cret", "Bearer s3cre", bearer.Invalid},
		{"token with a suffix", "s3cret", "Bearer s3cret ", bearer.Invalid},
		{"empty credential", "s3cret", "Bearer ", bearer.Invalid},
		{"unconfigured refuses the empty credential", "", "Bearer ", bearer.Invalid},
		{"unconfigured refuses anything", "", "Bearer x", bearer.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := bearer.New(tt.token)
			if tok.Configured() != (tt.token != "") {
				t.Fatalf("Configured = %v", tok.Configured())
			}
			r := httptest.NewRequest("GET", "/", nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			if got := tok.Check(r); got != tt.want {
				t.Fatalf("Check = %v, want %v", got, tt.want)
			}
		})
	}
}
