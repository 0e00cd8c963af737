package session

import (
	"context"
	"errors"
	"net/http"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/httpkit"
)

// The 401 answers of a dashboard route to a missing, invalid or expired
// session, the same in every service so the console reads one set.
const (
	MsgMissing = "Missing or malformed Authorization header. Expected: Bearer <session_token>"
	MsgInvalid = "Invalid session token. Sign in again."
	MsgExpired = "Session expired. Sign in again."
)

type userKey struct{}

// Require admits a request whose bearer token c accepts: signed-out
// sessions and suspended users are refused by c's revocations, and CLI
// login tokens and program API keys like any other invalid token. A nil c
// (no SESSION_PUBLIC_KEY) refuses every token. fail answers an error of
// the check itself (a revocation lookup): the route's 500, in the
// service's own envelope. UserID reads the user it admitted.
func Require(c *Checker, fail func(context.Context, error, http.ResponseWriter), next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, res := apikey.ParseBearer(r.Header.Get("Authorization"))
		switch {
		case res == apikey.ParseMissing:
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgMissing)
			return
		case res == apikey.ParseEmpty || c == nil:
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgInvalid)
			return
		}
		claims, err := c.Check(r.Context(), token)
		switch {
		case errors.Is(err, ErrExpired):
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgExpired)
			return
		case errors.Is(err, ErrInvalidToken):
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgInvalid)
			return
		case err != nil:
			fail(r.Context(), err, w)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, claims.UserID)))
	})
}

// UserID is the user Require admitted (0 when none).
func UserID(ctx context.Context) int64 {
	uid, _ := ctx.Value(userKey{}).(int64)
	return uid
}
