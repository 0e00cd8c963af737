// Package endpoints adapts the ingest service to go-kit endpoints. Business
// errors travel in the response (Failer); only infrastructure failures are
// endpoint errors.
package endpoints

import (
	"context"
	"errors"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// Set holds one endpoint per tracking route.
type Set struct {
	Click  endpoint.Endpoint
	Lead   endpoint.Endpoint
	Visit  endpoint.Endpoint
	Config endpoint.Endpoint
	Sale   endpoint.Endpoint
	// ProcessorEvent handles one payment-processor webhook delivery.
	ProcessorEvent endpoint.Endpoint
}

// Middleware decorates one named endpoint.
type Middleware func(name string) endpoint.Middleware

// New builds the set, wrapping each endpoint in mw (outermost first).
func New(svc ingest.Service, mw ...Middleware) Set {
	wrap := func(name string, e endpoint.Endpoint) endpoint.Endpoint {
		for i := len(mw) - 1; i >= 0; i-- {
			e = mw[i](name)(e)
		}
		return e
	}
	return Set{
		Click: wrap("click", func(ctx context.Context, req any) (any, error) {
			out, err := svc.Click(ctx, req.(ingest.ClickInput))
			return respond(out, err)
		}),
		Lead: wrap("lead", func(ctx context.Context, req any) (any, error) {
			out, err := svc.Lead(ctx, req.(ingest.LeadInput))
			return respond(out, err)
		}),
		Visit: wrap("visit", func(ctx context.Context, req any) (any, error) {
			return respond(nil, svc.Visit(ctx, req.(ingest.VisitInput)))
		}),
		Config: wrap("config", func(ctx context.Context, req any) (any, error) {
			out, err := svc.Config(ctx, req.(ingest.ProgramRef))
			return respond(out, err)
		}),
		Sale: wrap("sale", func(ctx context.Context, req any) (any, error) {
			out, err := svc.Sale(ctx, req.(ingest.SaleInput))
			return respond(out, err)
		}),
		ProcessorEvent: wrap("processor_event", func(ctx context.Context, req any) (any, error) {
			out, err := svc.ProcessorPayment(ctx, req.(ingest.PaymentInput))
			return respond(out, err)
		}),
	}
}

// Response carries a use case's result or its business error.
type Response struct {
	Value any
	Err   error
}

// Failed implements endpoint.Failer.
func (r Response) Failed() error { return r.Err }

func respond(v any, err error) (any, error) {
	var be *ingest.Error
	if err != nil && !errors.As(err, &be) {
		return nil, err
	}
	return Response{Value: v, Err: err}, nil
}
