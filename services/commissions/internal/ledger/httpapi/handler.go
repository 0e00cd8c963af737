// Package httpapi is the ledger's admin HTTP transport: /admin/v1/ routes
// on commissions' own port, guarded by the admin token (accounts' token),
// in the platform envelope, every amount an integer in minor units.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/bearer"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/commissions/internal/ledger/endpoints"
)

// Config carries what the transport needs besides the endpoints.
type Config struct {
	// AdminToken is the Bearer token every route requires; empty refuses
	// every request.
	AdminToken string
	Logger     *slog.Logger
	// Limit, when set, limits every route per token; it runs after the
	// token check, so only the admin token gets a bucket.
	Limit func(http.Handler) http.Handler
	// FailedAuth, when set, wraps the token check: a client IP whose 401s
	// used up its allowance is refused 429 before the token is compared.
	FailedAuth func(http.Handler) http.Handler
}

// Routes lists every admin route of the ledger. The platform mounts them
// with metrics and spans per route name.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	enc := errorEncoder{logger: cfg.Logger}
	opts := httpkit.ServerOptions(enc.encode, cfg.Logger)
	guard := bearer.AdminGuard(cfg.AdminToken, cfg.Limit, cfg.FailedAuth)
	h := func(e func(context.Context, any) (any, error), dec kithttp.DecodeRequestFunc, status int) http.Handler {
		h := http.Handler(kithttp.NewServer(e, httpkit.RefuseNULQuery(dec), encodeResponse(status, enc), opts...))
		return guard(h)
	}
	ok, created := http.StatusOK, http.StatusCreated
	return []httpkit.Route{
		{Pattern: "GET /admin/v1/commissions/{id}", Name: "ledger_get_commission", Handler: h(set.GetCommission, decodeID("id"), ok)},
		{Pattern: "POST /admin/v1/commissions/approve-due", Name: "ledger_approve_due", Handler: h(set.ApproveDue, decodeNothing, ok)},
		{Pattern: "GET /admin/v1/sales/{transaction_id}", Name: "ledger_get_sale", Handler: h(set.GetSale, decodeSale, ok)},
		{Pattern: "GET /admin/v1/partners/{id}/balances", Name: "ledger_balances", Handler: h(set.Balances, decodeID("id"), ok)},
		{Pattern: "POST /admin/v1/partners/{id}/withdrawals", Name: "ledger_open_withdrawal", Handler: h(set.OpenWithdrawal, decodeOpenWithdrawal, created)},
		{Pattern: "GET /admin/v1/partners/{id}/withdrawals", Name: "ledger_withdrawals", Handler: h(set.Withdrawals, decodeID("id"), ok)},
		{Pattern: "POST /admin/v1/withdrawals/{id}/pay", Name: "ledger_pay_withdrawal", Handler: h(set.PayWithdrawal, decodeID("id"), ok)},
		{Pattern: "POST /admin/v1/withdrawals/{id}/cancel", Name: "ledger_cancel_withdrawal", Handler: h(set.CancelWithdrawal, decodeID("id"), ok)},
		{Pattern: "GET /admin/v1/partners/{id}/notifications", Name: "ledger_partner_notifications", Handler: h(set.Notifications, decodeRecipient("partner"), ok)},
		{Pattern: "GET /admin/v1/advertisers/{id}/notifications", Name: "ledger_advertiser_notifications", Handler: h(set.Notifications, decodeRecipient("advertiser"), ok)},
	}
}

// encodeResponse writes a success with status, or the business error an
// endpoint's response carries.
func encodeResponse(status int, enc errorEncoder) kithttp.EncodeResponseFunc {
	return func(ctx context.Context, w http.ResponseWriter, resp any) error {
		if f, ok := resp.(interface{ Failed() error }); ok && f.Failed() != nil {
			enc.encode(ctx, f.Failed(), w)
			return nil
		}
		return httpkit.WriteJSON(w, status, resp)
	}
}
