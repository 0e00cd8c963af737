// Package endpoints adapts processorconnect.Service (the console's payment
// processor connection) to go-kit endpoints. Refusals travel in the
// response (Failer); infrastructure failures are endpoint errors.
package endpoints

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	catalogendpoints "github.com/svc-dev/svc/services/accounts/internal/catalog/endpoints"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
	"github.com/svc-dev/svc/services/accounts/internal/processorconnect"
)

// Set holds one endpoint per route.
type Set struct {
	Connect    endpoint.Endpoint
	Callback   endpoint.Endpoint
	Disconnect endpoint.Endpoint
}

// New builds the endpoints, each decorated with mw (tracing), outermost first.
func New(svc processorconnect.Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		Connect:    obs.Decorate("program_processor_connect", makeConnect(svc), mw...),
		Callback:   obs.Decorate("processor_connect_callback", makeCallback(svc), mw...),
		Disconnect: obs.Decorate("program_processor_disconnect", makeDisconnect(svc), mw...),
	}
}

// Request is a decoded connect or disconnect request.
type Request struct {
	UserID    int64
	ProgramID int64
}

// CallbackRequest is the processor's redirect: code and state, or error
// when the person declined.
type CallbackRequest struct {
	Code, State, Error string
	// BadInput is a query the processor never sends (a repeated or
	// malformed parameter): refused before the state is looked at.
	BadInput bool
}

// Response is a route's answer: Data under "data", or a refusal.
type Response struct {
	Data any   `json:"data"`
	Err  error `json:"-"`
	seq  catalog.Seq
}

// CallbackResponse is the callback's answer: the program connected, or a
// refusal shown on an HTML page.
type CallbackResponse struct {
	ProgramID int64
	Seq       catalog.Seq
	Err       error
}

var (
	_ endpoint.Failer = Response{}
	_ endpoint.Failer = CallbackResponse{}
)

func (r Response) Failed() error         { return r.Err }
func (r CallbackResponse) Failed() error { return r.Err }

// Headers carry X-Catalog-Seq on a change: the catalog sequence to wait
// for (GET /admin/v1/catalog/sync) before expecting every service to see it.
func (r Response) Headers() http.Header {
	h := http.Header{}
	if r.seq > 0 {
		h.Set("X-Catalog-Seq", strconv.FormatInt(int64(r.seq), 10))
	}
	return h
}

// ConnectView is the connect answer.
type ConnectView struct {
	URL string `json:"url"`
}

func public(err error) bool {
	var ie *identity.Error
	return errors.As(err, &ie)
}

func makeConnect(svc processorconnect.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		u, err := svc.Connect(ctx, r.UserID, r.ProgramID)
		if err != nil {
			if public(err) {
				return Response{Err: err}, nil
			}
			return nil, err
		}
		return Response{Data: ConnectView{URL: u}}, nil
	}
}

func makeDisconnect(svc processorconnect.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		p, seq, err := svc.Disconnect(ctx, r.UserID, r.ProgramID)
		if err != nil {
			if public(err) {
				return Response{Err: err}, nil
			}
			return nil, err
		}
		return Response{Data: catalogendpoints.NewProgramView(p).ProcessorConnection, seq: seq}, nil
	}
}

func makeCallback(svc processorconnect.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(CallbackRequest)
		if r.BadInput {
			return CallbackResponse{Err: processorconnect.ErrBadCallback}, nil
		}
		p, seq, err := svc.Callback(ctx, r.Code, r.State, r.Error)
		if err != nil {
			// A processor failure is the person's to retry, and its text
			// stays in the log (the transport logs Cause).
			if public(err) {
				return CallbackResponse{Err: err}, nil
			}
			return nil, err
		}
		return CallbackResponse{ProgramID: p.ID, Seq: seq}, nil
	}
}
