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
	Confirm  endpoint.Endpoint
	Poll     endpoint.Endpoint
	Init     endpoint.Endpoint
	Programs endpoint.Endpoint
}

// New builds the endpoints, each decorated with mw (tracing), outermost first.
func New(svc cliauth.Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		Start:    obs.Decorate("cli_auth_start", makeStart(svc), mw...),
		Callback: obs.Decorate("cli_auth_callback", makeCallback(svc), mw...),
		Confirm:  obs.Decorate("cli_auth_confirm", makeConfirm(svc), mw...),
		Poll:     obs.Decorate("cli_auth_poll", makePoll(svc), mw...),
		Init:     obs.Decorate("cli_init", makeInit(svc), mw...),
		Programs: obs.Decorate("cli_programs", makePrograms(svc), mw...),
	}
}

// Response is every route's answer: Data under "data", or a refusal. Data
// structs list their fields in the order of their JSON names (the bodies
// are byte for byte those of the maps they replaced).
type Response[T any] struct {
	Data   T     `json:"data"`
	Err    error `json:"-"`
	status int
	seq    catalog.Seq
}

func (r Response[T]) Failed() error   { return r.Err }
func (r Response[T]) StatusCode() int { return r.status }

// Headers names the catalog sequence of a write, as the admin API does, so
// a script can wait on the sync barrier before using what it made.
func (r Response[T]) Headers() http.Header {
	h := http.Header{}
	if r.seq > 0 {
		h.Set("X-Catalog-Seq", strconv.FormatInt(int64(r.seq), 10))
	}
	return h
}

var (
	_ endpoint.Failer = Response[StartData]{}
	_ endpoint.Failer = Response[CallbackData]{}
	_ endpoint.Failer = Response[ConfirmData]{}
	_ endpoint.Failer = Response[PollData]{}
	_ endpoint.Failer = Response[InitData]{}
	_ endpoint.Failer = Response[[]catalogendpoints.ProgramView]{}
)

// public reports whether err is a refusal the client is told about;
// anything else is an infrastructure failure and an endpoint error.
func public(err error) bool {
	var ce *cliauth.Error
	return errors.As(err, &ce) || errors.Is(err, errkind.Invalid)
}

func answer[T any](data T, status int, seq catalog.Seq, err error) (any, error) {
	if err != nil {
		if public(err) {
			return Response[T]{Err: err}, nil
		}
		return nil, err
	}
	return Response[T]{Data: data, status: status, seq: seq}, nil
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func makeStart(svc cliauth.Service) endpoint.Endpoint {
	return func(ctx context.Context, _ any) (any, error) {
		s, err := svc.Start(ctx)
		return answer(StartData{ExpiresAt: rfc3339(s.ExpiresAt), State: s.State, URL: s.URL, UserCode: s.UserCode}, http.StatusCreated, 0, err)
	}
}

// StartData answers auth/start. UserCode is for the CLI to print: the
// landing page shows the same code before the person confirms.
type StartData struct {
	ExpiresAt string `json:"expires_at"`
	State     string `json:"state"`
	URL       string `json:"url"`
	UserCode  string `json:"user_code"`
}

// CallbackRequest is a sign-in callback's {state, id_token}.

type CallbackRequest struct {
	State   string
	IDToken string
}

// StatusConfirmationRequired is the callback's status: signed in at the
// provider, the login token waits for the person to confirm the code.
const StatusConfirmationRequired = "confirmation_required"

// CallbackData answers a sign-in: the code to compare with the terminal's,
// and the one-time value that confirms it (auth/confirm).
type CallbackData struct {
	ConfirmToken string       `json:"confirm_token"`
	ConfirmURL   string       `json:"confirm_url"`
	Message      string       `json:"message"`
	Status       string       `json:"status"`
	User         CallbackUser `json:"user"`
	UserCode     string       `json:"user_code"`
}

// ConfirmPath is where the landing page confirms.
const ConfirmPath = "/api/v1/cli/auth/confirm"

// CallbackUser names the signed-in user.
type CallbackUser struct {
	Email string `json:"email"`
	ID    int64  `json:"id"`
}

func makeCallback(svc cliauth.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(CallbackRequest)
		s, err := svc.Callback(ctx, r.State, r.IDToken)
		return answer(CallbackData{
			ConfirmToken: s.ConfirmToken,
			ConfirmURL:   ConfirmPath,
			Message: "Check that your terminal shows the code " + s.UserCode + ", then confirm. " +
				"If you did not run \"svc login\" yourself, do not confirm: someone else would be signed in as you.",
			Status:   StatusConfirmationRequired,
			User:     CallbackUser{Email: s.User.Email, ID: s.User.ID},
			UserCode: s.UserCode,
		}, http.StatusOK, 0, err)
	}
}

// ConfirmRequest is auth/confirm's one-time value.
type ConfirmRequest struct{ ConfirmToken string }

// ConfirmData answers a confirmation.
type ConfirmData struct {
	Message  string       `json:"message"`
	Status   string       `json:"status"`
	User     CallbackUser `json:"user"`
	UserCode string       `json:"user_code"`
}

func makeConfirm(svc cliauth.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		c, err := svc.Confirm(ctx, req.(ConfirmRequest).ConfirmToken)
		return answer(ConfirmData{
			Message:  "You are signed in. Return to your terminal to continue.",
			Status:   "confirmed",
			User:     CallbackUser{Email: c.User.Email, ID: c.User.ID},
			UserCode: c.UserCode,
		}, http.StatusOK, 0, err)
	}
}

// PollRequest asks for the state of the sign-in session with State.
type PollRequest struct{ State string }

// PollData answers a poll: the status, and once complete the login token,
// its expiry and the user.
type PollData struct {
	ExpiresAt string    `json:"expires_at,omitempty"`
	Status    string    `json:"status"`
	Token     string    `json:"token,omitempty"`
	User      *UserData `json:"user,omitempty"`
}

// UserData is the signed-in user as the poll shows it; advertiser_id is
// null for a user without an advertiser.
type UserData struct {
	AdvertiserID *int64 `json:"advertiser_id"`
	Email        string `json:"email"`
	ID           int64  `json:"id"`
}

func makePoll(svc cliauth.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		p, err := svc.Poll(ctx, req.(PollRequest).State)
		data := PollData{Status: p.Status}
		if p.Status == cliauth.StatusComplete {
			data.Token = p.Token
			data.ExpiresAt = rfc3339(p.TokenExpiresAt)
			data.User = userData(p.User)
		}
		return answer(data, http.StatusOK, 0, err)
	}
}

func userData(u catalog.User) *UserData {
	d := &UserData{Email: u.Email, ID: u.ID}
	if u.AdvertiserID != 0 {
		adv := u.AdvertiserID
		d.AdvertiserID = &adv
	}
	return d
}

// InitRequest creates a program for the signed-in User.
type InitRequest struct {
	User  catalog.User
	Input cliauth.InitInput
}

// InitData answers init: the program and its first live key.
type InitData struct {
	APIKey  string                       `json:"api_key"`
	Program catalogendpoints.ProgramView `json:"program"`
}

func makeInit(svc cliauth.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(InitRequest)
		out, err := svc.Init(ctx, r.User, r.Input)
		return answer(InitData{APIKey: out.APIKey, Program: catalogendpoints.NewProgramView(out.Program)}, http.StatusCreated, out.Seq, err)
	}
}

// ProgramsRequest lists the signed-in User's advertiser's programs.
type ProgramsRequest struct{ User catalog.User }

func makePrograms(svc cliauth.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		ps, err := svc.Programs(ctx, req.(ProgramsRequest).User)
		views := make([]catalogendpoints.ProgramView, 0, len(ps))
		for _, p := range ps {
			views = append(views, catalogendpoints.NewProgramView(p))
		}
		return answer(views, http.StatusOK, 0, err)
	}
}
