package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/integration"
	"github.com/svc-dev/svc/services/accounts/internal/integration/endpoints"
)

func programOf(ctx context.Context) (int64, error) {
	k, ok := apikey.KeyFrom(ctx)
	if !ok {
		// The auth middleware runs first; no key here is a wiring bug.
		return 0, errors.New("no authenticated program key in the request context")
	}
	return k.ProgramID, nil
}

func decodeStatus(ctx context.Context, _ *http.Request) (any, error) {
	id, err := programOf(ctx)
	if err != nil {
		return nil, &endpoints.OpError{Op: endpoints.OpStatus, Err: err}
	}
	return endpoints.StatusRequest{ProgramID: id}, nil
}

func decodeTestEvent(ctx context.Context, r *http.Request) (any, error) {
	id, err := programOf(ctx)
	if err != nil {
		return nil, &endpoints.OpError{Op: endpoints.OpTestEvent, Err: err}
	}
	body, err := httpkit.DecodeObject(r, httpkit.DefaultBodyLimit)
	if err != nil {
		return nil, err
	}
	token, _ := apikey.ParseBearer(r.Header.Get("Authorization"))
	req := endpoints.TestEventRequest{
		Caller:    integration.Caller{ProgramID: id, APIKey: token, RequestID: httpkit.RequestIDFrom(ctx)},
		EventType: render(body, "event_type"),
	}
	if ip, ok := httpkit.ClientIPFrom(ctx); ok {
		req.Caller.ClientIP = ip.String()
	}
	if t, ok, err := body.String("type"); ok && err == nil && t == "chain" {
		req.Chain = true
	}
	return req, nil
}

// render shows a body value in the invalid event_type message the way the
// contract's JavaScript original did: a string as itself, an absent value
// as "undefined", anything else as its JSON text.
func render(body httpkit.Object, key string) string {
	if body.IsNull(key) {
		return "null"
	}
	raw, ok := body.Raw(key)
	if !ok {
		return "undefined"
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(raw)
}

// Answers.
