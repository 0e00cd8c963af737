// Package httpapi is the HTTP transport of the console's webhook endpoint
// routes, for a signed-in dashboard session (the Ed25519 session token
// accounts issues, checked against the replica's revocations and
// suspensions), in the platform envelope, as the commissions console's
// routes answer.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/webhooks/internal/apierr"
	"github.com/svc-dev/svc/services/webhooks/internal/endpoint/endpoints"
)

// 401 messages: the settings routes' (accounts), so every dashboard route
// answers a bad session alike.
const (
	MsgMissingSession = session.MsgMissing
	MsgInvalidSession = session.MsgInvalid
	MsgExpiredSession = session.MsgExpired
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
		enc := apierr.Encoder{Logger: logger, Fail: fail, Log: "webhooks console request failed"}
		var h http.Handler = kithttp.NewServer(e, dec, encodeResponse(status, enc), httpkit.ServerOptions(enc.Encode, logger)...)
		if cfg.Limit != nil {
			h = cfg.Limit(h)
		}
		h = session.Require(cfg.Sessions, enc.Encode, h)
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

// encodeResponse writes a refusal, nothing (204) or the JSON answer.
func encodeResponse(status int, enc apierr.Encoder) kithttp.EncodeResponseFunc {
	return func(ctx context.Context, w http.ResponseWriter, resp any) error {
		r := resp.(endpoints.Response)
		if r.Err != nil {
			enc.Encode(ctx, r.Err, w)
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
