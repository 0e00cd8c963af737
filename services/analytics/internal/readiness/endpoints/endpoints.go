// Package endpoints adapts readiness to a go-kit endpoint.
package endpoints

import (
	"context"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/analytics/internal/readiness"
)

// Service is readiness' use case (*readiness.Service).
type Service interface {
	Check(ctx context.Context, programID int64, testKey bool) (readiness.Readiness, error)
}

// Set holds the endpoint.
type Set struct {
	Readiness endpoint.Endpoint
}

// New builds the set, each endpoint decorated with mw.
func New(svc Service, mw ...obs.EndpointMiddleware) Set {
	return Set{Readiness: obs.Decorate("readiness", makeReadiness(svc), mw...)}
}

// Request is the authenticated key's program.
type Request struct {
	ProgramID int64
	TestKey   bool
}

// Response is {data: {ready, checks}}.
type Response struct {
	Data readiness.Readiness `json:"data"`
}

func makeReadiness(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(Request)
		r, err := svc.Check(ctx, req.ProgramID, req.TestKey)
		if err != nil {
			return nil, err
		}
		return Response{Data: r}, nil
	}
}
