// Package endpoints adapts `svc listen`'s routes to go-kit endpoints.
// Business errors (refusals) travel in the response (Failer); only
// infrastructure failures are endpoint errors.
package endpoints

import (
	"context"
	"encoding/json"
	"time"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/webhooks/internal/listen"
)

// Service is `svc listen`'s use cases (listen.Service).
type Service interface {
	Check(ctx context.Context, c listen.Caller, programID int64) error
	Start(ctx context.Context, c listen.Caller, programID int64, in listen.Input) (listen.Started, error)
	Poll(ctx context.Context, c listen.Caller, programID, id, after int64, wait time.Duration) (listen.Page, error)
	Stop(ctx context.Context, c listen.Caller, programID, id int64) error
}

// Set holds one endpoint per route.
type Set struct {
	Start, Poll, Stop endpoint.Endpoint
}

// New builds the set, every endpoint decorated with mw, outermost first.
func New(svc Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		Start: obs.Decorate("webhooks_listen_start", makeStart(svc), mw...),
		Poll:  obs.Decorate("webhooks_listen_poll", makePoll(svc), mw...),
		Stop:  obs.Decorate("webhooks_listen_stop", makeStop(svc), mw...),
	}
}

// Target is who asks about which program and listener; Err is what the
// transport could not decode, reported after the access check.
type Target struct {
	Caller     listen.Caller
	ProgramID  int64
	ListenerID int64
	Err        error
}

// StartRequest starts a listener.
type StartRequest struct {
	Target
	Input listen.Input
}

// PollRequest polls a listener.
type PollRequest struct {
	Target
	After int64
	Wait  time.Duration
}

// StopRequest deletes a listener.
type StopRequest struct {
	Target
}

// Response is every route's answer: Data (nil for 204) or the refusal;
// After, when set, goes beside data (the poll's next position).
type Response struct {
	Data  any
	After *int64
	Err   error
}

// Failed is the refusal.
func (r Response) Failed() error { return r.Err }

// StartedView is a new listener as answered: the secret only here.
type StartedView struct {
	ID          int64     `json:"id"`
	Secret      string    `json:"secret"`
	After       int64     `json:"after"`
	Events      []string  `json:"events"`
	IncludeTest bool      `json:"include_test"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// EventView is one polled event; Body is the exact JSON the dispatcher
// signs and sends, embedded as it is.
type EventView struct {
	Seq  int64           `json:"seq"`
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Body json.RawMessage `json:"body"`
}

func failed(err error) bool { return errkind.Of(err) != errkind.Internal }

func answer(r Response, err error) (any, error) {
	if err != nil {
		if failed(err) {
			return Response{Err: err}, nil
		}
		return nil, err
	}
	return r, nil
}

// checkFirst answers a request the transport could not decode: the access
// refusal when there is one, otherwise the decoding problem.
func checkFirst(ctx context.Context, svc Service, t Target) error {
	if err := svc.Check(ctx, t.Caller, t.ProgramID); err != nil {
		return err
	}
	return t.Err
}

func makeStart(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(StartRequest)
		if req.Err != nil {
			return answer(Response{}, checkFirst(ctx, svc, req.Target))
		}
		s, err := svc.Start(ctx, req.Caller, req.ProgramID, req.Input)
		if err != nil {
			return answer(Response{}, err)
		}
		return Response{Data: StartedView{ID: s.ID, Secret: s.Secret, After: s.After, Events: s.Events, IncludeTest: s.IncludeTest,
			ExpiresAt: s.ExpiresAt}}, nil
	}
}

func makePoll(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(PollRequest)
		if req.Err != nil {
			return answer(Response{}, checkFirst(ctx, svc, req.Target))
		}
		p, err := svc.Poll(ctx, req.Caller, req.ProgramID, req.ListenerID, req.After, req.Wait)
		if err != nil {
			return answer(Response{}, err)
		}
		views := make([]EventView, 0, len(p.Events))
		for _, e := range p.Events {
			views = append(views, EventView{Seq: e.Seq, ID: e.ID, Type: e.Type, Body: e.Body})
		}
		after := p.After
		return Response{Data: views, After: &after}, nil
	}
}

func makeStop(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(StopRequest)
		if req.Err != nil {
			return answer(Response{}, checkFirst(ctx, svc, req.Target))
		}
		return answer(Response{}, svc.Stop(ctx, req.Caller, req.ProgramID, req.ListenerID))
	}
}
