// Package endpoints adapts the ingest service to go-kit endpoints, one per
// use case, with typed requests and responses. A response is the JSON body
// the route answers with; business errors travel in it (endpoint.Failer),
// only infrastructure failures are endpoint errors.
package endpoints

import (
	"context"
	"errors"
	"time"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// Set holds one endpoint per tracking use case.
type Set struct {
	Click  endpoint.Endpoint
	Lead   endpoint.Endpoint
	Visit  endpoint.Endpoint
	Config endpoint.Endpoint
	// Attribution decides a payment's attribution for the commissions
	// service (internal route).
	Attribution endpoint.Endpoint
}

// New builds the set, wrapping each endpoint in mw (the first outermost).
func New(svc ingest.Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		Click:       obs.Decorate("click", MakeClickEndpoint(svc), mw...),
		Lead:        obs.Decorate("lead", MakeLeadEndpoint(svc), mw...),
		Visit:       obs.Decorate("visit", MakeVisitEndpoint(svc), mw...),
		Config:      obs.Decorate("config", MakeConfigEndpoint(svc), mw...),
		Attribution: obs.Decorate("attribution", MakeAttributionEndpoint(svc), mw...),
	}
}

// Every response carries its business error.
var (
	_ endpoint.Failer = ClickResponse{}
	_ endpoint.Failer = LeadResponse{}
	_ endpoint.Failer = VisitResponse{}
	_ endpoint.Failer = ConfigResponse{}
	_ endpoint.Failer = AttributionResponse{}
)

// Requests are the decoded inputs of the use cases (the transport checks
// their shape field by field, with the specification's messages).
type (
	ClickRequest       = ingest.ClickInput
	LeadRequest        = ingest.LeadInput
	VisitRequest       = ingest.VisitInput
	ConfigRequest      = ingest.ProgramRef
	AttributionRequest = ingest.AttributionInput
)

// TestData is data of a test-mode answer (click, lead).
type TestData struct {
	EventID   int64 `json:"eventId"`
	ProgramID int64 `json:"programId"`
	TestMode  bool  `json:"test_mode"`
}

func testData(t *ingest.TestEvent) *TestData {
	return &TestData{EventID: t.EventID, ProgramID: t.ProgramID, TestMode: true}
}

// The response bodies have two shapes (a recorded event, a test event);
// the fields of one shape are never zero in it and always zero in the
// other, hence omitempty. Fields are in JSON-name order, the order the
// bodies have always had.

// ClickResponse answers POST /api/v1/track/click.
type ClickResponse struct {
	ClickID          string    `json:"click_id,omitempty"`
	CookieWindowDays int       `json:"cookie_window_days,omitempty"`
	Data             *TestData `json:"data,omitempty"`
	Message          string    `json:"message,omitempty"`
	PartnerCode      string    `json:"partner_code,omitempty"`
	Success          bool      `json:"success"`
	Err              error     `json:"-"`
}

// Failed implements endpoint.Failer.
func (r ClickResponse) Failed() error { return r.Err }

// MakeClickEndpoint records a click.
func MakeClickEndpoint(svc ingest.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		out, err := svc.Click(ctx, request.(ClickRequest))
		if err != nil {
			return ClickResponse{Err: err}, infrastructure(err)
		}
		if out.Test != nil {
			return ClickResponse{Success: true, Message: out.Test.Message, Data: testData(out.Test)}, nil
		}
		return ClickResponse{Success: true, ClickID: out.ClickID, PartnerCode: out.PartnerCode, CookieWindowDays: out.CookieWindowDays}, nil
	}
}

// LeadResponse answers POST /api/v1/track/lead.
type LeadResponse struct {
	Data        *TestData `json:"data,omitempty"`
	Message     string    `json:"message"`
	Provisional bool      `json:"provisional,omitempty"`
	Success     bool      `json:"success"`
	Err         error     `json:"-"`
}

// Failed implements endpoint.Failer.
func (r LeadResponse) Failed() error { return r.Err }

// MakeLeadEndpoint records a lead.
func MakeLeadEndpoint(svc ingest.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		out, err := svc.Lead(ctx, request.(LeadRequest))
		if err != nil {
			return LeadResponse{Err: err}, infrastructure(err)
		}
		if out.Test != nil {
			return LeadResponse{Success: true, Message: out.Test.Message, Data: testData(out.Test)}, nil
		}
		return LeadResponse{Success: true, Provisional: out.Provisional, Message: out.Message}, nil
	}
}

// VisitResponse answers POST /api/v1/track/visit.
type VisitResponse struct {
	Success bool  `json:"success"`
	Err     error `json:"-"`
}

// Failed implements endpoint.Failer.
func (r VisitResponse) Failed() error { return r.Err }

// MakeVisitEndpoint records a visit.
func MakeVisitEndpoint(svc ingest.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		if err := svc.Visit(ctx, request.(VisitRequest)); err != nil {
			return VisitResponse{Err: err}, infrastructure(err)
		}
		return VisitResponse{Success: true}, nil
	}
}

// ConfigResponse answers GET /api/v1/track/config.
type ConfigResponse struct {
	BrowserLeadsAllowed bool   `json:"browser_leads_allowed"`
	CookieWindowDays    int    `json:"cookie_window_days"`
	LeadAuthPolicy      string `json:"lead_auth_policy"`
	ProgramID           int64  `json:"program_id"`
	Success             bool   `json:"success"`
	Err                 error  `json:"-"`
}

// Failed implements endpoint.Failer.
func (r ConfigResponse) Failed() error { return r.Err }

// MakeConfigEndpoint returns a program's tracker configuration.
func MakeConfigEndpoint(svc ingest.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		p, err := svc.Config(ctx, request.(ConfigRequest))
		if err != nil {
			return ConfigResponse{Err: err}, infrastructure(err)
		}
		return ConfigResponse{
			Success: true, ProgramID: p.ID, CookieWindowDays: p.AttributionWindowDays, LeadAuthPolicy: p.LeadAuthPolicy,
			BrowserLeadsAllowed: p.LeadAuthPolicy == "browser_allowed",
		}, nil
	}
}

// AttributionResponse answers POST /internal/v1/attributions: the decision
// in the platform envelope's data.
type AttributionResponse struct {
	Data *AttributionData `json:"data"`
	Err  error            `json:"-"`
}

// AttributionData is one attribution decision. The commissions service
// builds its client on these types.
type AttributionData struct {
	Outcome           string            `json:"outcome"`
	CustomerID        int64             `json:"customer_id"`
	ClickID           string            `json:"click_id"`
	PartnerID         int64             `json:"partner_id"`
	LinkID            int64             `json:"link_id"`
	CustomerStatus    string            `json:"customer_status"`
	FirstPurchaseDate *time.Time        `json:"first_purchase_date,omitempty"`
	Refusal           *AttributionError `json:"refusal,omitempty"`
	Replayed          bool              `json:"replayed"`
}

// AttributionError is why a payment is not attributed: code
// "no_attribution" and the Track sale table's message for the same rule
// (the commissions service's sale route answers with it).
type AttributionError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Failed implements endpoint.Failer.
func (r AttributionResponse) Failed() error { return r.Err }

// MakeAttributionEndpoint decides (or answers the stored decision of) one
// payment's attribution.
func MakeAttributionEndpoint(svc ingest.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		out, err := svc.Attribute(ctx, request.(AttributionRequest))
		if err != nil {
			return AttributionResponse{Err: err}, infrastructure(err)
		}
		d := &AttributionData{
			Outcome: out.Outcome, CustomerID: out.CustomerID, ClickID: out.ClickID, PartnerID: out.PartnerID, LinkID: out.LinkID,
			CustomerStatus: out.CustomerStatus, Replayed: out.Replayed,
		}
		if !out.FirstPurchaseDate.IsZero() {
			t := out.FirstPurchaseDate.UTC()
			d.FirstPurchaseDate = &t
		}
		if out.Outcome == ingest.AttributionRefused {
			d.Refusal = &AttributionError{Code: out.RefusalCode, Message: out.RefusalMessage}
		}
		return AttributionResponse{Data: d}, nil
	}
}

// infrastructure returns err when it is not a business refusal: those
// travel in the response, everything else is the endpoint's error.
func infrastructure(err error) error {
	var be *ingest.Error
	if errors.As(err, &be) {
		return nil
	}
	return err
}
