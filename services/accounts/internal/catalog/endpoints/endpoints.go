// Package endpoints adapts the catalog service to go-kit endpoints: one
// request and response type per admin operation. Business errors travel in
// the response (Failer); only infrastructure failures are endpoint errors.
package endpoints

import (
	"context"
	"encoding/json"
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
	SetUserBlocked      endpoint.Endpoint
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
		SetUserBlocked:      obs.Decorate("set_user_blocked", makeSetUserBlocked(svc), mw...),
		IssueSession:        obs.Decorate("issue_session", makeIssueSession(svc), mw...),
		WaitForSync:         obs.Decorate("wait_for_sync", makeWaitForSync(svc), mw...),
	}
}

// Response is what every admin operation answers: Data under "data" (for
// a write, the new or changed entity's id and any extra fields, with the
// catalog sequence of its event; for a read, the object or list read and no
// sequence: reads publish nothing), or a business error.
//
// JSON field order: every data struct lists its fields in the order of
// their JSON names, so the bodies are byte for byte those of the maps they
// replaced.
type Response[T any] struct {
	Data T           `json:"data"`
	Seq  catalog.Seq `json:"-"`
	Err  error       `json:"-"`
}

// Failed implements go-kit's endpoint.Failer.
func (r Response[T]) Failed() error { return r.Err }

// CatalogSeq is the sequence of the write's catalog event (0 for reads).
func (r Response[T]) CatalogSeq() catalog.Seq { return r.Seq }

var (
	_ endpoint.Failer = Response[IDData]{}
	_ endpoint.Failer = Response[AdminProgramView]{}
	_ endpoint.Failer = Response[[]AdminProgramView]{}
	_ endpoint.Failer = Response[UserView]{}
	_ endpoint.Failer = Response[[]PartnerView]{}
	_ endpoint.Failer = Response[[]LinkView]{}
	_ endpoint.Failer = Response[[]KeyView]{}
	_ endpoint.Failer = Response[MemberData]{}
	_ endpoint.Failer = Response[IssuedKeyData]{}
	_ endpoint.Failer = Response[RotationData]{}
	_ endpoint.Failer = Response[LinkActiveData]{}
	_ endpoint.Failer = Response[SessionData]{}
	_ endpoint.Failer = Response[SyncData]{}
)

// business splits domain errors (answered to the client) from
// infrastructure failures (endpoint errors, answered 500).
func business(err error) bool {
	return errkind.Of(err) != errkind.Internal || errors.Is(err, catalog.ErrSyncTimeout)
}

func respond[T any](data T, seq catalog.Seq, err error) (any, error) {
	if err != nil {
		if business(err) {
			return Response[T]{Err: err}, nil
		}
		return nil, err
	}
	return Response[T]{Data: data, Seq: seq}, nil
}

// IDData answers a write with the entity's id.
type IDData struct {
	ID int64 `json:"id"`
}

func idData(id int64) IDData { return IDData{ID: id} }

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
		return respond(NewAdminProgramView(p), 0, err)
	}
}

// ProgramView is a program as the admin API and the command-line routes
// (init, programs) show it.
type ProgramView struct {
	AdvertiserID          int64         `json:"advertiser_id"`
	AllowedOrigins        []string      `json:"allowed_origins"`
	AttributionWindowDays int           `json:"attribution_window_days"`
	CommissionRate        float64       `json:"commission_rate"`
	CommissionType        string        `json:"commission_type"`
	CookieDuration        *int          `json:"cookie_duration"`
	CreatedAt             string        `json:"created_at"`
	Domain                string        `json:"domain"`
	DurationMonths        int           `json:"duration_months"`
	HoldDays              int           `json:"hold_days"`
	ID                    int64         `json:"id"`
	LeadAuthPolicy        string        `json:"lead_auth_policy"`
	Name                  string        `json:"name"`
	PaymentTrackingMode   string        `json:"payment_tracking_mode"`
	ProcessorConnection   ProcessorView `json:"processor_connection"`
	UpdatedAt             string        `json:"updated_at"`
}

// ProcessorView is a program's payment-processor connection.
type ProcessorView struct {
	AccountID        string  `json:"account_id"`
	ChargesEnabled   bool    `json:"charges_enabled"`
	ConnectedAt      *string `json:"connected_at"`
	DetailsSubmitted bool    `json:"details_submitted"`
	PayoutsEnabled   bool    `json:"payouts_enabled"`
	Status           string  `json:"status"`
}

// NewProgramView renders p.
func NewProgramView(p catalog.Program) ProgramView {
	rate, _ := strconv.ParseFloat(p.CommissionRate, 64)
	return ProgramView{
		AdvertiserID:          p.AdvertiserID,
		AllowedOrigins:        p.AllowedOrigins,
		AttributionWindowDays: p.AttributionWindowDays,
		CommissionRate:        rate,
		CommissionType:        p.CommissionType,
		CookieDuration:        p.CookieDuration,
		CreatedAt:             rfc3339(p.CreatedAt),
		Domain:                p.Domain,
		DurationMonths:        p.DurationMonths,
		HoldDays:              p.HoldDays,
		ID:                    p.ID,
		LeadAuthPolicy:        p.LeadAuthPolicy,
		Name:                  p.Name,
		PaymentTrackingMode:   p.PaymentTrackingMode,
		ProcessorConnection: ProcessorView{
			AccountID:        p.Processor.AccountID,
			ChargesEnabled:   p.Processor.ChargesEnabled,
			ConnectedAt:      timeOrNil(p.Processor.ConnectedAt),
			DetailsSubmitted: p.Processor.DetailsSubmitted,
			PayoutsEnabled:   p.Processor.PayoutsEnabled,
			Status:           p.Processor.Status,
		},
		UpdatedAt: rfc3339(p.UpdatedAt),
	}
}

// AdminProgramView is a program as the admin API shows it: ProgramView and
// the money settings only the admin API sets and shows (currency,
// lead_commission). The command-line routes answer ProgramView alone, so
// their public contract (api/openapi.yaml) does not change.
type AdminProgramView struct {
	ProgramView
	Currency string `json:"currency"`
	// LeadCommission is the stored decimal rendered exactly as a JSON number
	// (never through a float).
	LeadCommission json.Number `json:"lead_commission"`
}

// NewAdminProgramView renders p for the admin API.
func NewAdminProgramView(p catalog.Program) AdminProgramView {
	v := AdminProgramView{ProgramView: NewProgramView(p), Currency: p.Currency, LeadCommission: json.Number(p.LeadCommission)}
	if v.LeadCommission == "" {
		v.LeadCommission = "0" // the zero Program of a failed read
	}
	return v
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// FindUserRequest looks a user up by email (nil when not sent).
type FindUserRequest struct{ Email *string }

func makeFindUser(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		u, err := svc.FindUserByEmail(ctx, req.(FindUserRequest).Email)
		return respond(NewUserView(u), 0, err)
	}
}

// UserView is a user as the admin API shows it; advertiser_id is null for a
// user without an advertiser.
type UserView struct {
	AdvertiserID *int64 `json:"advertiser_id"`
	Blocked      bool   `json:"blocked"`
	CreatedAt    string `json:"created_at"`
	Email        string `json:"email"`
	ID           int64  `json:"id"`
	Name         string `json:"name"`
}

// NewUserView renders u.
func NewUserView(u catalog.User) UserView {
	v := UserView{Blocked: u.Blocked, CreatedAt: rfc3339(u.CreatedAt), Email: u.Email, ID: u.ID, Name: u.Name}
	if u.AdvertiserID != 0 {
		adv := u.AdvertiserID
		v.AdvertiserID = &adv
	}
	return v
}

// ListProgramsRequest lists an advertiser's programs (nil when not sent).
type ListProgramsRequest struct{ AdvertiserID *int64 }

func makeListPrograms(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		ps, err := svc.ListPrograms(ctx, req.(ListProgramsRequest).AdvertiserID)
		return respond(views(ps, NewAdminProgramView), 0, err)
	}
}

// FindPartnersRequest lists the partners with an email (nil when not sent).
type FindPartnersRequest struct{ Email *string }

func makeFindPartners(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		ps, err := svc.FindPartnersByEmail(ctx, req.(FindPartnersRequest).Email)
		return respond(views(ps, NewPartnerView), 0, err)
	}
}

// PartnerView is a partner as the admin API shows it.
type PartnerView struct {
	CreatedAt string `json:"created_at"`
	Email     string `json:"email"`
	ID        int64  `json:"id"`
	Name      string `json:"name"`
}

// NewPartnerView renders p.
func NewPartnerView(p catalog.Partner) PartnerView {
	return PartnerView{CreatedAt: rfc3339(p.CreatedAt), Email: p.Email, ID: p.ID, Name: p.Name}
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
		return respond(views(ls, NewLinkView), 0, err)
	}
}

// LinkView is a referral link as the admin API shows it.
type LinkView struct {
	Active    bool   `json:"active"`
	Code      string `json:"code"`
	CreatedAt string `json:"created_at"`
	ID        int64  `json:"id"`
	PartnerID int64  `json:"partner_id"`
	ProgramID int64  `json:"program_id"`
}

// NewLinkView renders l.
func NewLinkView(l catalog.Link) LinkView {
	return LinkView{Active: l.Active, Code: l.Code, CreatedAt: rfc3339(l.CreatedAt), ID: l.ID, PartnerID: l.PartnerID, ProgramID: l.ProgramID}
}

// ListKeysRequest lists a program's API keys.
type ListKeysRequest struct{ ProgramID int64 }

func makeListKeys(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		ks, err := svc.ListKeys(ctx, req.(ListKeysRequest).ProgramID)
		return respond(views(ks, NewKeyView), 0, err)
	}
}

// KeyView is a stored API key as the admin API lists it: never the key nor
// its hash, only the display prefix. Rotation fields are null when the key
// is not marked.
type KeyView struct {
	CreatedAt        string  `json:"created_at"`
	ID               int64   `json:"id"`
	Masked           string  `json:"masked"`
	Prefix           string  `json:"prefix"`
	ProgramID        int64   `json:"program_id"`
	RotationDeadline *string `json:"rotation_deadline"`
	RotationMarkedAt *string `json:"rotation_marked_at"`
	Test             bool    `json:"test"`
}

// NewKeyView renders k.
func NewKeyView(k catalog.APIKey) KeyView {
	return KeyView{
		CreatedAt:        rfc3339(k.CreatedAt),
		ID:               k.ID,
		Masked:           apikey.Mask(k.Prefix),
		Prefix:           k.Prefix,
		ProgramID:        k.ProgramID,
		RotationDeadline: timeOrNil(k.RotationDeadline),
		RotationMarkedAt: timeOrNil(k.RotationMarkedAt),
		Test:             k.Test,
	}
}

func timeOrNil(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := rfc3339(*t)
	return &s
}

// views renders a list, as [] rather than null when it is empty.
func views[T, V any](items []T, view func(T) V) []V {
	out := make([]V, 0, len(items))
	for _, it := range items {
		out = append(out, view(it))
	}
	return out
}

// MemberData answers a membership write.
type MemberData struct {
	ProgramID int64 `json:"program_id"`
	UserID    int64 `json:"user_id"`
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
		return respond(MemberData{ProgramID: m.ProgramID, UserID: m.UserID}, seq, err)
	}
}

// IssuedKeyData answers a key issue: the only time the key is shown.
type IssuedKeyData struct {
	ID   int64  `json:"id"`
	Key  string `json:"key"`
	Test bool   `json:"test"`
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
		return respond(IssuedKeyData{ID: k.ID, Key: k.Plain, Test: k.Test}, seq, err)
	}
}

// RotationData answers a rotation mark.
type RotationData struct {
	ID               int64   `json:"id"`
	RotationDeadline *string `json:"rotation_deadline,omitempty"`
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
		return respond(RotationData{ID: k.ID, RotationDeadline: timeOrNil(k.RotationDeadline)}, seq, err)
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

// LinkActiveData answers a link switched on or off.
type LinkActiveData struct {
	Active bool  `json:"active"`
	ID     int64 `json:"id"`
}

// SetUserBlockedRequest suspends or restores a user.
type SetUserBlockedRequest struct {
	UserID  int64
	Blocked bool
}

// makeSetUserBlocked answers the user as the admin API shows it.
func makeSetUserBlocked(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(SetUserBlockedRequest)
		u, seq, err := svc.SetUserBlocked(ctx, r.UserID, r.Blocked)
		return respond(NewUserView(u), seq, err)
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
		return respond(LinkActiveData{Active: l.Active, ID: l.ID}, seq, err)
	}
}

// SessionData answers a dashboard session issued.
type SessionData struct {
	ExpiresAt string `json:"expires_at"`
	Token     string `json:"token"`
}

// IssueSessionRequest asks for a dashboard session token for a user.
type IssueSessionRequest struct{ UserID int64 }

func makeIssueSession(svc catalog.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		s, err := svc.IssueSession(ctx, req.(IssueSessionRequest).UserID)
		return respond(SessionData{ExpiresAt: rfc3339(s.ExpiresAt), Token: s.Token}, 0, err)
	}
}

// SyncData answers the sync barrier.
type SyncData struct {
	Seq int64 `json:"seq"`
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
		return respond(SyncData{Seq: int64(r.Seq)}, 0, err)
	}
}
