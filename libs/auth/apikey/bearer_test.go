package apikey_test

import (
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/auth/apikey"
)

func TestParseBearer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		header    string
		wantToken string
		wantRes   apikey.ParseResult
	}{
		{"header absent", "", "", apikey.ParseMissing},
		{"other scheme", "Basic dXNlcjpwdw==", "", apikey.ParseMissing},
		{"lowercase scheme is malformed", "bearer svc_live_x", "", apikey.ParseMissing},
		{"uppercase scheme is malformed", "BEARER svc_live_x", "", apikey.ParseMissing},
		{"no space after scheme", "Bearersvc_live_x", "", apikey.ParseMissing},
		{"token without scheme", "svc_live_x", "", apikey.ParseMissing},
		{"leading space", " Bearer svc_live_x", "", apikey.ParseMissing},
		{"scheme with one space and nothing", "Bearer ", "", apikey.ParseEmpty},
		{"scheme with spaces only", "Bearer    ", "", apikey.ParseEmpty},
		{"scheme with tab", "Bearer \t", "", apikey.ParseEmpty},
		{"bare scheme (trailing space trimmed by the server)", "Bearer", "", apikey.ParseEmpty},
		{"token", "Bearer svc_live_abc", "svc_live_abc", apikey.ParseOK},
		{"token with extra spaces", "Bearer   svc_live_abc  ", "svc_live_abc", apikey.ParseOK},
		{"token with inner space kept", "Bearer a b", "a b", apikey.ParseOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tok, res := apikey.ParseBearer(tt.header)
			if tok != tt.wantToken || res != tt.wantRes {
				t.Errorf("ParseBearer(%q) = %q, %v; want %q, %v", tt.header, tok, res, tt.wantToken, tt.wantRes)
			}
		})
	}
}

func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"", "Bearer", "Bearer ", "Bearer x", "bearer x", "Basic x", "Bearer \t x \n", "Bearer\u00a0x", "Bearer \u00a0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		tok, res := apikey.ParseBearer(header)
		switch res {
		case apikey.ParseOK:
			if !strings.HasPrefix(header, "Bearer ") {
				t.Fatalf("OK for %q without the Bearer prefix", header)
			}
			if tok == "" || tok != strings.TrimSpace(tok) || !strings.Contains(header[len("Bearer "):], tok) {
				t.Fatalf("bad token %q from %q", tok, header)
			}
		case apikey.ParseEmpty:
			if tok != "" {
				t.Fatalf("empty result with token %q", tok)
			}
			if header != "Bearer" && (!strings.HasPrefix(header, "Bearer ") || strings.TrimSpace(header[len("Bearer "):]) != "") {
				t.Fatalf("Empty for %q", header)
			}
		case apikey.ParseMissing:
			if tok != "" {
				t.Fatalf("missing result with token %q", tok)
			}
			if header == "Bearer" || strings.HasPrefix(header, "Bearer ") {
				t.Fatalf("Missing for %q", header)
			}
		default:
			t.Fatalf("unknown result %v", res)
		}
	})
}
