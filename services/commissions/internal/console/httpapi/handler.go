// Package httpapi is the HTTP transport of the console's commissions and
// payouts routes, for a signed-in dashboard session (the Ed25519 session
// token accounts issues, checked against the replica's revocations and
// suspensions), in the platform envelope. Both lists also answer CSV
// (Accept: text/csv), streamed row by row.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/commissions/internal/console"
	"github.com/svc-dev/svc/services/commissions/internal/console/endpoints"
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
	// Limit is every route's limit, per sign-in token once it verified
	// (the settings routes' 30 a minute).
	Limit func(http.Handler) http.Handler
	// FailedAuth wraps the session check: a client IP whose 401s used up
	// its allowance is refused 429 before the token is verified.
	FailedAuth func(http.Handler) http.Handler
}

// Routes lists the console's commissions and payouts routes.
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
		h = session.Require(cfg.Sessions, enc.encode, h)
		if cfg.FailedAuth != nil {
			h = cfg.FailedAuth(h)
		}
		return h
	}
	ok, created := http.StatusOK, http.StatusCreated
	limited := cfg.Limit != nil
	return []httpkit.Route{
		{Pattern: "GET /api/v1/programs/{id}/commissions", Name: "console_commissions",
			Handler: build("Failed to load commissions", set.Commissions, decodeCommissions, ok), LimitChecksURL: limited},
		{Pattern: "GET /api/v1/programs/{id}/payouts", Name: "console_payouts",
			Handler: build("Failed to load payouts", set.Payouts, decodePayouts, ok), LimitChecksURL: limited},
		{Pattern: "POST /api/v1/programs/{id}/payouts", Name: "console_open_payout",
			Handler: build("Failed to open the payout", set.OpenPayout, decodeOpenPayout, created), LimitChecksURL: limited},
		{Pattern: "POST /api/v1/programs/{id}/payouts/{payoutId}/pay", Name: "console_pay_payout",
			Handler: build("Failed to pay the payout", set.PayPayout, decodePay, ok), LimitChecksURL: limited},
		{Pattern: "POST /api/v1/programs/{id}/payouts/{payoutId}/cancel", Name: "console_cancel_payout",
			Handler: build("Failed to cancel the payout", set.CancelPayout, decodeCancel, ok), LimitChecksURL: limited},
	}
}

// errorEncoder is the console routes' one error table: a decoding problem
// keeps its status (400, 413), a console refusal or ledger error its kind's
// (errkind.Status); a field's name goes in details.field. Anything else is
// the route's 500, its cause logged, never shown.
type errorEncoder struct {
	logger *slog.Logger
	fail   string
}

func (e errorEncoder) encode(ctx context.Context, err error, w http.ResponseWriter) {
	var de *httpkit.DecodeError
	var fe *httpkit.FieldError
	var ce *console.Error
	status := errkind.Status(err)
	message := clientMessage(err)
	var opts []httpkit.EnvelopeOption
	switch {
	case errors.As(err, &de):
		status, message = de.Status, de.Message
		if de.Field != "" {
			opts = append(opts, httpkit.WithDetail("field", de.Field))
		}
	case errors.As(err, &fe):
		status, message = http.StatusBadRequest, fe.Error()
		opts = append(opts, httpkit.WithDetail("field", fe.Field))
	case errors.As(err, &ce):
		message = ce.Message
		if ce.Field != "" {
			opts = append(opts, httpkit.WithDetail("field", ce.Field))
		}
	}
	if status >= http.StatusInternalServerError {
		e.logger.ErrorContext(ctx, "console request failed", "request_id", httpkit.RequestIDFrom(ctx), "err", err)
		_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, e.fail)
		return
	}
	_ = httpkit.WritePlatformError(w, status, message, opts...)
}

// clientMessage is a ledger error's text without its kind's own word (a
// sentinel reads "invalid amount: invalid: …"), as the admin routes show it.
func clientMessage(err error) string {
	kind := errkind.Of(err).Error()
	parts := strings.Split(err.Error(), ": ")
	kept := parts[:0]
	for _, p := range parts {
		if p != kind {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ": ")
}

// encodeResponse writes a refusal, a CSV stream, or the JSON answer with
// status.
func encodeResponse(status int, enc errorEncoder) kithttp.EncodeResponseFunc {
	return func(ctx context.Context, w http.ResponseWriter, resp any) error {
		switch r := resp.(type) {
		case endpoints.CommissionsResponse:
			if r.Err != nil {
				enc.encode(ctx, r.Err, w)
				return nil
			}
			if r.Rows != nil {
				return streamCommissions(ctx, w, r.Rows, enc)
			}
			return httpkit.WriteJSON(w, status, commissionsPage{Data: r.Data, NextCursor: encodeCursor(r.Next)})
		case endpoints.PayoutsResponse:
			if r.Err != nil {
				enc.encode(ctx, r.Err, w)
				return nil
			}
			if r.Rows != nil {
				return streamPayouts(ctx, w, r.Rows, enc)
			}
			return httpkit.WriteJSON(w, status, payoutsPage{Data: r.Data, NextCursor: encodeID(r.Next),
				BalancesNextCursor: encodeMoneyCursor(r.MoneyNext)})
		case endpoints.PayoutResponse:
			if r.Err != nil {
				enc.encode(ctx, r.Err, w)
				return nil
			}
		}
		return httpkit.WriteJSON(w, status, resp)
	}
}

// commissionsPage and payoutsPage are the lists' JSON answers: next_cursor
// is the next page's cursor, null on the last.
type commissionsPage struct {
	Data       []endpoints.CommissionView `json:"data"`
	NextCursor *string                    `json:"next_cursor"`
}

// balances_next_cursor pages data.balances the same way (sent back as
// balances_cursor).
type payoutsPage struct {
	Data               endpoints.PayoutsData `json:"data"`
	NextCursor         *string               `json:"next_cursor"`
	BalancesNextCursor *string               `json:"balances_next_cursor"`
}
