// Package endpoints adapts partnerfigures to a go-kit endpoint.
package endpoints

import (
	"context"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/analytics/internal/partnerfigures"
)

// Service is the use case (*partnerfigures.Service).
type Service interface {
	Figures(ctx context.Context, programID int64, partners []int64) ([]partnerfigures.Figures, partnerfigures.Window, error)
}

// Set holds the endpoint.
type Set struct {
	Figures endpoint.Endpoint
}

// New builds the set, each endpoint decorated with mw.
func New(svc Service, mw ...obs.EndpointMiddleware) Set {
	return Set{Figures: obs.Decorate("partner_figures", makeFigures(svc), mw...)}
}

// Request names the program and the page's partners.
type Request struct {
	ProgramID int64
	Partners  []int64
}

// Response is {data: [figures in the order asked], window: {from, to}}.
type Response struct {
	Data   []partnerfigures.Figures `json:"data"`
	Window partnerfigures.Window    `json:"window"`
}

func makeFigures(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(Request)
		f, w, err := svc.Figures(ctx, req.ProgramID, req.Partners)
		if err != nil {
			return nil, err
		}
		return Response{Data: f, Window: w}, nil
	}
}
