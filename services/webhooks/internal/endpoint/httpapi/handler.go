// Package httpapi is the HTTP transport of the console's webhook endpoint
// routes, for a signed-in dashboard session (the Ed25519 session token
// accounts issues, checked against the replica's revocations and
// suspensions), in the platform envelope, as the commissions console's
// routes answer.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	webhook "github.com/svc-dev/svc/services/webhooks/internal/endpoint"
	"github.com/svc-dev/svc/services/webhooks/internal/endpoint/endpoints"
)

// 401 messages: the settings routes' (accounts), so every dashboard route
// answers a bad session alike.
const (
	MsgMissingSession = "Missing or malformed Authorization header. Expected: Bearer <session_token>"
	MsgInvalidSession = "Invalid session token. Sign in again."
	MsgExpiredSession = "Session expired. Sign in again."
)

// Config carries what the transport needs.
type Config struct {
	// Sessions checks dashboard session tokens, revocations included;
	// nil (no SESSION_PUBLIC_KEY) signs every caller out.
	Sessions *session.Checker
	Logger   *slog.Logger
	// Limit is every route's limit, per sign-in token (the settings
	// routes' SETTINGS_RATE_LIMIT a minute).
	Limit func(http.Handler) http.Handler
	// FailedAuth wraps the session check: a client IP whose 401s used up
	// its allowance is refused 429 before the token is verified (and
	// every answer carries X-RateLimit-*, 401s included).
	FailedAuth func(http.Handler) http.Handler
}

// Paths of the routes. GET …/webhooks/notifications beside the
// {webhookId} patterns is no conflict in net/http's mux: no GET has a
// single segment after …/webhooks/ but this one (PATCH and DELETE do), and
// a literal segment is more specific than a wildcard anyway; an endpoint
// id is a positive whole number, never "notifications".
const (
	pathList     = "/api/v1/programs/{id}/webhooks"
	pathNotes    = "/api/v1/programs/{id}/webhooks/notifications"
	pathOne      = "/api/v1/programs/{id}/webhooks/{webhookId}"
	pathRetry    = "/api/v1/programs/{id}/webhooks/{webhookId}/deliveries/{deliveryId}/retry"
	pathDelivers = "/api/v1/programs/{id}/webhooks/{webhookId}/deliveries"
)

// Routes lists the console's webhook endpoint routes.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	build := func(fail string, e func(context.Context, any) (any, error), dec kithttp.DecodeRequestFunc, status int) http.Handler {
		enc := errorEncoder{logger: logger, fail: fail}
		var h http.Handler = kithttp.NewServer(e, dec, encodeResponse(status, enc), httpkit.ServerOptions(enc.encode, logger)...)
		if cfg.Limit != nil {
			h = cfg.Limit(h)
		}
		h = requireSession(cfg.Sessions, enc, h)
		if cfg.FailedAuth != nil {
			h = cfg.FailedAuth(h)
		}
		return h
	}
	limited := cfg.Limit != nil
	route := func(method, path, name, fail string, e func(context.Context, any) (any, error), dec kithttp.DecodeRequestFunc, status int) httpkit.Route {
		return httpkit.Route{Pattern: method + " " + path, Name: name, Handler: build(fail, e, dec, status), LimitChecksURL: limited}
	}
	return []httpkit.Route{
		route("POST", pathList, "webhooks_create", "Failed to create the webhook endpoint", set.Create, decodeCreate, http.StatusCreated),
		route("GET", pathList, "webhooks_list", "Failed to load webhook endpoints", set.List, decodeList, http.StatusOK),
		route("PATCH", pathOne, "webhooks_update", "Failed to update the webhook endpoint", set.Update, decodeUpdate, http.StatusOK),
		route("DELETE", pathOne, "webhooks_delete", "Failed to delete the webhook endpoint", set.Delete, decodeNoBody, http.StatusNoContent),
		route("POST", pathOne+"/secret", "webhooks_rotate_secret", "Failed to rotate the webhook secret", set.Rotate, decodeNoBody, http.StatusOK),
		route("POST", pathOne+"/test", "webhooks_test", "Failed to send the test event", set.Ping, decodeNoBody, http.StatusAccepted),
		route("GET", pathDelivers, "webhooks_deliveries", "Failed to load deliveries", set.Deliveries, decodeDeliveries, http.StatusOK),
		route("POST", pathRetry, "webhooks_retry_delivery", "Failed to retry the delivery", set.Retry, decodeRetry, http.StatusAccepted),
		route("GET", pathNotes, "webhooks_notifications", "Failed to load notifications", set.Notifications, decodeNotifications, http.StatusOK),
	}
}

type userKey struct{}

// sessionUser is the user requireSession admitted (0 when none).
func sessionUser(ctx context.Context) int64 {
	uid, _ := ctx.Value(userKey{}).(int64)
	return uid
}

// requireSession checks the dashboard session token, signed-out sessions
// and suspended users refused; CLI login tokens and program API keys are
// refused like any other invalid token. A failed revocation lookup is the
// route's 500.
func requireSession(c *session.Checker, enc errorEncoder, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, res := apikey.ParseBearer(r.Header.Get("Authorization"))
		switch res {
		case apikey.ParseMissing:
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgMissingSession)
			return
		case apikey.ParseEmpty:
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgInvalidSession)
			return
		}
		if c == nil {
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgInvalidSession)
			return
		}
		claims, err := c.Check(r.Context(), token)
		switch {
		case errors.Is(err, session.ErrExpired):
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgExpiredSession)
			return
		case errors.Is(err, session.ErrInvalidToken):
			_ = httpkit.WritePlatformError(w, http.StatusUnauthorized, MsgInvalidSession)
			return
		case err != nil:
			enc.encode(r.Context(), err, w)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, claims.UserID)))
	})
}

// errorEncoder is the routes' one error table: a decoding problem keeps its
// status (400, 413), a refusal its kind's (errkind.Status: 503 when no
// sealing key is configured); a field's name goes in details.field.
// Anything else is the route's 500, its cause logged, never shown.
type errorEncoder struct {
	logger *slog.Logger
	fail   string
}

func (e errorEncoder) encode(ctx context.Context, err error, w http.ResponseWriter) {
	var de *httpkit.DecodeError
	var fe *httpkit.FieldError
	var we *webhook.Error
	status, message := http.StatusInternalServerError, ""
	var opts []httpkit.EnvelopeOption
	switch {
	case errors.As(err, &we):
		status, message = errkind.Status(we), we.Message
		if we.Field != "" {
			opts = append(opts, httpkit.WithDetail("field", we.Field))
		}
	case errors.As(err, &de):
		status, message = de.Status, de.Message
		if de.Field != "" {
			opts = append(opts, httpkit.WithDetail("field", de.Field))
		}
	case errors.As(err, &fe):
		status, message = http.StatusBadRequest, fe.Error()
		opts = append(opts, httpkit.WithDetail("field", fe.Field))
	}
	if status == http.StatusInternalServerError {
		e.logger.ErrorContext(ctx, "webhooks console request failed", "request_id", httpkit.RequestIDFrom(ctx), "err", err)
		_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, e.fail)
		return
	}
	_ = httpkit.WritePlatformError(w, status, message, opts...)
}

// encodeResponse writes a refusal, nothing (204) or the JSON answer.
func encodeResponse(status int, enc errorEncoder) kithttp.EncodeResponseFunc {
	return func(ctx context.Context, w http.ResponseWriter, resp any) error {
		r := resp.(endpoints.Response)
		if r.Err != nil {
			enc.encode(ctx, r.Err, w)
			return nil
		}
		if status == http.StatusNoContent {
			w.WriteHeader(status)
			return nil
		}
		if r.Paged {
			return httpkit.WriteJSON(w, status, page{Data: r.Data, NextCursor: encodeID(r.NextCursor)})
		}
		return httpkit.WriteJSON(w, status, envelope{Data: r.Data})
	}
}

type envelope struct {
	Data any `json:"data"`
}

// page is a paged list's answer (the delivery log, the notifications):
// next_cursor is the next page's cursor, null on the last.
type page struct {
	Data       any     `json:"data"`
	NextCursor *string `json:"next_cursor"`
}
