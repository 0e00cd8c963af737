package bearer

import (
	"net/http"

	"github.com/svc-dev/svc/libs/httpkit"
)

// The internal routes' refusals, the same in every service that serves
// some (tracking's attributions, analytics' partner figures).
const (
	MsgInternalNotConfigured = "internal API not configured"
	MsgInternalHeader        = "Missing or malformed Authorization header. Expected: Bearer <internal_token>"
	MsgInternalInvalid       = "Invalid internal token"
)

// InternalGuard authenticates the calling service on an /internal/ route:
// Authorization: Bearer with the internal token (hashed, constant time).
// Without a configured token every call is 503 (the route exists, so the
// caller learns the callee is misconfigured rather than missing).
func InternalGuard(want Token, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !want.Configured() {
			_ = httpkit.WritePlatformError(w, http.StatusServiceUnavailable, MsgInternalNotConfigured, httpkit.WithCode("not_configured"))
			return
		}
		switch want.Check(r) {
		case Missing:
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgInternalHeader, httpkit.WithCode("unauthorized"))
			return
		case Invalid:
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgInternalInvalid, httpkit.WithCode("unauthorized"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
