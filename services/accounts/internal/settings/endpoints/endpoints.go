// Package endpoints adapts settings.Service (program settings) to go-kit
// endpoints. Refusals travel in the response (Failer); infrastructure
// failures are endpoint errors.
package endpoints

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/settings"
)

// Set holds one endpoint per route.
type Set struct {
	Get    endpoint.Endpoint
	Update endpoint.Endpoint
}

// New builds the endpoints, each decorated with mw (tracing), outermost first.
func New(svc settings.Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		Get:    obs.Decorate("program_settings_get", makeGet(svc), mw...),
		Update: obs.Decorate("program_settings_update", makeUpdate(svc), mw...),
	}
}

// Request is a decoded settings request.
type Request struct {
	UserID    int64
	ProgramID int64
	Input     settings.Input
	// BodyErr is a body problem, reported only once access is checked, so
	// a non-member learns nothing from validation.
	BodyErr error
}

type Response struct {
	Data any   `json:"data"`
	Err  error `json:"-"`
	seq  catalog.Seq
}

func (r Response) Failed() error { return r.Err }

func (r Response) Headers() http.Header {
	h := http.Header{}
	if r.seq > 0 {
		h.Set("X-Catalog-Seq", strconv.FormatInt(int64(r.seq), 10))
	}
	return h
}

// View is the settings as answered.
func View(s settings.Settings) map[string]any {
	return map[string]any{
		"program_id":              s.ProgramID,
		"lead_auth_policy":        s.LeadAuthPolicy,
		"attribution_window_days": s.AttributionWindowDays,
		"payment_tracking_mode":   s.PaymentTrackingMode,
		"allowed_origins":         s.AllowedOrigins,
	}
}

func public(err error) bool {
	var se *settings.Error
	return errors.As(err, &se) || errors.Is(err, errkind.Invalid) ||
		errors.As(err, new(*httpkit.DecodeError))
}

func answer(data func() any, seq catalog.Seq, err error) (any, error) {
	if err != nil {
		if public(err) {
			return Response{Err: err}, nil
		}
		return nil, err
	}
	return Response{Data: data(), seq: seq}, nil
}

func makeGet(svc settings.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		s, err := svc.Get(ctx, r.UserID, r.ProgramID)
		return answer(func() any { return View(s) }, 0, err)
	}
}

func makeUpdate(svc settings.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		if r.BodyErr != nil {
			// Access first: the same check Get makes.
			if _, err := svc.Get(ctx, r.UserID, r.ProgramID); err != nil {
				return answer(nil, 0, err)
			}
			return Response{Err: r.BodyErr}, nil
		}
		s, seq, err := svc.Update(ctx, r.UserID, r.ProgramID, r.Input)
		return answer(func() any { return View(s) }, seq, err)
	}
}
