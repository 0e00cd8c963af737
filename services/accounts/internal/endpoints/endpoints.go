// Package endpoints adapts the catalog service to go-kit endpoints: one
// request and response type per admin operation. Business errors travel in
// the response (Failer); only infrastructure failures are endpoint errors.
package endpoints

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

// Set holds one endpoint per admin operation.
type Set struct {
	CreateAdvertiser    endpoint.Endpoint
	CreateUser          endpoint.Endpoint
	CreateProgram       endpoint.Endpoint
	UpdateProgram       endpoint.Endpoint
	GetProgram          endpoint.Endpoint
	PutMember           endpoint.Endpoint
	IssueKey            endpoint.Endpoint
	RotateKey           endpoint.Endpoint
	CreatePartner       endpoint.Endpoint
	AddPartnerToProgram endpoint.Endpoint
	CreateLink          endpoint.Endpoint
	SetLinkActive       endpoint.Endpoint
	IssueSession        endpoint.Endpoint
	WaitForSync         endpoint.Endpoint
}

// Middleware decorates one named endpoint (tracing, for instance).
type Middleware func(name string) endpoint.Middleware

// New builds the set and wraps every endpoint in mw, outermost first.
func New(svc catalog.Service, mw ...Middleware) Set {
	wrap := func(name string, e endpoint.Endpoint) endpoint.Endpoint {
		for i := len(mw) - 1; i >= 0; i-- {
			e = mw[i](name)(e)
		}
		return e
	}
	return Set{
		CreateAdvertiser:    wrap("create_advertiser", makeCreateAdvertiser(svc)),
		CreateUser:          wrap("create_user", makeCreateUser(svc)),
		CreateProgram:       wrap("create_program", makeCreateProgram(svc)),
		UpdateProgram:       wrap("update_program", makeUpdateProgram(svc)),
		GetProgram:          wrap("get_program", makeGetProgram(svc)),
		PutMember:           wrap("put_member", makePutMember(svc)),
		IssueKey:            wrap("issue_key", makeIssueKey(svc)),
		RotateKey:           wrap("rotate_key", makeRotateKey(svc)),
		CreatePartner:       wrap("create_partner", makeCreatePartner(svc)),
		AddPartnerToProgram: wrap("add_partner_to_program", makeAddPartnerToProgram(svc)),
		CreateLink:          wrap("create_link", makeCreateLink(svc)),
		SetLinkActive:       wrap("set_link_active", makeSetLinkActive(svc)),
		IssueSession:        wrap("issue_session", makeIssueSession(svc)),
		WaitForSync:         wrap("wait_for_sync", makeWaitForSync(svc)),
	}
}

// Response is what every catalog write answers: the new or changed entity's
// id (when it has one), the catalog sequence of its event, and any extra
// fields for the body.
type Response struct {
	Data map[string]any
	Seq  catalog.Seq
	Err  error
}

// Failed implements go-kit's endpoint.Failer.
func (r Response) Failed() error { return r.Err }

// business splits domain errors (answered to the client) from
// infrastructure failures (endpoint errors, answered 500).
func business(err error) bool {
	return errors.Is(err, catalog.ErrInvalid) || errors.Is(err, catalog.ErrNotFound) ||
		errors.Is(err, catalog.ErrConflict) || errors.Is(err, catalog.ErrUnavailable) ||
		errors.Is(err, catalog.ErrUnauthorized)
}

func respond(data map[string]any, seq catalog.Seq, err error) (any, error) {
	if err != nil {
		if business(err) {
			return Response{Err: err}, nil
		}
		return nil, err
	}
	return Response{Data: data, Seq: seq}, nil
}

func idData(id int64) map[string]any { return map[string]any{"id": id} }

func makeCreateAdvertiser(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		a, seq, err := svc.CreateAdvertiser(ctx, req.(catalog.AdvertiserInput))
		return respond(idData(a.ID), seq, err)
	}
}

func makeCreateUser(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		u, seq, err := svc.CreateUser(ctx, req.(catalog.UserInput))
		return respond(idData(u.ID), seq, err)
	}
}

func makeCreateProgram(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		p, seq, err := svc.CreateProgram(ctx, req.(catalog.ProgramInput))
		return respond(idData(p.ID), seq, err)
	}
}

// UpdateProgramRequest patches program ID.
type UpdateProgramRequest struct {
	ID    int64
	Input catalog.ProgramInput
}

func makeUpdateProgram(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(UpdateProgramRequest)
		p, seq, err := svc.UpdateProgram(ctx, r.ID, r.Input)
		return respond(idData(p.ID), seq, err)
	}
}

// GetProgramRequest reads one program.
type GetProgramRequest struct{ ID int64 }

func makeGetProgram(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		p, err := svc.GetProgram(ctx, req.(GetProgramRequest).ID)
		return respond(ProgramView(p), 0, err)
	}
}

// ProgramView is a program as the admin API shows it.
func ProgramView(p catalog.Program) map[string]any {
	var connectedAt any
	if p.Processor.ConnectedAt != nil {
		connectedAt = p.Processor.ConnectedAt.UTC().Format(time.RFC3339)
	}
	var cookie any
	if p.CookieDuration != nil {
		cookie = *p.CookieDuration
	}
	rate, _ := strconv.ParseFloat(p.CommissionRate, 64)
	return map[string]any{
		"id":                      p.ID,
		"advertiser_id":           p.AdvertiserID,
		"name":                    p.Name,
		"domain":                  p.Domain,
		"commission_type":         p.CommissionType,
		"commission_rate":         rate,
		"duration_months":         p.DurationMonths,
		"cookie_duration":         cookie,
		"attribution_window_days": p.AttributionWindowDays,
		"hold_days":               p.HoldDays,
		"lead_auth_policy":        p.LeadAuthPolicy,
		"payment_tracking_mode":   p.PaymentTrackingMode,
		"processor_connection": map[string]any{
			"status":            p.Processor.Status,
			"account_id":        p.Processor.AccountID,
			"charges_enabled":   p.Processor.ChargesEnabled,
			"payouts_enabled":   p.Processor.PayoutsEnabled,
			"details_submitted": p.Processor.DetailsSubmitted,
			"connected_at":      connectedAt,
		},
		"allowed_origins": p.AllowedOrigins,
		"created_at":      p.CreatedAt.UTC().Format(time.RFC3339),
		"updated_at":      p.UpdatedAt.UTC().Format(time.RFC3339),
	}
}

// PutMemberRequest adds or changes a user's membership of a program.
type PutMemberRequest struct {
	ProgramID int64
	Input     catalog.MemberInput
}

func makePutMember(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(PutMemberRequest)
		m, seq, err := svc.PutMember(ctx, r.ProgramID, r.Input)
		return respond(map[string]any{"program_id": m.ProgramID, "user_id": m.UserID}, seq, err)
	}
}

// IssueKeyRequest issues a program API key.
type IssueKeyRequest struct {
	ProgramID int64
	Test      bool
}

func makeIssueKey(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(IssueKeyRequest)
		k, seq, err := svc.IssueKey(ctx, r.ProgramID, r.Test)
		return respond(map[string]any{"id": k.ID, "key": k.Plain, "test": k.Test}, seq, err)
	}
}

// RotateKeyRequest marks a key for rotation by Deadline.
type RotateKeyRequest struct {
	KeyID    int64
	Deadline time.Time
}

func makeRotateKey(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(RotateKeyRequest)
		k, seq, err := svc.RotateKey(ctx, r.KeyID, r.Deadline)
		data := idData(k.ID)
		if k.RotationDeadline != nil {
			data["rotation_deadline"] = k.RotationDeadline.UTC().Format(time.RFC3339)
		}
		return respond(data, seq, err)
	}
}

func makeCreatePartner(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		p, seq, err := svc.CreatePartner(ctx, req.(catalog.PartnerInput))
		return respond(idData(p.ID), seq, err)
	}
}

// AddPartnerRequest enrols a partner in a program.
type AddPartnerRequest struct {
	ProgramID int64
	Input     catalog.PartnerProgramInput
}

func makeAddPartnerToProgram(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(AddPartnerRequest)
		pp, seq, err := svc.AddPartnerToProgram(ctx, r.ProgramID, r.Input)
		return respond(idData(pp.ID), seq, err)
	}
}

// CreateLinkRequest creates a referral link in a program.
type CreateLinkRequest struct {
	ProgramID int64
	Input     catalog.LinkInput
}

func makeCreateLink(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(CreateLinkRequest)
		l, seq, err := svc.CreateLink(ctx, r.ProgramID, r.Input)
		return respond(idData(l.ID), seq, err)
	}
}

// SetLinkActiveRequest turns a link on or off.
type SetLinkActiveRequest struct {
	LinkID int64
	Active bool
}

func makeSetLinkActive(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(SetLinkActiveRequest)
		l, seq, err := svc.SetLinkActive(ctx, r.LinkID, r.Active)
		return respond(map[string]any{"id": l.ID, "active": l.Active}, seq, err)
	}
}

// IssueSessionRequest asks for a dashboard session token for a user.
type IssueSessionRequest struct{ UserID int64 }

func makeIssueSession(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		s, err := svc.IssueSession(ctx, req.(IssueSessionRequest).UserID)
		return respond(map[string]any{"token": s.Token, "expires_at": s.ExpiresAt.UTC().Format(time.RFC3339)}, 0, err)
	}
}

// WaitForSyncRequest waits until every consumer applied the catalog to Seq.
type WaitForSyncRequest struct {
	Seq     catalog.Seq
	Timeout time.Duration
}

func makeWaitForSync(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(WaitForSyncRequest)
		err := svc.WaitForSync(ctx, r.Seq, r.Timeout)
		return respond(map[string]any{"seq": int64(r.Seq)}, 0, err)
	}
}
