package obs_test

import (
	"log/slog"
	"testing"

	"github.com/svc-dev/svc/libs/obs"
)

func TestRedactString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"plain text untouched", "sale recorded for program 7", "sale recorded for program 7"},
		{"url without password untouched", "https://example.com/a@b", "https://example.com/a@b"},
		{"url with user only untouched", "postgres://app@db/svc", "postgres://app@db/svc"},
		{"dsn password masked", "postgres://app:pw@db:5432/svc?sslmode=disable", "postgres://app:***@db:5432/svc?sslmode=disable"},
		{"dsn inside quotes", `dial "postgres://app:pw@db/svc": refused`, `dial "postgres://app:***@db/svc": refused`},
		{"two urls", "a://u:p@h b://v:q@i", "a://u:***@h b://v:***@i"},
		{"unparsable password", "postgres://app:p%zz#@db/svc", "postgres://app:***@db/svc"},
		{"keyword dsn", "host=db password=pw dbname=svc", "host=db password=*** dbname=svc"},
		{"keyword dsn quoted", "host=db password='p w' dbname=svc", "host=db password=*** dbname=svc"},
		{"bearer", "Authorization: Bearer abc.def-ghi", "Authorization: Bearer ***"},
		{"live key", "key svc_live_AbC123_-xyz used", "key svc_live_*** used"},
		{"test key", "svc_test_AbC123", "svc_test_***"},
		{"bare prefix kept", "keys look like svc_live_", "keys look like svc_live_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := obs.RedactString(tt.in); got != tt.want {
				t.Errorf("RedactString(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestIsSecretKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  string
		want bool
	}{
		{"token", true},
		{"access_token", true},
		{"API_KEY", true},
		{"x-api-key", true},
		{"Authorization", true},
		{"password", true},
		{"SESSION_SIGNING_KEY", true},
		{"client_secret", true},
		{"cookie", true},
		{"customer_key", false},
		{"key", false},
		{"program_id", false},
		{"request_id", false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			if got := obs.IsSecretKey(tt.key); got != tt.want {
				t.Errorf("IsSecretKey(%q) = %v, want %v", tt.key, got, tt.want)
			}
		})
	}
}

func TestRedact_LeavesNonSecretAttrsIntact(t *testing.T) {
	t.Parallel()
	tests := []slog.Attr{
		slog.Int("program_id", 7),
		slog.String("customer_key", "cust-42"),
		slog.Bool("test", true),
	}
	for _, a := range tests {
		if got := obs.Redact(nil, a); !got.Equal(a) {
			t.Errorf("Redact(%v) = %v, want unchanged", a, got)
		}
	}
}
