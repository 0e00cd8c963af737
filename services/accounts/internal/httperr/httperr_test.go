package httperr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
	"github.com/svc-dev/svc/services/accounts/internal/integration"
)

// notConfigured is a refusal of kind unavailable (cliauth's unconfigured
// sign-in).
var notConfigured = &identity.Error{Kind: errkind.Unavailable, Message: "Command-line sign-in is not configured on this server"}

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"decode error keeps its status", &httpkit.DecodeError{Status: 413, Message: "too big"}, 413},
		{"sync barrier timeout is 504, not unavailable", fmt.Errorf("seq 3: %w", catalog.ErrSyncTimeout), 504},
		{"counted rate limit is 429", &integration.ChainLimitError{Limit: 10, RetryAfter: time.Minute}, 429},
		{"invalid", &catalog.FieldError{Field: "name", Message: "name is required"}, 400},
		{"unauthenticated", identity.ErrInvalidIDToken, 401},
		{"forbidden", identity.ErrAccountBlocked, 403},
		{"not found", &catalog.NotFoundError{What: "program 4"}, 404},
		{"conflict", &catalog.KeyExistsError{KeyID: 1, ProgramID: 2}, 409},
		{"gone", errkind.Gone, 410},
		{"unprocessable", errkind.Unprocessable, 422},
		{"unavailable is 503", notConfigured, 503},
		{"no kind is 500", errors.New("connection reset"), 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Status(tc.err); got != tc.want {
				t.Errorf("Status(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

func TestRoute(t *testing.T) {
	ctx := context.Background()
	write := func(enc func(context.Context, error, http.ResponseWriter), err error) (int, string) {
		rec := httptest.NewRecorder()
		enc(ctx, err, rec)
		return rec.Code, rec.Body.String()
	}
	t.Run("endpoint failure of any 5xx kind answers the route's 500", func(t *testing.T) {
		rt := Route{Fail: "Failed to load program settings"}
		code, body := write(rt.Failure, fmt.Errorf("verify: %w", errkind.Unavailable))
		if code != 500 || body != `{"data":null,"error":{"status":500,"name":"InternalServerError","message":"Failed to load program settings","details":{}}}` {
			t.Errorf("%d %s", code, body)
		}
	})
	t.Run("refusal of kind unavailable says what happened", func(t *testing.T) {
		code, body := write(Route{}.Refusal, notConfigured)
		if code != 503 || body != `{"data":null,"error":{"status":503,"name":"ServiceUnavailableError","message":"Command-line sign-in is not configured on this server","details":{}}}` {
			t.Errorf("%d %s", code, body)
		}
	})
	t.Run("field details only where the route asks", func(t *testing.T) {
		fe := &catalog.FieldError{Field: "name", Message: "name is required"}
		if _, body := write(Route{FieldDetails: true}.Refusal, fe); body != `{"data":null,"error":{"status":400,"name":"BadRequestError","message":"name is required","details":{"field":"name"}}}` {
			t.Errorf("admin: %s", body)
		}
		if _, body := write(Route{}.Refusal, fe); body != `{"data":null,"error":{"status":400,"name":"BadRequestError","message":"name is required","details":{}}}` {
			t.Errorf("cli: %s", body)
		}
	})
	t.Run("code of an identity refusal in details", func(t *testing.T) {
		if _, body := write(Route{}.Refusal, identity.ErrAccountBlocked); body != `{"data":null,"error":{"status":403,"name":"ForbiddenError","message":"Your account has been suspended.","details":{"code":"ACCOUNT_BLOCKED"}}}` {
			t.Errorf("%s", body)
		}
	})
	t.Run("an access refusal has no code", func(t *testing.T) {
		if _, body := write(Route{}.Refusal, identity.ErrNoAccess); body != `{"data":null,"error":{"status":403,"name":"ForbiddenError","message":"You do not have access to this program","details":{}}}` {
			t.Errorf("%s", body)
		}
	})
	t.Run("rate limit is typed with Retry-After", func(t *testing.T) {
		rec := httptest.NewRecorder()
		Route{}.Refusal(ctx, &integration.ChainLimitError{Limit: 10, RetryAfter: 90 * time.Second}, rec)
		if rec.Code != 429 || rec.Header().Get("Retry-After") != "90" ||
			rec.Body.String() != `{"error":{"status":429,"code":"rate_limited","message":"Too many synthetic chains (max 10/program/hour).","retry_after_seconds":90}}` {
			t.Errorf("%d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
		}
	})
}
