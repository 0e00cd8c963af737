package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/catalog/endpoints"
)

// fields reads typed values from a decoded body, keeping the first problem
// so a decoder can read every field and then report once.
type fields struct {
	obj httpkit.Object
	err error
}

func (f *fields) keep(err error) {
	if f.err == nil && err != nil {
		f.err = err
	}
}

func (f *fields) str(key string) *string {
	v, ok, err := f.obj.String(key)
	f.keep(err)
	if !ok || err != nil {
		return nil
	}
	return &v
}

func (f *fields) boolean(key string) *bool {
	v, ok, err := f.obj.Bool(key)
	f.keep(err)
	if !ok || err != nil {
		return nil
	}
	return &v
}

// id reads a positive integer id.
func (f *fields) id(key string) *int64 {
	v, ok, err := f.obj.Int(key)
	if ok && (err != nil || v <= 0) {
		f.keep(&catalog.FieldError{Field: key, Message: key + " must be a positive integer"})
		return nil
	}
	if !ok {
		return nil
	}
	return &v
}

// raw returns the JSON value as sent, for fields the domain type-checks
// itself.
func (f *fields) raw(key string) *string {
	v, ok := f.obj.Raw(key)
	if !ok {
		return nil
	}
	s := string(v)
	return &s
}

func (f *fields) strings(key string) ([]string, bool) {
	v, ok, err := f.obj.StringSlice(key)
	f.keep(err)
	if err != nil {
		return nil, false
	}
	if !ok {
		// An explicit null clears the list.
		return []string{}, f.obj.IsNull(key)
	}
	return v, true
}

func decodeBody(r *http.Request) (*fields, error) {
	obj, err := httpkit.DecodeObject(r, 0)
	if err != nil {
		return nil, err
	}
	return &fields{obj: obj}, nil
}

// pathID reads a positive integer path segment; anything else names no
// resource, so it is a 404.
func pathID(r *http.Request, what string) (int64, error) {
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, &catalog.NotFoundError{What: fmt.Sprintf("%s %q", what, raw)}
	}
	return id, nil
}

func decodeAdvertiser(_ context.Context, r *http.Request) (any, error) {
	f, err := decodeBody(r)
	if err != nil {
		return nil, err
	}
	in := catalog.AdvertiserInput{Name: f.str("name"), Email: f.str("email")}
	return in, f.err
}

func decodeUser(_ context.Context, r *http.Request) (any, error) {
	f, err := decodeBody(r)
	if err != nil {
		return nil, err
	}
	in := catalog.UserInput{Email: f.str("email"), Name: f.str("name"), AdvertiserID: f.id("advertiser_id"), Blocked: f.boolean("blocked")}
	return in, f.err
}

func programInput(f *fields) catalog.ProgramInput {
	in := catalog.ProgramInput{
		AdvertiserID:          f.raw("advertiser_id"),
		Name:                  f.str("name"),
		Domain:                f.str("domain"),
		CommissionType:        f.str("commission_type"),
		CommissionRate:        f.raw("commission_rate"),
		DurationMonths:        f.raw("duration_months"),
		CookieDuration:        f.raw("cookie_duration"),
		AttributionWindowDays: f.raw("attribution_window_days"),
		HoldDays:              f.raw("hold_days"),
		LeadAuthPolicy:        f.str("lead_auth_policy"),
		PaymentTrackingMode:   f.str("payment_tracking_mode"),
		Currency:              f.str("currency"),
		LeadCommission:        f.raw("lead_commission"),
	}
	if f.obj.Has("allowed_origins") {
		in.AllowedOrigins, in.AllowedOriginsSet = f.strings("allowed_origins")
	}
	return in
}

func decodeCreateProgram(_ context.Context, r *http.Request) (any, error) {
	f, err := decodeBody(r)
	if err != nil {
		return nil, err
	}
	if f.obj.Has("processor_connection") {
		return nil, &catalog.FieldError{Field: "processor_connection", Message: "processor_connection can only be changed with PATCH /admin/v1/programs/{id}"}
	}
	in := programInput(f)
	return in, f.err
}

func decodeUpdateProgram(_ context.Context, r *http.Request) (any, error) {
	id, err := pathID(r, "program")
	if err != nil {
		return nil, err
	}
	f, err := decodeBody(r)
	if err != nil {
		return nil, err
	}
	in := programInput(f)
	if f.obj.Has("processor_connection") {
		pc, ok, err := f.obj.Object("processor_connection")
		f.keep(err)
		if ok && err == nil {
			in.Processor = processorInput(&fields{obj: pc}, f)
		}
	}
	return endpoints.UpdateProgramRequest{ID: id, Input: in}, f.err
}

func processorInput(pf *fields, parent *fields) *catalog.ProcessorInput {
	in := &catalog.ProcessorInput{
		Status:           pf.str("status"),
		AccountID:        pf.str("account_id"),
		ChargesEnabled:   pf.boolean("charges_enabled"),
		PayoutsEnabled:   pf.boolean("payouts_enabled"),
		DetailsSubmitted: pf.boolean("details_submitted"),
	}
	if pf.obj.IsNull("connected_at") {
		in.ConnectedAtNull = true
	} else if t, ok, err := pf.obj.Time("connected_at"); err != nil {
		pf.keep(&catalog.FieldError{Field: "processor_connection.connected_at", Message: "processor_connection.connected_at must be an ISO 8601 time with offset"})
	} else if ok {
		in.ConnectedAt = &t
	}
	if pf.err != nil {
		parent.keep(prefixed("processor_connection.", pf.err))
	}
	return in
}

// prefixed names a nested field by its full path.
func prefixed(prefix string, err error) error {
	if fe, ok := err.(*httpkit.FieldError); ok {
		return &catalog.FieldError{Field: prefix + fe.Field, Message: prefix + fe.Error()}
	}
	return err
}

func decodeGetProgram(_ context.Context, r *http.Request) (any, error) {
	id, err := pathID(r, "program")
	if err != nil {
		return nil, err
	}
	return endpoints.GetProgramRequest{ID: id}, nil
}

func decodeMember(_ context.Context, r *http.Request) (any, error) {
	id, err := pathID(r, "program")
	if err != nil {
		return nil, err
	}
	f, err := decodeBody(r)
	if err != nil {
		return nil, err
	}
	perms, _ := f.strings("permissions")
	in := catalog.MemberInput{UserID: f.id("user_id"), Active: f.boolean("active"), Permissions: perms}
	return endpoints.PutMemberRequest{ProgramID: id, Input: in}, f.err
}

func decodeIssueKey(_ context.Context, r *http.Request) (any, error) {
	id, err := pathID(r, "program")
	if err != nil {
		return nil, err
	}
	f, err := decodeBody(r)
	if err != nil {
		return nil, err
	}
	// The key is kept only in the request: never in an error message (they
	// reach traces) nor a log line.
	req := endpoints.IssueKeyRequest{ProgramID: id, Test: f.boolean("test"), Key: f.str("key")}
	return req, f.err
}

const msgDeadline = "deadline is required and must be an ISO 8601 time with offset"

func decodeRotateKey(_ context.Context, r *http.Request) (any, error) {
	id, err := pathID(r, "api key")
	if err != nil {
		return nil, err
	}
	f, err := decodeBody(r)
	if err != nil {
		return nil, err
	}
	t, ok, terr := f.obj.Time("deadline")
	if !ok || terr != nil {
		return nil, &catalog.FieldError{Field: "deadline", Message: msgDeadline}
	}
	return endpoints.RotateKeyRequest{KeyID: id, Deadline: t}, nil
}

func decodePartner(_ context.Context, r *http.Request) (any, error) {
	f, err := decodeBody(r)
	if err != nil {
		return nil, err
	}
	in := catalog.PartnerInput{Name: f.str("name"), Email: f.str("email")}
	return in, f.err
}

func decodeAddPartner(_ context.Context, r *http.Request) (any, error) {
	id, err := pathID(r, "program")
	if err != nil {
		return nil, err
	}
	f, err := decodeBody(r)
	if err != nil {
		return nil, err
	}
	in := catalog.PartnerProgramInput{PartnerID: f.id("partner_id"), Approved: f.boolean("approved")}
	return endpoints.AddPartnerRequest{ProgramID: id, Input: in}, f.err
}

func decodeCreateLink(_ context.Context, r *http.Request) (any, error) {
	id, err := pathID(r, "program")
	if err != nil {
		return nil, err
	}
	f, err := decodeBody(r)
	if err != nil {
		return nil, err
	}
	in := catalog.LinkInput{PartnerID: f.id("partner_id"), Code: f.str("code"), Active: f.boolean("active")}
	return endpoints.CreateLinkRequest{ProgramID: id, Input: in}, f.err
}

func decodeSetLinkActive(_ context.Context, r *http.Request) (any, error) {
	id, err := pathID(r, "link")
	if err != nil {
		return nil, err
	}
	f, err := decodeBody(r)
	if err != nil {
		return nil, err
	}
	active := f.boolean("active")
	if f.err != nil {
		return nil, f.err
	}
	if active == nil {
		return nil, &catalog.FieldError{Field: "active", Message: "active is required"}
	}
	return endpoints.SetLinkActiveRequest{LinkID: id, Active: *active}, nil
}

// decodeSetUserBlocked reads PATCH /admin/v1/users/{id}: blocked, the one
// field it changes (anything else is refused, not ignored, so an operator
// never believes an email or name was changed).
func decodeSetUserBlocked(_ context.Context, r *http.Request) (any, error) {
	id, err := pathID(r, "user")
	if err != nil {
		return nil, err
	}
	f, err := decodeBody(r)
	if err != nil {
		return nil, err
	}
	for _, k := range f.obj.Keys() {
		if k != "blocked" {
			return nil, &catalog.FieldError{Field: k, Message: k + " cannot be changed here; blocked is the one field of a user this route changes"}
		}
	}
	blocked := f.boolean("blocked")
	if f.err != nil {
		return nil, f.err
	}
	if blocked == nil {
		return nil, &catalog.FieldError{Field: "blocked", Message: "blocked is required"}
	}
	return endpoints.SetUserBlockedRequest{UserID: id, Blocked: *blocked}, nil
}

func decodeSession(_ context.Context, r *http.Request) (any, error) {
	f, err := decodeBody(r)
	if err != nil {
		return nil, err
	}
	uid := f.id("user_id")
	if f.err != nil {
		return nil, f.err
	}
	if uid == nil {
		return nil, &catalog.FieldError{Field: "user_id", Message: "user_id is required"}
	}
	return endpoints.IssueSessionRequest{UserID: *uid}, nil
}

// query returns the query parameter, nil when it is not sent at all (an
// empty value is sent, and validated as such).
func query(r *http.Request, key string) *string {
	q := r.URL.Query()
	if !q.Has(key) {
		return nil
	}
	v := q.Get(key)
	return &v
}

func decodeFindUser(_ context.Context, r *http.Request) (any, error) {
	return endpoints.FindUserRequest{Email: query(r, "email")}, nil
}

func decodeListPrograms(_ context.Context, r *http.Request) (any, error) {
	raw := query(r, "advertiser_id")
	if raw == nil || *raw == "" {
		return endpoints.ListProgramsRequest{}, nil // the domain answers "is required"
	}
	id, err := strconv.ParseInt(*raw, 10, 64)
	if err != nil || id <= 0 {
		return nil, &catalog.FieldError{Field: "advertiser_id", Message: "advertiser_id must be a positive integer"}
	}
	return endpoints.ListProgramsRequest{AdvertiserID: &id}, nil
}

func decodeFindPartners(_ context.Context, r *http.Request) (any, error) {
	return endpoints.FindPartnersRequest{Email: query(r, "email")}, nil
}

func decodeListLinks(_ context.Context, r *http.Request) (any, error) {
	id, err := pathID(r, "program")
	if err != nil {
		return nil, err
	}
	return endpoints.ListLinksRequest{ProgramID: id, Code: query(r, "code")}, nil
}

func decodeListKeys(_ context.Context, r *http.Request) (any, error) {
	id, err := pathID(r, "program")
	if err != nil {
		return nil, err
	}
	return endpoints.ListKeysRequest{ProgramID: id}, nil
}

const maxSyncTimeout = 60 * time.Second

func decodeSync(_ context.Context, r *http.Request) (any, error) {
	q := r.URL.Query()
	seq, err := strconv.ParseInt(q.Get("seq"), 10, 64)
	if err != nil || seq < 0 {
		return nil, &catalog.FieldError{Field: "seq", Message: "seq is required and must be a whole number"}
	}
	timeout := 5 * time.Second
	if raw := strings.TrimSpace(q.Get("timeout")); raw != "" {
		timeout, err = time.ParseDuration(raw)
		if err != nil {
			// A bare number is seconds.
			secs, nerr := strconv.ParseFloat(raw, 64)
			if nerr != nil {
				return nil, &catalog.FieldError{Field: "timeout", Message: "timeout must be a duration such as 5s or 500ms, at most 60s"}
			}
			timeout = time.Duration(secs * float64(time.Second))
		}
		if timeout <= 0 || timeout > maxSyncTimeout {
			return nil, &catalog.FieldError{Field: "timeout", Message: "timeout must be a duration such as 5s or 500ms, at most 60s"}
		}
	}
	return endpoints.WaitForSyncRequest{Seq: catalog.Seq(seq), Timeout: timeout}, nil
}

// ReadProgram reads a program as the command-line init route and the
// console's create route take it: name and domain that are not strings
// count as missing; a commission_type that is not a string is named in its
// message as sent; numbers (and advertiser_id) are raw JSON, so the
// catalog reports type and range problems with its own messages.
func ReadProgram(obj httpkit.Object) (advertiserID *string, in catalog.ProgramInput) {
	str := func(key string) *string {
		if v, ok, err := obj.String(key); ok && err == nil {
			return &v
		}
		return nil
	}
	raw := func(key string) *string {
		if v, ok := obj.Raw(key); ok {
			s := string(v)
			return &s
		}
		return nil
	}
	ctype := str("commission_type")
	if ctype == nil {
		ctype = raw("commission_type")
	}
	return raw("advertiser_id"), catalog.ProgramInput{
		Name:           str("name"),
		Domain:         str("domain"),
		CommissionType: ctype,
		CommissionRate: raw("commission_rate"),
		DurationMonths: raw("duration_months"),
		CookieDuration: raw("cookie_duration"),
	}
}
