// Package endpoints adapts members.Service (the console's team) to go-kit
// endpoints. Refusals travel in the response (Failer); infrastructure
// failures are endpoint errors.
package endpoints

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
	"github.com/svc-dev/svc/services/accounts/internal/members"
)

// Set holds one endpoint per route.
type Set struct {
	List   endpoint.Endpoint
	Add    endpoint.Endpoint
	Remove endpoint.Endpoint
}

// New builds the endpoints, each decorated with mw (tracing), outermost first.
func New(svc members.Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		List:   obs.Decorate("program_members_list", makeList(svc), mw...),
		Add:    obs.Decorate("program_members_add", makeAdd(svc), mw...),
		Remove: obs.Decorate("program_members_remove", makeRemove(svc), mw...),
	}
}

// Request is a decoded team request; the fields a route does not use are
// zero.
type Request struct {
	UserID    int64
	ProgramID int64
	// MemberID is the path's user id; 0 when it is not a positive integer
	// (nobody has it: 404 once access is checked).
	MemberID    int64
	Page        members.Page
	Email       string
	Permissions []string
	// BodyErr is a body or query problem, reported only once access is
	// checked, so a non-member learns nothing from validation.
	BodyErr error
}

// Response is a change's answer: Data under "data", or a refusal.
type Response struct {
	Data   any   `json:"data"`
	Err    error `json:"-"`
	seq    catalog.Seq
	status int
}

// ListResponse is a list page.
type ListResponse struct {
	Data       []MemberView `json:"data"`
	NextCursor *string      `json:"next_cursor"`
	Err        error        `json:"-"`
}

var (
	_ endpoint.Failer = Response{}
	_ endpoint.Failer = ListResponse{}
)

func (r Response) Failed() error     { return r.Err }
func (r ListResponse) Failed() error { return r.Err }

// StatusCode is 201 for an added member, else 200.
func (r Response) StatusCode() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// Headers carry X-Catalog-Seq on a change: the catalog sequence to wait
// for (GET /admin/v1/catalog/sync) before expecting every service to see it.
func (r Response) Headers() http.Header {
	h := http.Header{}
	if r.seq > 0 {
		h.Set("X-Catalog-Seq", strconv.FormatInt(int64(r.seq), 10))
	}
	return h
}

// MemberView is a member as the console shows it.
type MemberView struct {
	UserID      int64    `json:"user_id"`
	Email       string   `json:"email"`
	Name        string   `json:"name"`
	Permissions []string `json:"permissions"`
	Active      bool     `json:"active"`
}

// NewMemberView renders m.
func NewMemberView(m members.Member) MemberView {
	return MemberView{UserID: m.UserID, Email: m.Email, Name: m.Name, Permissions: m.Permissions, Active: m.Active}
}

func public(err error) bool {
	var ie *identity.Error
	return errors.As(err, &ie) || errors.Is(err, errkind.Invalid) || errors.As(err, new(*httpkit.DecodeError))
}

func answer(data any, seq catalog.Seq, status int, err error) (any, error) {
	if err != nil {
		if public(err) {
			return Response{Err: err}, nil
		}
		return nil, err
	}
	return Response{Data: data, seq: seq, status: status}, nil
}

func makeList(svc members.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		if r.BodyErr != nil {
			// Membership first: a non-member learns nothing from the query.
			if err := svc.CanRead(ctx, r.UserID, r.ProgramID); err != nil {
				return answerList(err)
			}
			return ListResponse{Err: r.BodyErr}, nil
		}
		l, err := svc.List(ctx, r.UserID, r.ProgramID, r.Page)
		if err != nil {
			return answerList(err)
		}
		out := ListResponse{Data: make([]MemberView, 0, len(l.Members))}
		for _, m := range l.Members {
			out.Data = append(out.Data, NewMemberView(m))
		}
		if l.Next > 0 {
			c := strconv.FormatInt(l.Next, 10)
			out.NextCursor = &c
		}
		return out, nil
	}
}

func answerList(err error) (any, error) {
	if public(err) {
		return ListResponse{Err: err}, nil
	}
	return nil, err
}

func makeAdd(svc members.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		if r.BodyErr != nil {
			if err := svc.CanChange(ctx, r.UserID, r.ProgramID); err != nil {
				return answer(nil, 0, 0, err)
			}
			return Response{Err: r.BodyErr}, nil
		}
		m, seq, err := svc.Add(ctx, r.UserID, r.ProgramID, r.Email, r.Permissions)
		return answer(NewMemberView(m), seq, http.StatusCreated, err)
	}
}

func makeRemove(svc members.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		m, seq, err := svc.Remove(ctx, r.UserID, r.ProgramID, r.MemberID)
		return answer(NewMemberView(m), seq, 0, err)
	}
}
