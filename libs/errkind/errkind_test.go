package errkind_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/svc-dev/svc/libs/errkind"
)

type linkError struct{ code string }

func (e *linkError) Error() string { return "link " + e.code + " disabled" }
func (e *linkError) Unwrap() error { return errkind.Gone }

func TestOfAndStatus(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		err    error
		kind   error
		status int
	}{
		{"wrapped sentinel", fmt.Errorf("load sale 7: %w", fmt.Errorf("sale: %w", errkind.NotFound)), errkind.NotFound, http.StatusNotFound},
		{"typed error", &linkError{"DEMO"}, errkind.Gone, http.StatusGone},
		{"invalid", fmt.Errorf("amount: %w", errkind.Invalid), errkind.Invalid, http.StatusBadRequest},
		{"conflict", errkind.Conflict, errkind.Conflict, http.StatusConflict},
		{"unauthenticated", errkind.Unauthenticated, errkind.Unauthenticated, http.StatusUnauthorized},
		{"forbidden", errkind.Forbidden, errkind.Forbidden, http.StatusForbidden},
		{"unprocessable", errkind.Unprocessable, errkind.Unprocessable, http.StatusUnprocessableEntity},
		{"unavailable is 503, never 504", errkind.Unavailable, errkind.Unavailable, http.StatusServiceUnavailable},
		{"no kind is internal", context.DeadlineExceeded, errkind.Internal, http.StatusInternalServerError},
		{"an error of no kind is internal", errors.New("boom"), errkind.Internal, http.StatusInternalServerError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := errkind.Of(c.err); got != c.kind {
				t.Fatalf("Of = %v, want %v", got, c.kind)
			}
			if got := errkind.Status(c.err); got != c.status {
				t.Fatalf("Status = %d, want %d", got, c.status)
			}
		})
	}
	if len(errkind.All()) != 9 {
		t.Fatal("a kind was added without its status")
	}
}
