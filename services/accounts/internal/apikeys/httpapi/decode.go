package httpapi

import (
	"context"
	"net/http"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/apikeys"
	"github.com/svc-dev/svc/services/accounts/internal/apikeys/endpoints"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	settingshttpapi "github.com/svc-dev/svc/services/accounts/internal/settings/httpapi"
)

func base(ctx context.Context, r *http.Request) endpoints.Request {
	return endpoints.Request{UserID: settingshttpapi.SessionUser(ctx), ProgramID: httpkit.PathID(r, "id"), KeyID: httpkit.PathID(r, "keyId")}
}

func decodeList(ctx context.Context, r *http.Request) (any, error) { return base(ctx, r), nil }

func decodeRevoke(ctx context.Context, r *http.Request) (any, error) { return base(ctx, r), nil }

// body reads a JSON object holding only the field named.
func body(r *http.Request, field, message string) (httpkit.Object, error) {
	obj, err := httpkit.DecodeObject(r, 0)
	if err != nil {
		return httpkit.Object{}, err
	}
	for _, k := range obj.Keys() {
		if k != field {
			return httpkit.Object{}, &catalog.FieldError{Field: k, Message: "Unknown field: " + k + ". Send " + field}
		}
	}
	if !obj.Has(field) {
		return httpkit.Object{}, &catalog.FieldError{Field: field, Message: message}
	}
	return obj, nil
}

func decodeCreate(ctx context.Context, r *http.Request) (any, error) {
	req := base(ctx, r)
	obj, err := body(r, "mode", apikeys.MsgMode)
	if err != nil {
		req.BodyErr = err
		return req, nil
	}
	mode, _, err := obj.String("mode")
	if err != nil || (mode != apikeys.ModeLive && mode != apikeys.ModeTest) {
		req.BodyErr = &catalog.FieldError{Field: "mode", Message: apikeys.MsgMode}
		return req, nil
	}
	req.Mode = mode
	return req, nil
}

func decodeRotation(ctx context.Context, r *http.Request) (any, error) {
	req := base(ctx, r)
	obj, err := body(r, "deadline", apikeys.MsgDeadline)
	if err != nil {
		req.BodyErr = err
		return req, nil
	}
	t, ok, err := obj.Time("deadline")
	if !ok || err != nil {
		req.BodyErr = &catalog.FieldError{Field: "deadline", Message: apikeys.MsgDeadline}
		return req, nil
	}
	req.Deadline = t
	return req, nil
}
