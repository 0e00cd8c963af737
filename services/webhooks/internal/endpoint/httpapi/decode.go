package httpapi

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/httpkit"
	webhook "github.com/svc-dev/svc/services/webhooks/internal/endpoint"
	"github.com/svc-dev/svc/services/webhooks/internal/endpoint/endpoints"
)

// maxBody bounds a body, as every public route's (the document's 64 KiB):
// a URL of 2,048 characters, a description of 500 and a few event types
// need far less.
const maxBody = 64 << 10

// target reads the session's user and the path's ids; an id that is not a
// positive whole number is the request's refusal, reported after the
// access check (a program id's before it: there is no program to check).
func target(ctx context.Context, r *http.Request, withEndpoint bool) endpoints.Target {
	t := endpoints.Target{UserID: session.UserID(ctx), ProgramID: httpkit.PathID(r, "id")}
	if withEndpoint {
		t.EndpointID = httpkit.PathID(r, "webhookId")
		if t.EndpointID == 0 {
			t.Err = webhook.ErrBadEndpointID
		}
	}
	return t
}

// str reads a string field; null counts as absent.
func str(obj httpkit.Object, k string) (*string, error) {
	v, ok, err := obj.String(k)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, nil
	}
	return &v, nil
}

func boolean(obj httpkit.Object, k string) (*bool, error) {
	v, ok, err := obj.Bool(k)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, nil
	}
	return &v, nil
}

// events reads the events array; an empty array is kept (non-nil) so the
// service refuses it.
func events(obj httpkit.Object) ([]string, bool, error) {
	v, ok, err := obj.StringSlice("events")
	if err != nil {
		return nil, true, &httpkit.FieldError{Field: "events", Msg: "events must be an array of event type strings"}
	}
	if ok && v == nil {
		v = []string{}
	}
	return v, ok, nil
}

var createFields = []string{"url", "events", "description", "include_test"}

// decodeCreate reads {url, events, description?, include_test?}.
func decodeCreate(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.CreateRequest{Target: target(ctx, r, false)}
	req.Err = func() error {
		obj, err := httpkit.DecodeKnownObject(r, maxBody, false, createFields...)
		if err != nil {
			return err
		}
		u, err := str(obj, "url")
		if err != nil {
			return err
		}
		if u == nil {
			return webhook.ErrURLRequired
		}
		req.Input.URL = *u
		ev, ok, err := events(obj)
		if err != nil {
			return err
		}
		if !ok {
			return webhook.ErrEventsRequired
		}
		req.Input.Events = ev
		d, err := str(obj, "description")
		if err != nil {
			return err
		}
		if d != nil {
			req.Input.Description = *d
		}
		it, err := boolean(obj, "include_test")
		if err != nil {
			return err
		}
		if it != nil {
			req.Input.IncludeTest = *it
		}
		return nil
	}()
	return req, nil
}

// decodeUpdate reads {url?, events?, enabled?, description?, include_test?};
// a null is the same as leaving the field out.
func decodeUpdate(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.UpdateRequest{Target: target(ctx, r, true)}
	if req.Err != nil {
		return req, nil
	}
	req.Err = func() error {
		obj, err := httpkit.DecodeKnownObject(r, maxBody, false, "url", "events", "enabled", "description", "include_test")
		if err != nil {
			return err
		}
		var p webhook.Patch
		if p.URL, err = str(obj, "url"); err != nil {
			return err
		}
		ev, ok, err := events(obj)
		if err != nil {
			return err
		}
		if ok {
			p.Events = ev
		}
		if p.Enabled, err = boolean(obj, "enabled"); err != nil {
			return err
		}
		if p.Description, err = str(obj, "description"); err != nil {
			return err
		}
		if p.IncludeTest, err = boolean(obj, "include_test"); err != nil {
			return err
		}
		req.Patch = p
		return nil
	}()
	return req, nil
}

func decodeList(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.ListRequest{Target: target(ctx, r, false)}
	_, req.Err = httpkit.Query(r)
	return req, nil
}

// decodeNoBody takes no body (an empty JSON object is allowed): delete,
// rotate, test.
func decodeNoBody(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.EndpointRequest{Target: target(ctx, r, true)}
	if req.Err != nil {
		return req, nil
	}
	if _, err := httpkit.Query(r); err != nil {
		req.Err = err
		return req, nil
	}
	_, req.Err = httpkit.DecodeKnownObject(r, maxBody, true)
	return req, nil
}

func decodeRetry(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.RetryRequest{Target: target(ctx, r, true), DeliveryID: httpkit.PathID(r, "deliveryId")}
	if req.Err != nil {
		return req, nil
	}
	if req.DeliveryID == 0 {
		req.Err = webhook.ErrBadDeliveryID
		return req, nil
	}
	if _, err := httpkit.Query(r); err != nil {
		req.Err = err
		return req, nil
	}
	_, req.Err = httpkit.DecodeKnownObject(r, maxBody, true)
	return req, nil
}

func decodeDeliveries(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.DeliveriesRequest{Target: target(ctx, r, true), Limit: webhook.DefaultLimit}
	if req.Err != nil {
		return req, nil
	}
	req.Err = func() error {
		q, err := httpkit.Query(r, "status", "cursor", "limit")
		if err != nil {
			return err
		}
		if v, ok := q["status"]; ok {
			if !slices.Contains(webhook.Statuses, v) {
				return webhook.ErrBadStatus
			}
			req.Status = v
		}
		req.BeforeID, req.Limit, err = paging(q)
		return err
	}()
	return req, nil
}

// decodeNotifications reads ?cursor&limit (the delivery log's paging).
func decodeNotifications(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.NotificationsRequest{Target: target(ctx, r, false), Limit: webhook.DefaultLimit}
	req.Err = func() error {
		q, err := httpkit.Query(r, "cursor", "limit")
		if err != nil {
			return err
		}
		req.BeforeID, req.Limit, err = paging(q)
		return err
	}()
	return req, nil
}

// paging reads a paged list's cursor (the id to list below; 0: from the
// newest) and limit (webhook.DefaultLimit when absent).
func paging(q map[string]string) (beforeID int64, limit int, err error) {
	limit = webhook.DefaultLimit
	if v, ok := q["cursor"]; ok {
		id, good := decodeID(v)
		if !good {
			return 0, 0, webhook.ErrBadCursor
		}
		beforeID = id
	}
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > webhook.MaxLimit {
			return 0, 0, webhook.ErrBadLimit
		}
		limit = n
	}
	return beforeID, limit, nil
}

// A paged list's cursor is opaque to clients: base64url of the last id
// (delivery or notification) of the page.
func encodeID(id *int64) *string {
	if id == nil || *id <= 0 {
		return nil
	}
	s := base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(*id, 10)))
	return &s
}

func decodeID(v string) (int64, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil && n > 0
}
