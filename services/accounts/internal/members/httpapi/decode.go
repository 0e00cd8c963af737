package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/members"
	"github.com/svc-dev/svc/services/accounts/internal/members/endpoints"
	settingshttpapi "github.com/svc-dev/svc/services/accounts/internal/settings/httpapi"
)

const (
	msgEmail    = "email is required and must be a valid email address"
	msgBadEmail = "email must be a valid email address" // the catalog's own
)

func base(ctx context.Context, r *http.Request) endpoints.Request {
	return endpoints.Request{UserID: settingshttpapi.SessionUser(ctx), ProgramID: httpkit.PathID(r, "id"), MemberID: httpkit.PathID(r, "userId")}
}

func decodeRemove(ctx context.Context, r *http.Request) (any, error) { return base(ctx, r), nil }

// decodeList reads ?limit (1 to 100, 50 when absent) and ?cursor (a
// previous page's next_cursor), as GET /api/v1/programs does.
func decodeList(ctx context.Context, r *http.Request) (any, error) {
	req := base(ctx, r)
	req.Page.Limit = members.DefaultLimit
	q := r.URL.Query()
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || len(v) > 1 || n < 1 || n > members.MaxLimit {
			req.BodyErr = members.ErrBadLimit
			return req, nil
		}
		req.Page.Limit = n
	}
	if v, ok := q["cursor"]; ok {
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || len(v) > 1 || n <= 0 {
			req.BodyErr = members.ErrBadCursor
			return req, nil
		}
		req.Page.After = n
	}
	return req, nil
}

// decodeAdd reads {email, permissions} and nothing else; the email's
// syntax is the catalog's (the admin API's user rule).
func decodeAdd(ctx context.Context, r *http.Request) (any, error) {
	req := base(ctx, r)
	obj, err := httpkit.DecodeObject(r, 0)
	if err != nil {
		req.BodyErr = err
		return req, nil
	}
	for _, k := range obj.Keys() {
		if k != "email" && k != "permissions" {
			req.BodyErr = &catalog.FieldError{Field: k, Message: "Unknown field: " + k + ". Send email and permissions"}
			return req, nil
		}
	}
	email, ok, err := obj.String("email")
	if err != nil || !ok || email == "" {
		req.BodyErr = &catalog.FieldError{Field: "email", Message: msgEmail}
		return req, nil
	}
	perms, ok, err := obj.StringSlice("permissions")
	if err != nil || !ok || len(perms) == 0 {
		req.BodyErr = &catalog.FieldError{Field: "permissions", Message: members.MsgPermissions}
		return req, nil
	}
	if _, err := members.Permissions(perms); err != nil {
		req.BodyErr = err
		return req, nil
	}
	// U+FFFD (sent escaped, or in place of a lone surrogate escape; raw
	// bytes that are not UTF-8 the decoder refuses) is in no one's
	// address: no user to create.
	if strings.ContainsRune(email, utf8.RuneError) {
		req.BodyErr = &catalog.FieldError{Field: "email", Message: msgBadEmail}
		return req, nil
	}
	req.Email, req.Permissions = email, perms
	return req, nil
}
