package httpkit

import (
	"context"
	"net/http"
	"time"
)

// OutliveHangup runs next on a context that the client closing its side of
// the connection does not cancel, bounded by limit instead (<= 0: no bound).
//
// net/http cancels a request's context as soon as it reads EOF from the
// connection, and a client that half-closes after sending its request (a
// legal HTTP/1.1 client that still reads the answer), or whose body framing
// is broken and ends with the connection, looks exactly like that. The
// route's queries then fail with "context canceled" and the client reads a
// 500 for a request that was whole, or for a body that was its own fault
// (issue 23: a broken body answered 500 on lead, sale, visit and the CLI
// callback). A route's work is short and bounded (limit is the server's
// write timeout: past it the answer cannot be written anyway), so finishing
// it costs little, and a write either commits or not, never half because
// the client left. The context keeps every value (request id, trace, client
// IP).
func OutliveHangup(next http.Handler, limit time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithoutCancel(r.Context())
		if limit > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, limit)
			defer cancel()
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
