// Package endpoints adapts partners.Service (the console's partner and
// link changes) to go-kit endpoints. Refusals travel in the response
// (Failer); infrastructure failures are endpoint errors.
package endpoints

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/partners"
)

// Set holds one endpoint per route.
type Set struct {
	Invite     endpoint.Endpoint
	Approve    endpoint.Endpoint
	Reject     endpoint.Endpoint
	CreateLink endpoint.Endpoint
	UpdateLink endpoint.Endpoint
	List       endpoint.Endpoint
}

// New builds the endpoints, each decorated with mw (tracing), outermost first.
func New(svc partners.Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		Invite:     obs.Decorate("program_partners_invite", makeInvite(svc), mw...),
		Approve:    obs.Decorate("program_partners_approve", makeApproval(svc, true), mw...),
		Reject:     obs.Decorate("program_partners_reject", makeApproval(svc, false), mw...),
		CreateLink: obs.Decorate("program_partner_links_create", makeCreateLink(svc), mw...),
		UpdateLink: obs.Decorate("program_links_update", makeUpdateLink(svc), mw...),
		List:       obs.Decorate("program_partners_list", makeList(svc), mw...),
	}
}

// Request is a decoded partner request; the fields a route does not use
// are zero.
type Request struct {
	UserID    int64
	ProgramID int64
	// PartnerID and LinkID are the path's ids; 0 when not a positive
	// integer (none has it: 404 once access is checked).
	PartnerID int64
	LinkID    int64
	Partner   catalog.PartnerInput
	// Code is the link code asked for; nil to generate one.
	Code   *string
	Active bool
	// BodyErr is a body problem, reported only once the permission to
	// change is checked, so a non-member or a reader learns nothing from
	// validation.
	BodyErr error
}

// Response is every route's answer: Data under "data", or a refusal.
type Response struct {
	Data   any   `json:"data"`
	Err    error `json:"-"`
	seq    catalog.Seq
	status int
}

var _ endpoint.Failer = Response{}

func (r Response) Failed() error { return r.Err }

// StatusCode is 201 for a creation, else 200.
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

// PartnerView is a partner.
type PartnerView struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Email     string `json:"email"`
	CreatedAt string `json:"created_at"`
}

// PartnerProgramView is a partner's record in the program; Status is
// "approved" or "rejected".
type PartnerProgramView struct {
	ID        int64  `json:"id"`
	PartnerID int64  `json:"partner_id"`
	ProgramID int64  `json:"program_id"`
	Approved  bool   `json:"approved"`
	Status    string `json:"status"`
	CreatedAt string `json:"created_at"`
}

// LinkView is a referral link.
type LinkView struct {
	ID        int64  `json:"id"`
	ProgramID int64  `json:"program_id"`
	PartnerID int64  `json:"partner_id"`
	Code      string `json:"code"`
	Active    bool   `json:"active"`
	CreatedAt string `json:"created_at"`
}

// InvitedView answers an invitation.
type InvitedView struct {
	Partner        PartnerView        `json:"partner"`
	PartnerProgram PartnerProgramView `json:"partner_program"`
	Link           LinkView           `json:"link"`
}

// ApprovalView answers an approval or rejection.
type ApprovalView struct {
	PartnerProgram PartnerProgramView `json:"partner_program"`
	// LinksTurnedOff are the partner's links a rejection turned off.
	LinksTurnedOff []LinkView `json:"links_turned_off"`
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func partnerProgramView(pp catalog.PartnerProgram) PartnerProgramView {
	status := "rejected"
	if pp.Approved {
		status = "approved"
	}
	return PartnerProgramView{ID: pp.ID, PartnerID: pp.PartnerID, ProgramID: pp.ProgramID, Approved: pp.Approved, Status: status, CreatedAt: rfc3339(pp.CreatedAt)}
}

func linkView(l catalog.Link) LinkView {
	return LinkView{ID: l.ID, ProgramID: l.ProgramID, PartnerID: l.PartnerID, Code: l.Code, Active: l.Active, CreatedAt: rfc3339(l.CreatedAt)}
}

func public(err error) bool {
	return errors.Is(err, errkind.Invalid) || errors.Is(err, errkind.NotFound) || errors.Is(err, errkind.Forbidden) ||
		errors.Is(err, errkind.Conflict) || errors.As(err, new(*httpkit.DecodeError))
}

func answer(data func() any, seq catalog.Seq, status int, err error) (any, error) {
	if err != nil {
		if public(err) {
			return Response{Err: err}, nil
		}
		return nil, err
	}
	return Response{Data: data(), seq: seq, status: status}, nil
}

// refuseBody answers a malformed change once the caller may change
// partners.
func refuseBody(ctx context.Context, svc partners.Service, r Request) (any, error) {
	if err := svc.CanChange(ctx, r.UserID, r.ProgramID); err != nil {
		return answer(nil, 0, 0, err)
	}
	return Response{Err: r.BodyErr}, nil
}

func makeInvite(svc partners.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		if r.BodyErr != nil {
			return refuseBody(ctx, svc, r)
		}
		inv, seq, err := svc.Invite(ctx, r.UserID, r.ProgramID, r.Partner, r.Code)
		return answer(func() any {
			p := inv.Partner
			return InvitedView{
				Partner:        PartnerView{ID: p.ID, Name: p.Name, Email: p.Email, CreatedAt: rfc3339(p.CreatedAt)},
				PartnerProgram: partnerProgramView(inv.PartnerProgram), Link: linkView(inv.Link),
			}
		}, seq, http.StatusCreated, err)
	}
}

func makeApproval(svc partners.Service, approved bool) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		a, seq, err := svc.SetApproval(ctx, r.UserID, r.ProgramID, r.PartnerID, approved)
		return answer(func() any {
			off := make([]LinkView, 0, len(a.LinksTurnedOff))
			for _, l := range a.LinksTurnedOff {
				off = append(off, linkView(l))
			}
			return ApprovalView{PartnerProgram: partnerProgramView(a.PartnerProgram), LinksTurnedOff: off}
		}, seq, 0, err)
	}
}

func makeCreateLink(svc partners.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		if r.BodyErr != nil {
			return refuseBody(ctx, svc, r)
		}
		l, seq, err := svc.CreateLink(ctx, r.UserID, r.ProgramID, r.PartnerID, r.Code)
		return answer(func() any { return linkView(l) }, seq, http.StatusCreated, err)
	}
}

func makeUpdateLink(svc partners.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		if r.BodyErr != nil {
			return refuseBody(ctx, svc, r)
		}
		l, seq, err := svc.SetLinkActive(ctx, r.UserID, r.ProgramID, r.LinkID, r.Active)
		return answer(func() any { return linkView(l) }, seq, 0, err)
	}
}
