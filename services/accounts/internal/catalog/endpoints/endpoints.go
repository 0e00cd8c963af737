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

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/obs"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

// Set holds one endpoint per admin operation.
type Set struct {
	CreateAdvertiser    endpoint.Endpoint
	CreateUser          endpoint.Endpoint
	CreateProgram       endpoint.Endpoint
	UpdateProgram       endpoint.Endpoint
	GetProgram          endpoint.Endpoint
	FindUser            endpoint.Endpoint
	ListPrograms        endpoint.Endpoint
	FindPartners        endpoint.Endpoint
	ListLinks           endpoint.Endpoint
	ListKeys            endpoint.Endpoint
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

// New builds the set and decorates every endpoint with mw, outermost first.
func New(svc catalog.Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		CreateAdvertiser:    obs.Decorate("create_advertiser", makeCreateAdvertiser(svc), mw...),
		CreateUser:          obs.Decorate("create_user", makeCreateUser(svc), mw...),
		CreateProgram:       obs.Decorate("create_program", makeCreateProgram(svc), mw...),
		UpdateProgram:       obs.Decorate("update_program", makeUpdateProgram(svc), mw...),
		GetProgram:          obs.Decorate("get_program", makeGetProgram(svc), mw...),
		FindUser:            obs.Decorate("find_user", makeFindUser(svc), mw...),
		ListPrograms:        obs.Decorate("list_programs", makeListPrograms(svc), mw...),
		FindPartners:        obs.Decorate("find_partners", makeFindPartners(svc), mw...),
		ListLinks:           obs.Decorate("list_links", makeListLinks(svc), mw...),
		ListKeys:            obs.Decorate("list_keys", makeListKeys(svc), mw...),
		PutMember:           obs.Decorate("put_member", makePutMember(svc), mw...),
		IssueKey:            obs.Decorate("issue_key", makeIssueKey(svc), mw...),
		RotateKey:           obs.Decorate("rotate_key", makeRotateKey(svc), mw...),
		CreatePartner:       obs.Decorate("create_partner", makeCreatePartner(svc), mw...),
		AddPartnerToProgram: obs.Decorate("add_partner_to_program", makeAddPartnerToProgram(svc), mw...),
		CreateLink:          obs.Decorate("create_link", makeCreateLink(svc), mw...),
		SetLinkActive:       obs.Decorate("set_link_active", makeSetLinkActive(svc), mw...),
		IssueSession:        obs.Decorate("issue_session", makeIssueSession(svc), mw...),
		WaitForSync:         obs.Decorate("wait_for_sync", makeWaitForSync(svc), mw...),
	}
}

// Response is what every admin operation answers: for a write, the new or
// changed entity's id (when it has one), any extra fields for the body and
// the catalog sequence of its event; for a read, the object or list read and
// no sequence (reads publish nothing).
type Response struct {
	Data any
	Seq  catalog.Seq
	Err  error
}

// Failed implements go-kit's endpoint.Failer.
func (r Response) Failed() error { return r.Err }

// business splits domain errors (answered to the client) from
// infrastructure failures (endpoint errors, answered 500).
func business(err error) bool {
	return errkind.Of(err) != errkind.Internal || errors.Is(err, catalog.ErrSyncTimeout)
}

func respond(data any, seq catalog.Seq, err error) (any, error) {
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

// FindUserRequest looks a user up by email (nil when not sent).
type FindUserRequest struct{ Email *string }

func makeFindUser(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		u, err := svc.FindUserByEmail(ctx, req.(FindUserRequest).Email)
		return respond(UserView(u), 0, err)
	}
}

// UserView is a user as the admin API shows it; advertiser_id is null for a
// user without an advertiser.
func UserView(u catalog.User) map[string]any {
	var adv any
	if u.AdvertiserID != 0 {
		adv = u.AdvertiserID
	}
	return map[string]any{
		"id":            u.ID,
		"email":         u.Email,
		"name":          u.Name,
		"advertiser_id": adv,
		"blocked":       u.Blocked,
		"created_at":    u.CreatedAt.UTC().Format(time.RFC3339),
	}
}

// ListProgramsRequest lists an advertiser's programs (nil when not sent).
type ListProgramsRequest struct{ AdvertiserID *int64 }

func makeListPrograms(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		ps, err := svc.ListPrograms(ctx, req.(ListProgramsRequest).AdvertiserID)
		return respond(views(ps, ProgramView), 0, err)
	}
}

// FindPartnersRequest lists the partners with an email (nil when not sent).
type FindPartnersRequest struct{ Email *string }

func makeFindPartners(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		ps, err := svc.FindPartnersByEmail(ctx, req.(FindPartnersRequest).Email)
		return respond(views(ps, PartnerView), 0, err)
	}
}

// PartnerView is a partner as the admin API shows it.
func PartnerView(p catalog.Partner) map[string]any {
	return map[string]any{
		"id":         p.ID,
		"name":       p.Name,
		"email":      p.Email,
		"created_at": p.CreatedAt.UTC().Format(time.RFC3339),
	}
}

// ListLinksRequest lists a program's links, or the one with Code.
type ListLinksRequest struct {
	ProgramID int64
	Code      *string
}

func makeListLinks(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(ListLinksRequest)
		ls, err := svc.ListLinks(ctx, r.ProgramID, r.Code)
		return respond(views(ls, LinkView), 0, err)
	}
}

// LinkView is a referral link as the admin API shows it.
func LinkView(l catalog.Link) map[string]any {
	return map[string]any{
		"id":         l.ID,
		"program_id": l.ProgramID,
		"partner_id": l.PartnerID,
		"code":       l.Code,
		"active":     l.Active,
		"created_at": l.CreatedAt.UTC().Format(time.RFC3339),
	}
}

// ListKeysRequest lists a program's API keys.
type ListKeysRequest struct{ ProgramID int64 }

func makeListKeys(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		ks, err := svc.ListKeys(ctx, req.(ListKeysRequest).ProgramID)
		return respond(views(ks, KeyView), 0, err)
	}
}

// KeyView is a stored API key as the admin API lists it: never the key nor
// its hash, only the display prefix. Rotation fields are null when the key
// is not marked.
func KeyView(k catalog.APIKey) map[string]any {
	return map[string]any{
		"id":                 k.ID,
		"program_id":         k.ProgramID,
		"prefix":             k.Prefix,
		"masked":             apikey.Mask(k.Prefix),
		"test":               k.Test,
		"created_at":         k.CreatedAt.UTC().Format(time.RFC3339),
		"rotation_marked_at": timeOrNil(k.RotationMarkedAt),
		"rotation_deadline":  timeOrNil(k.RotationDeadline),
	}
}

func timeOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

// views renders a list, as [] rather than null when it is empty.
func views[T any](items []T, view func(T) map[string]any) []map[string]any {
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		out = append(out, view(it))
	}
	return out
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

// IssueKeyRequest issues a program API key: a new one, or Key when set (an
// existing value to import). Test is nil when not sent: false for a new
// key, the key's own kind for an imported one.
type IssueKeyRequest struct {
	ProgramID int64
	Test      *bool
	Key       *string
}

func makeIssueKey(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(IssueKeyRequest)
		var (
			k   catalog.IssuedKey
			seq catalog.Seq
			err error
		)
		if r.Key != nil {
			k, seq, err = svc.ImportKey(ctx, r.ProgramID, *r.Key, r.Test)
		} else {
			k, seq, err = svc.IssueKey(ctx, r.ProgramID, r.Test != nil && *r.Test)
		}
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
