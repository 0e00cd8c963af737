// Package endpoints adapts apikeys.Service (the console's program API
// keys) to go-kit endpoints. Refusals travel in the response (Failer);
// infrastructure failures are endpoint errors.
package endpoints

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/accounts/internal/apikeys"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// Set holds one endpoint per route.
type Set struct {
	List         endpoint.Endpoint
	Create       endpoint.Endpoint
	MarkRotation endpoint.Endpoint
	Revoke       endpoint.Endpoint
}

// New builds the endpoints, each decorated with mw (tracing), outermost first.
func New(svc apikeys.Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		List:         obs.Decorate("program_keys_list", makeList(svc), mw...),
		Create:       obs.Decorate("program_keys_create", makeCreate(svc), mw...),
		MarkRotation: obs.Decorate("program_keys_rotation", makeMarkRotation(svc), mw...),
		Revoke:       obs.Decorate("program_keys_revoke", makeRevoke(svc), mw...),
	}
}

// Request is a decoded key request; the fields a route does not use are
// zero.
type Request struct {
	UserID    int64
	ProgramID int64
	// KeyID is the path's key id; 0 when it is not a positive integer
	// (no key has it: 404 once access is checked).
	KeyID    int64
	Mode     string
	Deadline time.Time
	// BodyErr is a body problem, reported only once the permission to
	// change is checked, so a non-member or a reader learns nothing from
	// validation.
	BodyErr error
}

// Response is every route's answer: Data under "data", or a refusal.
type Response struct {
	Data   any   `json:"data"`
	Err    error `json:"-"`
	seq    catalog.Seq
	status int
}

var _ endpoint.Failer = Response{}

func (r Response) Failed() error { return r.Err }

// StatusCode is 201 for an issued key, else 200.
func (r Response) StatusCode() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// Headers carry X-Catalog-Seq on a change: the catalog sequence to wait
// for (GET /admin/v1/catalog/sync) before expecting every service to see it.
func (r Response) Headers() http.Header {
	h := http.Header{}
	if r.seq > 0 {
		h.Set("X-Catalog-Seq", strconv.FormatInt(int64(r.seq), 10))
	}
	return h
}

// KeyView is a key as listed: never the key itself.
type KeyView struct {
	ID         int64         `json:"id"`
	Mode       string        `json:"mode"`
	Masked     string        `json:"masked"`
	CreatedAt  string        `json:"created_at"`
	LastUsedAt *string       `json:"last_used_at"`
	Rotation   *RotationView `json:"rotation"`
}

// RotationView is a key's rotation mark.
type RotationView struct {
	MarkedAt string `json:"marked_at"`
	Deadline string `json:"deadline"`
}

// IssuedView is a new key with its value: the only time it is shown.
type IssuedView struct {
	KeyView
	Key string `json:"key"`
}

// RevokedView answers a revocation.
type RevokedView struct {
	ID        int64  `json:"id"`
	RevokedAt string `json:"revoked_at"`
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// NewKeyView renders k.
func NewKeyView(k apikeys.Key) KeyView {
	v := KeyView{ID: k.ID, Mode: k.Mode, Masked: k.Masked, CreatedAt: rfc3339(k.CreatedAt)}
	if k.LastUsedAt != nil {
		s := rfc3339(*k.LastUsedAt)
		v.LastUsedAt = &s
	}
	if k.RotationMarkedAt != nil && k.RotationDeadline != nil {
		v.Rotation = &RotationView{MarkedAt: rfc3339(*k.RotationMarkedAt), Deadline: rfc3339(*k.RotationDeadline)}
	}
	return v
}

func public(err error) bool {
	var ie *identity.Error
	return errors.As(err, &ie) || errors.Is(err, errkind.Invalid) || errors.As(err, new(*httpkit.DecodeError))
}

func answer(data any, seq catalog.Seq, status int, err error) (any, error) {
	if err != nil {
		if public(err) {
			return Response{Err: err}, nil
		}
		return nil, err
	}
	return Response{Data: data, seq: seq, status: status}, nil
}

func makeList(svc apikeys.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		ks, err := svc.List(ctx, r.UserID, r.ProgramID)
		views := make([]KeyView, 0, len(ks))
		for _, k := range ks {
			views = append(views, NewKeyView(k))
		}
		return answer(views, 0, 0, err)
	}
}

// refuseBody answers a malformed change once the caller may change keys.
func refuseBody(ctx context.Context, svc apikeys.Service, r Request) (any, error) {
	if err := svc.CanChange(ctx, r.UserID, r.ProgramID); err != nil {
		return answer(nil, 0, 0, err)
	}
	return Response{Err: r.BodyErr}, nil
}

func makeCreate(svc apikeys.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		if r.BodyErr != nil {
			return refuseBody(ctx, svc, r)
		}
		k, seq, err := svc.Create(ctx, r.UserID, r.ProgramID, r.Mode)
		return answer(IssuedView{KeyView: NewKeyView(k.Key), Key: k.Plain}, seq, http.StatusCreated, err)
	}
}

func makeMarkRotation(svc apikeys.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		if r.BodyErr != nil {
			return refuseBody(ctx, svc, r)
		}
		k, seq, err := svc.MarkRotation(ctx, r.UserID, r.ProgramID, r.KeyID, r.Deadline)
		return answer(NewKeyView(k), seq, 0, err)
	}
}

func makeRevoke(svc apikeys.Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(Request)
		at, seq, err := svc.Revoke(ctx, r.UserID, r.ProgramID, r.KeyID)
		return answer(RevokedView{ID: r.KeyID, RevokedAt: rfc3339(at)}, seq, 0, err)
	}
}
