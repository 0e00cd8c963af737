// Package endpoints adapts the integration service to go-kit endpoints.
// Business errors (the integration kinds) travel in the response (Failer);
// infrastructure failures are endpoint errors, tagged with the operation so
// the transport can name it in the 500 message.
package endpoints

import (
	"context"
	"errors"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/obs"

	"github.com/svc-dev/svc/services/accounts/internal/integration"
)

// Operations, which decide the wording of a 500.
const (
	OpStatus    = "status"
	OpTestEvent = "test_event"
	OpChain     = "chain"
)

// OpError is an infrastructure failure of one operation.
type OpError struct {
	Op  string
	Err error
}

func (e *OpError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *OpError) Unwrap() error { return e.Err }

// Set holds the endpoints.
type Set struct {
	Status    endpoint.Endpoint
	TestEvent endpoint.Endpoint
}

// New builds the set and decorates every endpoint with mw, outermost first.
func New(svc integration.Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		Status:    obs.Decorate("cli_status", makeStatus(svc), mw...),
		TestEvent: obs.Decorate("cli_test_event", makeTestEvent(svc), mw...),
	}
}

// StatusRequest asks for the key's program's integration state.
type StatusRequest struct {
	ProgramID int64
}

// StatusResponse carries the state.
type StatusResponse struct {
	Status integration.Status
	Err    error
}

func (r StatusResponse) Failed() error { return r.Err }

var (
	_ endpoint.Failer = StatusResponse{}
	_ endpoint.Failer = TestEventResponse{}
)

// TestEventRequest is a decoded test-event body: Chain, or one EventType
// (as the client sent it, rendered as text; validated by the endpoint).
type TestEventRequest struct {
	Caller    integration.Caller
	Chain     bool
	EventType string
}

// TestEventResponse carries one recorded event or the chain's steps.
type TestEventResponse struct {
	EventType integration.EventType
	Event     integration.Recorded
	Chain     []integration.ChainStep
	ProgramID int64
	Err       error
}

func (r TestEventResponse) Failed() error { return r.Err }

// business tells the errors answered to the client from failures.
func business(err error) bool {
	return errors.As(err, new(*integration.InvalidEventTypeError)) || errors.Is(err, integration.ErrRateLimited)
}

func makeStatus(svc integration.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(StatusRequest)
		st, err := svc.Status(ctx, req.ProgramID)
		if err != nil {
			if business(err) {
				return StatusResponse{Err: err}, nil
			}
			return nil, &OpError{Op: OpStatus, Err: err}
		}
		return StatusResponse{Status: st}, nil
	}
}

func makeTestEvent(svc integration.Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(TestEventRequest)
		resp := TestEventResponse{ProgramID: req.Caller.ProgramID}
		op := OpTestEvent
		var err error
		if req.Chain {
			op = OpChain
			resp.Chain, err = svc.RunChain(ctx, req.Caller)
		} else {
			resp.EventType, err = integration.ParseEventType(req.EventType)
			if err == nil {
				resp.Event, err = svc.SendTestEvent(ctx, req.Caller, resp.EventType)
			}
		}
		if err != nil {
			if business(err) {
				return TestEventResponse{Err: err}, nil
			}
			return nil, &OpError{Op: op, Err: err}
		}
		return resp, nil
	}
}
