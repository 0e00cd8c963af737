// Package endpoints adapts cliauth.Service (command-line sign-in, init and
// programs) to go-kit endpoints. Refusals travel in the response (Failer);
// infrastructure failures are endpoint errors.
package endpoints

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	catalogendpoints "github.com/svc-dev/svc/services/accounts/internal/catalog/endpoints"
	"github.com/svc-dev/svc/services/accounts/internal/cliauth"
)

// Set holds one endpoint per route.
type Set struct {
	Start    endpoint.Endpoint
	Callback endpoint.Endpoint
	Poll     endpoint.Endpoint
	Init     endpoint.Endpoint
	Programs endpoint.Endpoint
}

// New builds the endpoints, each decorated with mw (tracing), outermost first.
func New(svc cliauth.Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		Start:    obs.Decorate("cli_auth_start", makeStart(svc), mw...),
		Callback: obs.Decorate("cli_auth_callback", makeCallback(svc), mw...),
		Poll:     obs.Decorate("cli_auth_poll", makePoll(svc), mw...),
		Init:     obs.Decorate("cli_init", makeInit(svc), mw...),
		Programs: obs.Decorate("cli_programs", makePrograms(svc), mw...),
	}
}

// response is every route's answer: Data under "data", or a refusal.
type response struct {
	Data   any   `json:"data"`
	Err    error `json:"-"`
	status int
	seq    catalog.Seq
}

func (r response) Failed() error   { return r.Err }
func (r response) StatusCode() int { return r.status }

// Headers names the catalog sequence of a write, as the admin API does, so
// a script can wait on the sync barrier before using what it made.
func (r response) Headers() http.Header {
	h := http.Header{}
	if r.seq > 0 {
		h.Set("X-Catalog-Seq", strconv.FormatInt(int64(r.seq), 10))
	}
	return h
}

// public reports whether err is a refusal the client is told about;
// anything else is an infrastructure failure and an endpoint error.
func public(err error) bool {
	var ce *cliauth.Error
	return errors.As(err, &ce) || errors.Is(err, errkind.Invalid)
}

func answer(data any, status int, seq catalog.Seq, err error) (any, error) {
	if err != nil {
		if public(err) {
			return response{Err: err}, nil
		}
		return nil, err
	}
	return response{Data: data, status: status, seq: seq}, nil
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func makeStart(svc cliauth.Service) endpoint.Endpoint {
	return func(ctx context.Context, _ any) (any, error) {
		s, err := svc.Start(ctx)
		return answer(map[string]any{"state": s.State, "url": s.URL, "expires_at": rfc3339(s.ExpiresAt)}, http.StatusCreated, 0, err)
	}
}

type CallbackRequest struct {
	State   string
	IDToken string
}

func makeCallback(svc cliauth.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(CallbackRequest)
		s, err := svc.Callback(ctx, r.State, r.IDToken)
		return answer(map[string]any{
			"status":  "signed_in",
			"message": "You are signed in. Return to your terminal to continue.",
			"user":    map[string]any{"id": s.User.ID, "email": s.User.Email},
		}, http.StatusOK, 0, err)
	}
}

type PollRequest struct{ State string }

func makePoll(svc cliauth.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		p, err := svc.Poll(ctx, req.(PollRequest).State)
		data := map[string]any{"status": p.Status}
		if p.Status == cliauth.StatusComplete {
			data["token"] = p.Token
			data["expires_at"] = rfc3339(p.TokenExpiresAt)
			data["user"] = userView(p.User)
		}
		return answer(data, http.StatusOK, 0, err)
	}
}

func userView(u catalog.User) map[string]any {
	var adv any
	if u.AdvertiserID != 0 {
		adv = u.AdvertiserID
	}
	return map[string]any{"id": u.ID, "email": u.Email, "advertiser_id": adv}
}

type InitRequest struct {
	User  catalog.User
	Input cliauth.InitInput
}

func makeInit(svc cliauth.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(InitRequest)
		out, err := svc.Init(ctx, r.User, r.Input)
		return answer(map[string]any{"program": catalogendpoints.ProgramView(out.Program), "api_key": out.APIKey}, http.StatusCreated, out.Seq, err)
	}
}

type ProgramsRequest struct{ User catalog.User }

func makePrograms(svc cliauth.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		ps, err := svc.Programs(ctx, req.(ProgramsRequest).User)
		views := make([]map[string]any, 0, len(ps))
		for _, p := range ps {
			views = append(views, catalogendpoints.ProgramView(p))
		}
		return answer(views, http.StatusOK, 0, err)
	}
}
