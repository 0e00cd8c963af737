// Package errkind is the one vocabulary of error kinds every svc domain
// wraps its sentinels in (STYLE.md, Errors). It imports nothing but the
// standard library, so domain packages can use it and stay pure; each
// service maps the kinds to HTTP statuses in one table of its transport
// (see Status), and per-route messages and codes stay data of the domain.
package errkind

import (
	"errors"
	"net/http"
)

// The kinds. A domain error wraps exactly one of them, e.g.
//
//	var ErrLinkDisabled = fmt.Errorf("referral link disabled: %w", errkind.Gone)
//
// or returns a typed error whose Unwrap returns the kind.
var (
	Invalid         = errors.New("invalid")
	NotFound        = errors.New("not found")
	Conflict        = errors.New("conflict")
	Unauthenticated = errors.New("unauthenticated")
	Forbidden       = errors.New("forbidden")
	Gone            = errors.New("gone")
	Unprocessable   = errors.New("unprocessable")
	Unavailable     = errors.New("unavailable")
	Internal        = errors.New("internal")
)

// All lists every kind, in the order Of checks them: when an error wraps
// several kinds the first wins, so the most specific client-facing kinds
// come first.
func All() []error {
	return []error{Invalid, Unauthenticated, Forbidden, NotFound, Conflict, Gone, Unprocessable, Unavailable, Internal}
}

// Of returns the kind err wraps, or Internal when it wraps none (an
// infrastructure failure: a lost connection, a bug).
func Of(err error) error {
	for _, k := range All() {
		if errors.Is(err, k) {
			return k
		}
	}
	return Internal
}

// Status is the one kind → HTTP status table. A service's error encoder
// starts from it; a route whose contract says otherwise (a 403 where the
// kind is NotFound, say) keeps that as data of the route, not as a second
// table.
func Status(err error) int {
	switch Of(err) {
	case Invalid:
		return http.StatusBadRequest
	case NotFound:
		return http.StatusNotFound
	case Conflict:
		return http.StatusConflict
	case Unauthenticated:
		return http.StatusUnauthorized
	case Forbidden:
		return http.StatusForbidden
	case Gone:
		return http.StatusGone
	case Unprocessable:
		return http.StatusUnprocessableEntity
	case Unavailable:
		// Not 504: nothing timed out at a gateway; the dependency (a
		// provider, another service) is unavailable and a retry may work.
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}
