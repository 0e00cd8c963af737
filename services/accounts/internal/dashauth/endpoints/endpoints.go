// Package endpoints adapts dashauth.Service to go-kit endpoints. Refusals
// travel in the response (Failer); infrastructure failures are endpoint
// errors.
package endpoints

import (
	"context"
	"errors"
	"time"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/accounts/internal/dashauth"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// Set holds one endpoint per use case.
type Set struct {
	Start    endpoint.Endpoint
	Callback endpoint.Endpoint
	Me       endpoint.Endpoint
}

// New builds the endpoints, each decorated with mw (tracing).
func New(svc dashauth.Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		Start:    obs.Decorate("dashboard_auth_start", makeStart(svc), mw...),
		Callback: obs.Decorate("dashboard_auth_callback", makeCallback(svc), mw...),
		Me:       obs.Decorate("dashboard_me", makeMe(svc), mw...),
	}
}

// StartRequest is GET auth/start's return_to and tab_nonce.
type StartRequest struct{ ReturnTo, TabNonce string }

// StartResponse carries the provider's URL (a redirect) and the state the
// transport binds to the browser.
type StartResponse struct {
	Started dashauth.Started
	Err     error
}

// CallbackRequest is the provider's form post plus the browser's cookie.
type CallbackRequest struct {
	State, IDToken, BrowserState string
}

// CallbackResponse carries the session token and where it goes.
type CallbackResponse struct {
	SignedIn dashauth.SignedIn
	Err      error
}

// MeRequest names the session's user.
type MeRequest struct{ UserID int64 }

// MeResponse answers GET /api/v1/dashboard/me.
type MeResponse struct {
	Data MeData `json:"data"`
	Err  error  `json:"-"`
}

// MeData is the user, their workspaces and their programs.
type MeData struct {
	Programs   []ProgramView   `json:"programs"`
	User       UserView        `json:"user"`
	Workspaces []WorkspaceView `json:"workspaces"`
}

// WorkspaceView is one workspace (advertiser) of the user: owner when it
// is their own, false when they work in it through a program membership.
type WorkspaceView struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Owner bool   `json:"owner"`
}

// UserView is the signed-in user.
type UserView struct {
	Email string `json:"email"`
	ID    int64  `json:"id"`
	Name  string `json:"name"`
}

// ProgramView is one program of the picker.
type ProgramView struct {
	AdvertiserID int64    `json:"advertiser_id"`
	Domain       string   `json:"domain"`
	ID           int64    `json:"id"`
	Name         string   `json:"name"`
	Permissions  []string `json:"permissions"`
}

func (r StartResponse) Failed() error    { return r.Err }
func (r CallbackResponse) Failed() error { return r.Err }
func (r MeResponse) Failed() error       { return r.Err }

var (
	_ endpoint.Failer = StartResponse{}
	_ endpoint.Failer = CallbackResponse{}
	_ endpoint.Failer = MeResponse{}
)

// public reports whether err is a refusal the client is told about.
func public(err error) bool {
	var ce *identity.Error
	return errors.As(err, &ce) || errors.Is(err, errkind.Invalid)
}

func makeStart(svc dashauth.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(StartRequest)
		s, err := svc.Start(ctx, r.ReturnTo, r.TabNonce)
		if err != nil && !public(err) {
			return nil, err
		}
		return StartResponse{Started: s, Err: err}, nil
	}
}

func makeCallback(svc dashauth.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(CallbackRequest)
		s, err := svc.Callback(ctx, r.State, r.IDToken, r.BrowserState)
		if err != nil && !public(err) {
			return nil, err
		}
		return CallbackResponse{SignedIn: s, Err: err}, nil
	}
}

func makeMe(svc dashauth.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		m, err := svc.Me(ctx, req.(MeRequest).UserID)
		if err != nil {
			if public(err) {
				return MeResponse{Err: err}, nil
			}
			return nil, err
		}
		d := MeData{User: UserView{Email: m.User.Email, ID: m.User.ID, Name: m.User.Name},
			Programs: make([]ProgramView, 0, len(m.Programs)), Workspaces: make([]WorkspaceView, 0, len(m.Workspaces))}
		for _, p := range m.Programs {
			d.Programs = append(d.Programs, ProgramView{AdvertiserID: p.AdvertiserID, Domain: p.Domain, ID: p.ProgramID, Name: p.Name, Permissions: p.Permissions})
		}
		for _, w := range m.Workspaces {
			d.Workspaces = append(d.Workspaces, WorkspaceView{ID: w.ID, Name: w.Name, Owner: w.Owner})
		}
		return MeResponse{Data: d}, nil
	}
}

// RFC3339 formats an expiry as the API does.
func RFC3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }
