package httpkit

import (
	"context"
	"net/http"
	"net/url"
	"unicode/utf8"
)

// MsgInvalidURL answers a request whose path or query is not UTF-8.
const MsgInvalidURL = "Request URL must be valid UTF-8"

// ValidURL refuses, with 400, a request whose decoded path or any decoded
// query key or value is not UTF-8: such bytes reach Postgres (a path
// parameter, a return_to) as an encoding error, a 500 for what is the
// client's mistake. Nothing behind it runs, so nothing is written. refuse
// writes the answer in the route's envelope (nil: the platform envelope).
// A NUL is left to the routes, which name the field it is in.
func ValidURL(next http.Handler, refuse Refusal) http.Handler {
	refuse = orPlatform(refuse)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if storableURL(r) {
			next.ServeHTTP(w, r)
			return
		}
		refuse(w, http.StatusBadRequest, MsgInvalidURL)
	})
}

// DeferURLCheck is ValidURL for a route whose rate limiter answers every
// request with the X-RateLimit-* headers (the spec's limited routes): the
// request goes on with refuse in its context, and the limiter
// (libs/ratelimit.Middleware) refuses a URL that is not UTF-8 once it has
// counted the request and set its headers (URLRefusal). The route's chain
// must pass through such a limiter before anything reads the URL; the
// route sets Route.LimitChecksURL to say it does.
func DeferURLCheck(next http.Handler, refuse Refusal) http.Handler {
	refuse = orPlatform(refuse)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if storableURL(r) {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), urlRefusalKey{}, refuse)))
	})
}

type urlRefusalKey struct{}

// URLRefusal is the refusal DeferURLCheck left for a request whose URL is
// not UTF-8 (ok false for every other request): the limiter writes it with
// MsgInvalidURL after its headers, and the route does not run.
func URLRefusal(ctx context.Context) (Refusal, bool) {
	r, ok := ctx.Value(urlRefusalKey{}).(Refusal)
	return r, ok
}

// orPlatform is refuse, or the platform envelope when it is nil.
func orPlatform(refuse Refusal) Refusal {
	if refuse != nil {
		return refuse
	}
	return func(w http.ResponseWriter, status int, message string) { _ = WritePlatformError(w, status, message) }
}

// storableURL: the decoded path and every decoded query key and value are
// UTF-8.
func storableURL(r *http.Request) bool { return storable(r.URL.Path) && storableQuery(r.URL.RawQuery) }

func storable(s string) bool { return utf8.ValidString(s) }

// storableQuery checks every key and value of a raw query as a handler
// would decode them (a malformed escape is left to the handler: it reads
// the value as missing).
func storableQuery(raw string) bool {
	if raw == "" {
		return true
	}
	values, _ := url.ParseQuery(raw)
	for k, vs := range values {
		if !storable(k) {
			return false
		}
		for _, v := range vs {
			if !storable(v) {
				return false
			}
		}
	}
	return true
}
