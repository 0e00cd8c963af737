// Package endpoints adapts programs.Service (the console's programs) to
// go-kit endpoints. Refusals travel in the response (Failer);
// infrastructure failures are endpoint errors.
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
	catalogendpoints "github.com/svc-dev/svc/services/accounts/internal/catalog/endpoints"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
	"github.com/svc-dev/svc/services/accounts/internal/programs"
)

// Set holds one endpoint per route.
type Set struct {
	Create endpoint.Endpoint
	List   endpoint.Endpoint
}

// New builds the endpoints, each decorated with mw (tracing), outermost first.
func New(svc programs.Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		Create: obs.Decorate("programs_create", makeCreate(svc), mw...),
		List:   obs.Decorate("programs_list", makeList(svc), mw...),
	}
}

// CreateRequest is a decoded POST /api/v1/programs.
type CreateRequest struct {
	UserID int64
	Input  programs.CreateInput
}

// ListRequest is a decoded GET /api/v1/programs; PageErr a bad limit or
// cursor.
type ListRequest struct {
	UserID  int64
	Page    programs.Page
	PageErr error
}

// CreateResponse is the new program (201, X-Catalog-Seq), or a refusal.
type CreateResponse struct {
	Data catalogendpoints.ProgramView `json:"data"`
	Err  error                        `json:"-"`
	seq  catalog.Seq
}

// MemberView is a listed program and the person's permissions in it.
type MemberView struct {
	catalogendpoints.ProgramView
	Permissions []string `json:"permissions"`
}

// ListResponse is a page: next_cursor is the cursor of the next page, null
// on the last.
type ListResponse struct {
	Data       []MemberView `json:"data"`
	NextCursor *string      `json:"next_cursor"`
	Err        error        `json:"-"`
}

var (
	_ endpoint.Failer = CreateResponse{}
	_ endpoint.Failer = ListResponse{}
)

func (r CreateResponse) Failed() error   { return r.Err }
func (r CreateResponse) StatusCode() int { return http.StatusCreated }

// Headers names the catalog sequence of the write, as the admin API and
// init do, so a script can wait on the sync barrier.
func (r CreateResponse) Headers() http.Header {
	h := http.Header{}
	if r.seq > 0 {
		h.Set("X-Catalog-Seq", strconv.FormatInt(int64(r.seq), 10))
	}
	return h
}

func (r ListResponse) Failed() error { return r.Err }

func public(err error) bool {
	var ie *identity.Error
	return errors.As(err, &ie) || errors.Is(err, errkind.Invalid) || errors.As(err, new(*httpkit.DecodeError))
}

func makeCreate(svc programs.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(CreateRequest)
		p, seq, err := svc.Create(ctx, r.UserID, r.Input)
		if err != nil {
			if public(err) {
				return CreateResponse{Err: err}, nil
			}
			return nil, err
		}
		return CreateResponse{Data: catalogendpoints.NewProgramView(p), seq: seq}, nil
	}
}

func makeList(svc programs.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(ListRequest)
		if r.PageErr != nil {
			return ListResponse{Err: r.PageErr}, nil
		}
		l, err := svc.List(ctx, r.UserID, r.Page)
		if err != nil {
			if public(err) {
				return ListResponse{Err: err}, nil
			}
			return nil, err
		}
		out := ListResponse{Data: make([]MemberView, 0, len(l.Programs))}
		for _, m := range l.Programs {
			out.Data = append(out.Data, MemberView{ProgramView: catalogendpoints.NewProgramView(m.Program), Permissions: m.Permissions})
		}
		if l.Next > 0 {
			c := strconv.FormatInt(l.Next, 10)
			out.NextCursor = &c
		}
		return out, nil
	}
}
