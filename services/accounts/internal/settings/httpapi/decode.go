package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/settings"
	"github.com/svc-dev/svc/services/accounts/internal/settings/endpoints"
)

// programID reads the path id; one that is not a positive integer names no
// program the caller can access (403, as for a missing program).
func programID(r *http.Request) int64 {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0
	}
	return id
}

func decodeGet(ctx context.Context, r *http.Request) (any, error) {
	uid := session.UserID(ctx)
	return endpoints.Request{UserID: uid, ProgramID: programID(r)}, nil
}

func decodeUpdate(ctx context.Context, r *http.Request) (any, error) {
	uid := session.UserID(ctx)
	req := endpoints.Request{UserID: uid, ProgramID: programID(r)}
	obj, err := httpkit.DecodeObject(r, 0)
	if err != nil {
		req.BodyErr = err
		return req, nil
	}
	req.Input, req.BodyErr = input(obj)
	return req, nil
}

const msgOrigins = "allowed_origins must be a list of origins like https://shop.example.com"

// input reads the settings sent. A value of the wrong JSON type is passed
// on as its raw text, so the catalog refuses it with its own message.
func input(obj httpkit.Object) (settings.Input, error) {
	for _, k := range obj.Keys() {
		known := false
		for _, f := range settings.Fields {
			known = known || k == f
		}
		if !known {
			return settings.Input{}, &catalog.FieldError{Field: k,
				Message: "Unknown setting: " + k + ". Settings are " + strings.Join(settings.Fields, ", ")}
		}
	}
	text := func(key string) *string {
		if v, ok, err := obj.String(key); ok && err == nil {
			return &v
		}
		if raw, ok := obj.Raw(key); ok {
			s := string(raw)
			return &s
		}
		if obj.IsNull(key) {
			s := "null"
			return &s
		}
		return nil
	}
	raw := func(key string) *string {
		if obj.IsNull(key) {
			s := "null"
			return &s
		}
		if v, ok := obj.Raw(key); ok {
			s := string(v)
			return &s
		}
		return nil
	}
	in := settings.Input{
		LeadAuthPolicy:        text("lead_auth_policy"),
		AttributionWindowDays: raw("attribution_window_days"),
		PaymentTrackingMode:   text("payment_tracking_mode"),
	}
	if obj.Has("allowed_origins") {
		// null clears the list, as an empty list does.
		v, ok, err := obj.StringSlice("allowed_origins")
		if err != nil {
			return settings.Input{}, &catalog.FieldError{Field: "allowed_origins", Message: msgOrigins}
		}
		if !ok {
			v = []string{}
		}
		in.AllowedOrigins, in.AllowedOriginsSet = v, true
	}
	return in, nil
}
