// Package endpoints adapts sessions.Service to go-kit endpoints. A
// sign-out has no business refusal; a failure to store it is an endpoint
// error.
package endpoints

import (
	"context"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/accounts/internal/sessions"
)

// Set holds one endpoint per use case.
type Set struct {
	SignOut endpoint.Endpoint
}

// New builds the endpoints, each decorated with mw (tracing).
func New(svc sessions.Service, mw ...obs.EndpointMiddleware) Set {
	return Set{SignOut: obs.Decorate("dashboard_auth_signout", makeSignOut(svc), mw...)}
}

// SignOutRequest is the session token the sign-out names ("" for none).
type SignOutRequest struct{ Token string }

// SignOutResponse is what the sign-out did.
type SignOutResponse struct{ SignedOut sessions.SignedOut }

func makeSignOut(svc sessions.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		out, err := svc.SignOut(ctx, req.(SignOutRequest).Token)
		if err != nil {
			return nil, err
		}
		return SignOutResponse{SignedOut: out}, nil
	}
}
