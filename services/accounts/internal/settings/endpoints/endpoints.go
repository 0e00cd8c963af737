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
	"github.com/svc-dev/svc/services/accounts/internal/identity"
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

// Response is both routes' answer: the settings under "data", or a
// refusal.
type Response struct {
	Data View  `json:"data"`
	Err  error `json:"-"`
	seq  catalog.Seq
}

var _ endpoint.Failer = Response{}

func (r Response) Failed() error { return r.Err }

func (r Response) Headers() http.Header {
	h := http.Header{}
	if r.seq > 0 {
		h.Set("X-Catalog-Seq", strconv.FormatInt(int64(r.seq), 10))
	}
	return h
}

// View is the settings as answered (fields in the order of their JSON
// names, as the map it replaced wrote them).
type View struct {
	AllowedOrigins        []string `json:"allowed_origins"`
	AttributionWindowDays int      `json:"attribution_window_days"`
	LeadAuthPolicy        string   `json:"lead_auth_policy"`
	PaymentTrackingMode   string   `json:"payment_tracking_mode"`
	ProgramID             int64    `json:"program_id"`
}

// NewView renders s.
func NewView(s settings.Settings) View {
	return View{
		AllowedOrigins:        s.AllowedOrigins,
		AttributionWindowDays: s.AttributionWindowDays,
		LeadAuthPolicy:        s.LeadAuthPolicy,
		PaymentTrackingMode:   s.PaymentTrackingMode,
		ProgramID:             s.ProgramID,
	}
}

func public(err error) bool {
	var se *identity.Error
	return errors.As(err, &se) || errors.Is(err, errkind.Invalid) ||
		errors.As(err, new(*httpkit.DecodeError))
}

func answer(s settings.Settings, seq catalog.Seq, err error) (any, error) {
	if err != nil {
		if public(err) {
			return Response{Err: err}, nil
		}
		return nil, err
	}
	return Response{Data: NewView(s), seq: seq}, nil
}

func makeGet(svc settings.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		s, err := svc.Get(ctx, r.UserID, r.ProgramID)
		return answer(s, 0, err)
	}
}

func makeUpdate(svc settings.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		if r.BodyErr != nil {
			// Access first: the same check Get makes.
			if s, err := svc.Get(ctx, r.UserID, r.ProgramID); err != nil {
				return answer(s, 0, err)
			}
			return Response{Err: r.BodyErr}, nil
		}
		s, seq, err := svc.Update(ctx, r.UserID, r.ProgramID, r.Input)
		return answer(s, seq, err)
	}
}
