// Package httpapi is the partner figures' transport: GET
// /internal/v1/programs/{id}/partner-figures?partner_id=…&partner_id=…, on
// the operations port, for accounts' console partners list only
// (Authorization: Bearer INTERNAL_TOKEN; never on the Ingress or the local
// gateway).
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/auth/bearer"
	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/analytics/internal/partnerfigures"
	"github.com/svc-dev/svc/services/analytics/internal/partnerfigures/endpoints"
)

// Path is the route's pattern.
const Path = "/internal/v1/programs/{id}/partner-figures"

// Messages of the route's refusals.
const (
	msgProgram = "program id must be a positive integer"
	msgPartner = "partner_id must be a positive integer"
	msgFailed  = "Failed to read partner figures"
)

// Config carries what the transport needs besides the endpoints.
type Config struct {
	InternalToken bearer.Token
	Logger        *slog.Logger
}

// Routes lists the route.
func Routes(set endpoints.Set, cfg Config) []httpkit.Route {
	fail := func(ctx context.Context, err error, w http.ResponseWriter) {
		if errors.Is(err, errkind.Invalid) {
			_ = httpkit.WritePlatformError(w, http.StatusBadRequest, err.Error())
			return
		}
		if cfg.Logger != nil {
			cfg.Logger.ErrorContext(ctx, "partner figures failed", "request_id", httpkit.RequestIDFrom(ctx), "err", err)
		}
		_ = httpkit.WritePlatformError(w, http.StatusInternalServerError, msgFailed)
	}
	srv := kithttp.NewServer(set.Figures, decode, encode, httpkit.ServerOptions(fail, cfg.Logger)...)
	return []httpkit.Route{{Pattern: "GET " + Path, Name: "internal_partner_figures", Handler: bearer.InternalGuard(cfg.InternalToken, srv)}}
}

// invalid is a refusal whose message the caller sees.
type invalid string

func (e invalid) Error() string { return string(e) }
func (e invalid) Unwrap() error { return errkind.Invalid }

func decode(_ context.Context, r *http.Request) (any, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return nil, invalid(msgProgram)
	}
	vals := r.URL.Query()["partner_id"]
	if len(vals) == 0 || len(vals) > partnerfigures.MaxPartners {
		return nil, partnerfigures.ErrTooMany
	}
	ids := make([]int64, 0, len(vals))
	for _, v := range vals {
		p, err := strconv.ParseInt(v, 10, 64)
		if err != nil || p <= 0 {
			return nil, invalid(msgPartner)
		}
		ids = append(ids, p)
	}
	return endpoints.Request{ProgramID: id, Partners: ids}, nil
}

func encode(_ context.Context, w http.ResponseWriter, resp any) error {
	return httpkit.WriteJSON(w, http.StatusOK, resp)
}
