// Package endpoints adapts the processor webhook to a go-kit endpoint:
// its request (a verified event) and its answer. Refused events travel in
// the response (Failer); only failures are endpoint errors.
package endpoints

import (
	"context"
	"errors"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/commissions/internal/processor"
)

// Service is the webhook's use case (*processor.Service).
type Service interface {
	Handle(ctx context.Context, ev processor.Event) (processor.Result, error)
}

// Set holds the webhook's endpoint.
type Set struct {
	Event endpoint.Endpoint
}

// New builds the set, each endpoint decorated with mw.
func New(svc Service, mw ...obs.EndpointMiddleware) Set {
	return Set{Event: obs.Decorate("processor_event", makeEvent(svc), mw...)}
}

// EventRequest is a verified delivery.
type EventRequest = processor.Event

// EventResponse answers a delivery: {received, outcome, duplicate?,
// sale_id?, customer_status?}.
type EventResponse struct {
	Received       bool   `json:"received"`
	Outcome        string `json:"outcome"`
	Duplicate      bool   `json:"duplicate,omitempty"`
	SaleID         int64  `json:"sale_id,omitempty"`
	CustomerStatus string `json:"customer_status,omitempty"`
	Err            error  `json:"-"`
}

var _ endpoint.Failer = EventResponse{}

// Failed implements endpoint.Failer.
func (r EventResponse) Failed() error { return r.Err }

func makeEvent(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		out, err := svc.Handle(ctx, request.(EventRequest))
		if err != nil {
			var pe *processor.Error
			if errors.As(err, &pe) && errkind.Status(err) < 500 {
				return EventResponse{Err: err}, nil
			}
			return EventResponse{Err: err}, err
		}
		return EventResponse{Received: true, Outcome: out.Outcome, Duplicate: out.Duplicate, SaleID: out.SaleID, CustomerStatus: out.CustomerStatus}, nil
	}
}
