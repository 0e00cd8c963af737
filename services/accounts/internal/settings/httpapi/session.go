package httpapi

import (
	"context"
	"net/http"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/services/accounts/internal/httperr"
)

// RequireSession is the settings routes' session check for the console's
// other routes (programs, keys, ...): the same messages, the same refusal
// of CLI login tokens and program API keys, so every dashboard route
// answers a bad session alike. SessionUser reads the user it admitted.
func RequireSession(c *session.Checker, enc httperr.Route, next http.Handler) http.Handler {
	return requireSession(c, enc, next)
}

// SessionUser is the user id RequireSession admitted (0 when none).
func SessionUser(ctx context.Context) int64 {
	uid, _ := ctx.Value(userKey{}).(int64)
	return uid
}
