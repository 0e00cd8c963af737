// Package endpoints adapts the console's webhook endpoints to go-kit
// endpoints. Business errors (refusals) travel in the response (Failer);
// only infrastructure failures are endpoint errors.
package endpoints

import (
	"context"
	"time"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/obs"
	webhook "github.com/svc-dev/svc/services/webhooks/internal/endpoint"
)

// Service is the console's webhook use cases (endpoint.Service).
type Service interface {
	Check(ctx context.Context, userID, programID int64, write bool) error
	Create(ctx context.Context, userID, programID int64, in webhook.Input) (webhook.Created, error)
	List(ctx context.Context, userID, programID int64) ([]webhook.Endpoint, error)
	Update(ctx context.Context, userID, programID, id int64, p webhook.Patch) (webhook.Endpoint, error)
	Delete(ctx context.Context, userID, programID, id int64) error
	Rotate(ctx context.Context, userID, programID, id int64) (string, error)
	Ping(ctx context.Context, userID, programID, id int64) (webhook.Pinged, error)
	Deliveries(ctx context.Context, userID, programID, id int64, status string, beforeID int64, limit int) ([]webhook.Delivery, error)
	Retry(ctx context.Context, userID, programID, id, deliveryID int64) (webhook.Delivery, error)
	Notifications(ctx context.Context, userID, programID, beforeID int64, limit int) ([]webhook.Notification, error)
}

// Set holds one endpoint per route.
type Set struct {
	Create, List, Update, Delete, Rotate, Ping, Deliveries, Retry, Notifications endpoint.Endpoint
}

// New builds the set, every endpoint decorated with mw, outermost first.
func New(svc Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		Create:        obs.Decorate("webhooks_create", makeCreate(svc), mw...),
		List:          obs.Decorate("webhooks_list", makeList(svc), mw...),
		Update:        obs.Decorate("webhooks_update", makeUpdate(svc), mw...),
		Delete:        obs.Decorate("webhooks_delete", makeDelete(svc), mw...),
		Rotate:        obs.Decorate("webhooks_rotate_secret", makeRotate(svc), mw...),
		Ping:          obs.Decorate("webhooks_test", makePing(svc), mw...),
		Deliveries:    obs.Decorate("webhooks_deliveries", makeDeliveries(svc), mw...),
		Retry:         obs.Decorate("webhooks_retry_delivery", makeRetry(svc), mw...),
		Notifications: obs.Decorate("webhooks_notifications", makeNotifications(svc), mw...),
	}
}

// failed is a refusal (a business error) or an infrastructure failure: the
// first travels in the response, the second is the endpoint's error.
func failed(err error) bool { return errkind.Of(err) != errkind.Internal }

// Target is who asks about which program and endpoint; Err is what the
// transport could not decode, reported after the access check.
type Target struct {
	UserID, ProgramID, EndpointID int64
	Err                           error
}

// checkFirst answers a request the transport could not decode: the access
// refusal when there is one, otherwise the decoding problem.
func checkFirst(ctx context.Context, svc Service, t Target, write bool) error {
	if err := svc.Check(ctx, t.UserID, t.ProgramID, write); err != nil {
		return err
	}
	return t.Err
}

// Response is every route's answer: Data (nil for 204) or the refusal.
type Response struct {
	Data any
	// NextCursor is a paged list's next page (nil on the last);
	// Paged says the answer carries next_cursor at all.
	NextCursor *int64
	Paged      bool
	Err        error
}

// Failed is the refusal.
func (r Response) Failed() error { return r.Err }

func answer(data any, err error) (any, error) {
	if err != nil {
		if failed(err) {
			return Response{Err: err}, nil
		}
		return nil, err
	}
	return Response{Data: data}, nil
}

// EndpointView is an endpoint as the console shows it; Secret only in the
// create answer.
type EndpointView struct {
	ID             int64      `json:"id"`
	URL            string     `json:"url"`
	Description    string     `json:"description"`
	Events         []string   `json:"events"`
	IncludeTest    bool       `json:"include_test"`
	Enabled        bool       `json:"enabled"`
	DisabledReason *string    `json:"disabled_reason"`
	DisabledAt     *time.Time `json:"disabled_at"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	Secret         string     `json:"secret,omitempty"`
}

// ViewEndpoint shows e.
func ViewEndpoint(e webhook.Endpoint) EndpointView {
	v := EndpointView{ID: e.ID, URL: e.URL, Description: e.Description, Events: e.Events, IncludeTest: e.IncludeTest,
		Enabled: e.Enabled, DisabledAt: e.DisabledAt, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	if v.Events == nil {
		v.Events = []string{}
	}
	if !e.Enabled {
		reason := e.DisabledReason
		v.DisabledReason = &reason
	}
	return v
}

// DeliveryView is one row of the delivery log.
type DeliveryView struct {
	ID             int64      `json:"id"`
	EventID        string     `json:"event_id"`
	EventType      string     `json:"event_type"`
	Status         string     `json:"status"`
	Attempts       int        `json:"attempts"`
	LastStatus     *int       `json:"last_status"`
	LastError      *string    `json:"last_error"`
	LastDurationMS *int       `json:"last_duration_ms"`
	LastAttemptAt  *time.Time `json:"last_attempt_at"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	DeliveredAt    *time.Time `json:"delivered_at"`
	CreatedAt      time.Time  `json:"created_at"`
}

// ViewDelivery shows d.
func ViewDelivery(d webhook.Delivery) DeliveryView {
	v := DeliveryView{ID: d.ID, EventID: d.EventID, EventType: d.EventType, Status: d.Status, Attempts: d.Attempts,
		LastStatus: d.LastStatus, LastDurationMS: d.LastDurationMS, LastAttemptAt: d.LastAttemptAt, NextAttemptAt: d.NextAttemptAt,
		DeliveredAt: d.DeliveredAt, CreatedAt: d.CreatedAt}
	if d.LastError != "" {
		e := d.LastError
		v.LastError = &e
	}
	return v
}

// CreateRequest creates an endpoint.
type CreateRequest struct {
	Target
	Input webhook.Input
}

func makeCreate(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(CreateRequest)
		if req.Err != nil {
			return Response{Err: checkFirst(ctx, svc, req.Target, true)}, nil
		}
		c, err := svc.Create(ctx, req.UserID, req.ProgramID, req.Input)
		if err != nil {
			return answer(nil, err)
		}
		v := ViewEndpoint(c.Endpoint)
		v.Secret = c.Secret
		return Response{Data: v}, nil
	}
}

// ListRequest lists the program's endpoints.
type ListRequest struct{ Target }

func makeList(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(ListRequest)
		if req.Err != nil {
			return Response{Err: checkFirst(ctx, svc, req.Target, false)}, nil
		}
		es, err := svc.List(ctx, req.UserID, req.ProgramID)
		if err != nil {
			return answer(nil, err)
		}
		out := make([]EndpointView, 0, len(es))
		for _, e := range es {
			out = append(out, ViewEndpoint(e))
		}
		return Response{Data: out}, nil
	}
}

// UpdateRequest changes an endpoint.
type UpdateRequest struct {
	Target
	Patch webhook.Patch
}

func makeUpdate(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(UpdateRequest)
		if req.Err != nil {
			return Response{Err: checkFirst(ctx, svc, req.Target, true)}, nil
		}
		e, err := svc.Update(ctx, req.UserID, req.ProgramID, req.EndpointID, req.Patch)
		if err != nil {
			return answer(nil, err)
		}
		return Response{Data: ViewEndpoint(e)}, nil
	}
}

// EndpointRequest names one endpoint (delete, rotate, test).
type EndpointRequest struct{ Target }

func makeDelete(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(EndpointRequest)
		if req.Err != nil {
			return Response{Err: checkFirst(ctx, svc, req.Target, true)}, nil
		}
		return answer(nil, svc.Delete(ctx, req.UserID, req.ProgramID, req.EndpointID))
	}
}

// SecretView is a new secret, shown once.
type SecretView struct {
	Secret string `json:"secret"`
}

func makeRotate(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(EndpointRequest)
		if req.Err != nil {
			return Response{Err: checkFirst(ctx, svc, req.Target, true)}, nil
		}
		s, err := svc.Rotate(ctx, req.UserID, req.ProgramID, req.EndpointID)
		if err != nil {
			return answer(nil, err)
		}
		return Response{Data: SecretView{Secret: s}}, nil
	}
}

// PingView is the test route's event and delivery.
type PingView struct {
	EventID    string `json:"event_id"`
	DeliveryID int64  `json:"delivery_id"`
}

func makePing(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(EndpointRequest)
		if req.Err != nil {
			return Response{Err: checkFirst(ctx, svc, req.Target, true)}, nil
		}
		p, err := svc.Ping(ctx, req.UserID, req.ProgramID, req.EndpointID)
		if err != nil {
			return answer(nil, err)
		}
		return Response{Data: PingView{EventID: p.EventID, DeliveryID: p.DeliveryID}}, nil
	}
}

// DeliveriesRequest lists a page of an endpoint's delivery log.
type DeliveriesRequest struct {
	Target
	Status   string
	BeforeID int64
	Limit    int
}

func makeDeliveries(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(DeliveriesRequest)
		if req.Err != nil {
			return Response{Err: checkFirst(ctx, svc, req.Target, false)}, nil
		}
		ds, err := svc.Deliveries(ctx, req.UserID, req.ProgramID, req.EndpointID, req.Status, req.BeforeID, req.Limit+1)
		if err != nil {
			return answer(nil, err)
		}
		resp := Response{Paged: true}
		if len(ds) > req.Limit {
			ds = ds[:req.Limit]
			next := ds[len(ds)-1].ID
			resp.NextCursor = &next
		}
		out := make([]DeliveryView, 0, len(ds))
		for _, d := range ds {
			out = append(out, ViewDelivery(d))
		}
		resp.Data = out
		return resp, nil
	}
}

// RetryRequest retries one delivery.
type RetryRequest struct {
	Target
	DeliveryID int64
}

func makeRetry(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(RetryRequest)
		if req.Err != nil {
			return Response{Err: checkFirst(ctx, svc, req.Target, true)}, nil
		}
		d, err := svc.Retry(ctx, req.UserID, req.ProgramID, req.EndpointID, req.DeliveryID)
		if err != nil {
			return answer(nil, err)
		}
		return Response{Data: ViewDelivery(d)}, nil
	}
}

// NotificationView is one of the program's notifications: url is the
// endpoint's current url, null once it is deleted.
type NotificationView struct {
	ID         int64     `json:"id"`
	Kind       string    `json:"kind"`
	EndpointID int64     `json:"endpoint_id"`
	URL        *string   `json:"url"`
	CreatedAt  time.Time `json:"created_at"`
}

// NotificationsRequest lists a page of the program's notifications.
type NotificationsRequest struct {
	Target
	BeforeID int64
	Limit    int
}

// makeNotifications pages as the delivery log does: one row more than the
// page says whether there is a next one.
func makeNotifications(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(NotificationsRequest)
		if req.Err != nil {
			return Response{Err: checkFirst(ctx, svc, req.Target, false)}, nil
		}
		ns, err := svc.Notifications(ctx, req.UserID, req.ProgramID, req.BeforeID, req.Limit+1)
		if err != nil {
			return answer(nil, err)
		}
		resp := Response{Paged: true}
		if len(ns) > req.Limit {
			ns = ns[:req.Limit]
			next := ns[len(ns)-1].ID
			resp.NextCursor = &next
		}
		out := make([]NotificationView, 0, len(ns))
		for _, n := range ns {
			out = append(out, NotificationView{ID: n.ID, Kind: n.Kind, EndpointID: n.EndpointID, URL: n.URL, CreatedAt: n.CreatedAt})
		}
		resp.Data = out
		return resp, nil
	}
}
