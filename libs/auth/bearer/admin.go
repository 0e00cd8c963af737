package bearer

import (
	"net/http"

	"github.com/svc-dev/svc/libs/httpkit"
)

// The admin API's refusals, the same wherever admin routes are served.
const (
	MsgAdminHeader  = "Missing or malformed Authorization header. Expected: Bearer <admin_token>"
	MsgAdminInvalid = "Invalid admin token"
)

// AdminGuard is the front of every admin route, the same in each service
// that serves some (accounts, commissions): failedAuth first (a client IP
// whose 401s used up its allowance is refused 429 before the token is
// compared), then the admin token (401 in the platform envelope; an empty
// token refuses everything), then limit (per token: only the real token
// gets a bucket). A nil middleware is left out.
func AdminGuard(token string, limit, failedAuth func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	want := New(token)
	return func(next http.Handler) http.Handler {
		h := next
		if limit != nil {
			h = limit(h)
		}
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch want.Check(r) {
			case Missing:
				_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgAdminHeader)
				return
			case Invalid:
				_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgAdminInvalid)
				return
			}
			inner.ServeHTTP(w, r)
		})
		if failedAuth != nil {
			h = failedAuth(h)
		}
		return h
	}
}
