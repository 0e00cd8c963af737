package bearer_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/auth/bearer"
)

// The guard's order: failedAuth sees every request, the token check comes
// next, and limit only sees requests that carry the token.
func TestAdminGuard(t *testing.T) {
	t.Parallel()
	var seen []string
	mark := func(name string) func(http.Handler) http.Handler {
		return func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = append(seen, name)
				next.ServeHTTP(w, r)
			})
		}
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := bearer.AdminGuard("s3cret", mark("limit"), mark("failedAuth"))(ok)
	for _, tc := range []struct {
		header string
		status int
		body   string
		seen   string
	}{
		{"Bearer s3cret", http.StatusNoContent, "", "failedAuth,limit"},
		{"", http.StatusUnauthorized, bearer.MsgAdminHeader, "failedAuth"},
		{"Bearer nope", http.StatusUnauthorized, bearer.MsgAdminInvalid, "failedAuth"},
	} {
		seen = nil
		r := httptest.NewRequest("GET", "/admin/v1/x", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) || strings.Join(seen, ",") != tc.seen {
			t.Errorf("%q: %d %s (seen %v), want %d %q (seen %s)", tc.header, w.Code, w.Body, seen, tc.status, tc.body, tc.seen)
		}
	}
	// Without a token every request is refused.
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/admin/v1/x", nil)
	r.Header.Set("Authorization", "Bearer ")
	bearer.AdminGuard("", nil, nil)(ok).ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("unconfigured guard answered %d", w.Code)
	}
}
