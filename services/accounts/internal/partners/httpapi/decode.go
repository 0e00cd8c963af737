package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/partners"
	"github.com/svc-dev/svc/services/accounts/internal/partners/endpoints"
	settingshttpapi "github.com/svc-dev/svc/services/accounts/internal/settings/httpapi"
)

// MsgActive is the link update's body rule.
const MsgActive = "active is required and must be true or false"

func base(ctx context.Context, r *http.Request) endpoints.Request {
	return endpoints.Request{UserID: settingshttpapi.SessionUser(ctx), ProgramID: httpkit.PathID(r, "id"),
		PartnerID: httpkit.PathID(r, "partnerId"), LinkID: httpkit.PathID(r, "linkId")}
}

func decodeApproval(ctx context.Context, r *http.Request) (any, error) { return base(ctx, r), nil }

// body reads a JSON object holding only the fields allowed.
func body(r *http.Request, allowed ...string) (httpkit.Object, error) {
	obj, err := httpkit.DecodeObject(r, 0)
	if err != nil {
		return httpkit.Object{}, err
	}
	for _, k := range obj.Keys() {
		if !slices.Contains(allowed, k) {
			return httpkit.Object{}, &catalog.FieldError{Field: k, Message: "Unknown field: " + k + ". Send " + strings.Join(allowed, ", ")}
		}
	}
	return obj, nil
}

// str reads an optional string field (nil when absent or null); a
// non-string or a NUL is the admin routes' message.
func str(obj httpkit.Object, key string) (*string, error) {
	if obj.IsNull(key) {
		return nil, nil
	}
	v, ok, err := obj.String(key)
	if err != nil || !ok {
		return nil, err
	}
	return &v, nil
}

func decodeInvite(ctx context.Context, r *http.Request) (any, error) {
	req := base(ctx, r)
	obj, err := body(r, "email", "name", "code")
	if err == nil {
		req.Partner.Email, err = str(obj, "email")
	}
	if err == nil {
		req.Partner.Name, err = str(obj, "name")
	}
	if err == nil {
		req.Code, err = str(obj, "code")
	}
	req.BodyErr = err
	return req, nil
}

func decodeCreateLink(ctx context.Context, r *http.Request) (any, error) {
	req := base(ctx, r)
	obj, err := body(r, "code")
	if err == nil {
		req.Code, err = str(obj, "code")
	}
	req.BodyErr = err
	return req, nil
}

func decodeUpdateLink(ctx context.Context, r *http.Request) (any, error) {
	req := base(ctx, r)
	obj, err := body(r, "active")
	if err != nil {
		req.BodyErr = err
		return req, nil
	}
	active, ok, err := obj.Bool("active")
	if !ok || err != nil {
		req.BodyErr = &catalog.FieldError{Field: "active", Message: MsgActive}
		return req, nil
	}
	req.Active = active
	return req, nil
}

// decodeList reads ?limit (1 to 100, 50 when absent) and ?cursor (a
// previous page's next_cursor), as the other console lists do.
func decodeList(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.ListRequest{UserID: settingshttpapi.SessionUser(ctx), ProgramID: httpkit.PathID(r, "id"), Page: partners.Page{Limit: partners.DefaultLimit}}
	q := r.URL.Query()
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || len(v) > 1 || n < 1 || n > partners.MaxLimit {
			req.BodyErr = partners.ErrBadLimit
			return req, nil
		}
		req.Page.Limit = n
	}
	if v, ok := q["cursor"]; ok {
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || len(v) > 1 || n <= 0 {
			req.BodyErr = partners.ErrBadCursor
			return req, nil
		}
		req.Page.After = n
	}
	return req, nil
}
