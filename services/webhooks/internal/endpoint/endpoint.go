// Package endpoint is the brand console's webhook endpoints (issue 22): a
// member of a program reads its endpoints, their delivery log and what the
// program was told about them (an endpoint disabled for failing), and
// (with tracking:write) creates, changes and deletes endpoints, rotates
// their signing secrets, sends a ping and retries a delivery. Access is
// decided on the catalog replica's memberships. No HTTP or SQL here.
package endpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/webhooks/internal/apierr"
	"github.com/svc-dev/svc/services/webhooks/internal/secret"
)

// Permissions of a membership (accounts' names).
const (
	PermissionRead  = "tracking:read"
	PermissionWrite = "tracking:write"
)

// EventTypes are the v1 event types an endpoint may subscribe to.
// click.recorded is sent only to endpoints that list it (it is the
// high-volume one); ping is not subscribable: the test route sends it to
// one endpoint.
var EventTypes = []string{
	"lead.created", "sale.created", "sale.refunded",
	"commission.created", "commission.approved", "commission.reversed", "commission.paid",
	"partner.enrolled", "payout.paid", "click.recorded",
}

// TypePing is the test route's event type.
const TypePing = "ping"

// Limits of an endpoint's fields and of a program's endpoints.
const (
	MaxURL         = 2048
	MaxDescription = 500
	// MaxEndpoints per program: the list is one answer (no paging), and
	// every event fans out to each endpoint of its program.
	MaxEndpoints = 20
	// SecretOverlap is how long a rotated-out secret keeps signing beside
	// the new one.
	SecretOverlap = 24 * time.Hour
)

// Delivery statuses (the filter's values).
var Statuses = []string{"pending", "delivered", "failed"}

// Page sizes of the delivery log and the notifications, as the other
// console lists.
const (
	DefaultLimit = 50
	MaxLimit     = 100
)

// DisabledManually is disabled_reason of an endpoint a member turned off
// (the dispatcher writes "failing" for one it disabled).
const DisabledManually = "manual"

// Error is the service's refusal (apierr: one error table for all its
// routes).
type Error = apierr.Error

// The refusals; access is worded as the other console routes word it.
var (
	ErrNoAccess         = &Error{Kind: errkind.Forbidden, Message: "You do not have access to this program"}
	ErrReadOnly         = &Error{Kind: errkind.Forbidden, Message: "You do not have permission to change this program's webhooks"}
	ErrProgramNotFound  = &Error{Kind: errkind.NotFound, Message: "Program not found"}
	ErrNotFound         = &Error{Kind: errkind.NotFound, Message: "Webhook endpoint not found in this program"}
	ErrDeliveryNotFound = &Error{Kind: errkind.NotFound, Message: "Delivery not found for this webhook endpoint"}
	ErrTooMany          = &Error{Kind: errkind.Conflict, Message: fmt.Sprintf("A program can have at most %d webhook endpoints; delete one first", MaxEndpoints)}
	ErrNoSecretKey      = &Error{Kind: errkind.Unavailable, Message: "Webhook signing is not configured on this server: endpoints cannot be created nor their secrets rotated"}
	ErrBadProgram       = &Error{Kind: errkind.Invalid, Field: "id", Message: "id must be a positive whole number"}
	ErrBadEndpointID    = &Error{Kind: errkind.Invalid, Field: "webhookId", Message: "webhookId must be a positive whole number"}
	ErrBadDeliveryID    = &Error{Kind: errkind.Invalid, Field: "deliveryId", Message: "deliveryId must be a positive whole number"}
	ErrBadStatus        = &Error{Kind: errkind.Invalid, Field: "status", Message: "status must be one of " + strings.Join(Statuses, ", ")}
	ErrBadLimit         = &Error{Kind: errkind.Invalid, Field: "limit", Message: fmt.Sprintf("limit must be a whole number from 1 to %d", MaxLimit)}
	ErrBadCursor        = &Error{Kind: errkind.Invalid, Field: "cursor", Message: "cursor must be the next_cursor of a previous page"}
	ErrURLRequired      = &Error{Kind: errkind.Invalid, Field: "url", Message: "url is required"}
	ErrURLTooLong       = &Error{Kind: errkind.Invalid, Field: "url", Message: fmt.Sprintf("url must be at most %d characters", MaxURL)}
	ErrURLInvalid       = &Error{Kind: errkind.Invalid, Field: "url", Message: "url must be an absolute http:// or https:// URL with a host"}
	// ErrURLCredentials: a user name or password in the URL would be shown
	// whole to every reader of the endpoint (the URL is not a secret; the
	// signing secret is how a receiver checks the sender).
	ErrURLCredentials = &Error{Kind: errkind.Invalid, Field: "url", Message: "url must not contain a user name or password; verify deliveries with the signing secret"}
	ErrURLRefused     = &Error{Kind: errkind.Invalid, Field: "url", Message: "url is not an allowed webhook destination: https:// to a public address (http:// and private addresses only in the local stack)"}
	ErrEventsRequired = &Error{Kind: errkind.Invalid, Field: "events", Message: "events must list at least one event type"}
	ErrDescription    = &Error{Kind: errkind.Invalid, Field: "description", Message: fmt.Sprintf("description must be at most %d characters", MaxDescription)}
	ErrEmptyPatch     = &Error{Kind: errkind.Invalid, Field: "body", Message: "Send at least one of url, events, enabled, description, include_test"}
)

func errUnknownEvent(v string) *Error {
	return &Error{Kind: errkind.Invalid, Field: "events",
		Message: fmt.Sprintf("Unknown event type: %s. Valid: %s", v, strings.Join(EventTypes, ", "))}
}

func errDuplicateEvent(v string) *Error {
	return &Error{Kind: errkind.Invalid, Field: "events", Message: "events lists " + v + " twice"}
}

// Member is a user's membership of a program as the replica has it.
type Member struct {
	Active      bool
	Permissions []string
}

// Endpoint is a program's webhook endpoint.
type Endpoint struct {
	ID             int64
	ProgramID      int64
	URL            string
	Description    string
	Events         []string
	IncludeTest    bool
	Enabled        bool
	DisabledReason string
	DisabledAt     *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Patch is a change of an endpoint: nil fields are kept.
type Patch struct {
	URL         *string
	Events      []string
	Enabled     *bool
	Description *string
	IncludeTest *bool
}

func (p Patch) empty() bool {
	return p.URL == nil && p.Events == nil && p.Enabled == nil && p.Description == nil && p.IncludeTest == nil
}

// Delivery is one row of an endpoint's delivery log.
type Delivery struct {
	ID             int64
	EventID        string
	EventType      string
	Status         string
	Attempts       int
	LastStatus     *int
	LastError      string
	LastDurationMS *int
	LastAttemptAt  *time.Time
	NextAttemptAt  *time.Time
	DeliveredAt    *time.Time
	CreatedAt      time.Time
}

// KindEndpointDisabled is the one kind of notification so far: the
// dispatcher disabled an endpoint whose every attempt failed for
// DISABLE_AFTER (disabled_reason "failing").
const KindEndpointDisabled = "endpoint_disabled"

// Notification is what a program was told about its endpoints, written by
// the dispatcher in the transaction that disabled the endpoint. It
// outlives the endpoint: URL is the endpoint's current url, nil once the
// endpoint is deleted.
type Notification struct {
	ID         int64
	Kind       string
	EndpointID int64
	URL        *string
	CreatedAt  time.Time
}

// Event is an event to write (the ping): its body is the exact JSON sent.
type Event struct {
	ID        string
	ProgramID int64
	Type      string
	ObjectKey string
	Body      []byte
	CreatedAt time.Time
}

// Seal seals a new secret for the endpoint with this id (the id is the
// sealed secret's additional data, known only once the row exists).
type Seal func(endpointID int64) ([]byte, error)

// Store is what the service reads and writes. Every method taking a
// program id and an endpoint id answers false when the endpoint is not the
// program's.
type Store interface {
	Member(ctx context.Context, programID, userID int64) (Member, bool, error)
	ProgramExists(ctx context.Context, programID int64) (bool, error)
	// Create writes the endpoint and its sealed secret in one
	// transaction, refusing ErrTooMany once the program has max.
	Create(ctx context.Context, e Endpoint, seal Seal, max int) (Endpoint, error)
	List(ctx context.Context, programID int64) ([]Endpoint, error)
	Get(ctx context.Context, programID, id int64) (Endpoint, bool, error)
	Update(ctx context.Context, programID, id int64, p Patch, now time.Time) (Endpoint, bool, error)
	Delete(ctx context.Context, programID, id int64) (bool, error)
	// Rotate adds a secret: the current one expires at now+overlap,
	// older ones still signing expire now.
	Rotate(ctx context.Context, programID, id int64, seal Seal, now time.Time, overlap time.Duration) (bool, error)
	// Ping writes the event and its one delivery to the endpoint, due now.
	Ping(ctx context.Context, programID, id int64, ev Event) (deliveryID int64, ok bool, err error)
	// Deliveries lists the endpoint's deliveries newest first (by id)
	// below beforeID (0: from the newest), at most limit.
	Deliveries(ctx context.Context, endpointID int64, status string, beforeID int64, limit int) ([]Delivery, error)
	// Retry makes the delivery pending and due now, keeping its attempts.
	Retry(ctx context.Context, programID, endpointID, deliveryID int64, now time.Time) (Delivery, bool, error)
	// Notifications lists the program's notifications newest first (by
	// id) below beforeID (0: from the newest), at most limit.
	Notifications(ctx context.Context, programID, beforeID int64, limit int) ([]Notification, error)
}

// Config is the service's dependencies.
type Config struct {
	Store Store
	// Box seals secrets; nil (no WEBHOOKS_SECRET_KEY): create and rotate
	// answer ErrNoSecretKey.
	Box *secret.Box
	// CheckURL refuses a destination the dispatcher would not call
	// (delivery.CheckURL under WEBHOOKS_ALLOW_PRIVATE).
	CheckURL func(string) error
	Now      func() time.Time
}

// Service is the console's webhook use cases. userID comes from a verified
// dashboard session.
type Service struct {
	cfg Config
}

// New checks the wiring.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.CheckURL == nil || cfg.Now == nil {
		return nil, errors.New("endpoint: store, CheckURL and Now are required")
	}
	return &Service{cfg: cfg}, nil
}

// Check is the access check alone: the transport runs it before it reports
// a bad request, so a non-member or a reader learns nothing from the
// validation of what they sent.
func (s *Service) Check(ctx context.Context, userID, programID int64, write bool) error {
	if programID <= 0 {
		return ErrBadProgram
	}
	if userID <= 0 {
		return ErrNoAccess
	}
	m, ok, err := s.cfg.Store.Member(ctx, programID, userID)
	if err != nil {
		return fmt.Errorf("membership of user %d in program %d: %w", userID, programID, err)
	}
	if !ok || !m.Active || !slices.Contains(m.Permissions, PermissionRead) {
		if !ok {
			exists, err := s.cfg.Store.ProgramExists(ctx, programID)
			if err != nil {
				return fmt.Errorf("program %d: %w", programID, err)
			}
			if !exists {
				return ErrProgramNotFound
			}
		}
		return ErrNoAccess
	}
	if write && !slices.Contains(m.Permissions, PermissionWrite) {
		return ErrReadOnly
	}
	return nil
}

// Input is a new endpoint as sent.
type Input struct {
	URL         string
	Events      []string
	Description string
	IncludeTest bool
}

// Created is a new endpoint and its secret, shown this once.
type Created struct {
	Endpoint
	Secret string
}

// Create checks access and the input, then writes the endpoint with a
// fresh sealed secret.
func (s *Service) Create(ctx context.Context, userID, programID int64, in Input) (Created, error) {
	if err := s.Check(ctx, userID, programID, true); err != nil {
		return Created{}, err
	}
	if s.cfg.Box == nil {
		return Created{}, ErrNoSecretKey
	}
	if err := s.checkURL(in.URL); err != nil {
		return Created{}, err
	}
	events, err := checkEvents(in.Events)
	if err != nil {
		return Created{}, err
	}
	if err := checkDescription(in.Description); err != nil {
		return Created{}, err
	}
	sec, err := secret.New()
	if err != nil {
		return Created{}, err
	}
	now := s.cfg.Now().UTC()
	e, err := s.cfg.Store.Create(ctx, Endpoint{ProgramID: programID, URL: in.URL, Description: in.Description, Events: events,
		IncludeTest: in.IncludeTest, Enabled: true, CreatedAt: now, UpdatedAt: now}, s.seal(sec), MaxEndpoints)
	if err != nil {
		return Created{}, err
	}
	return Created{Endpoint: e, Secret: sec}, nil
}

func (s *Service) seal(sec string) Seal {
	return func(id int64) ([]byte, error) { return s.cfg.Box.Seal(sec, id) }
}

// List checks access and answers the program's endpoints, oldest first.
func (s *Service) List(ctx context.Context, userID, programID int64) ([]Endpoint, error) {
	if err := s.Check(ctx, userID, programID, false); err != nil {
		return nil, err
	}
	return s.cfg.Store.List(ctx, programID)
}

// Update checks access and the patch, then applies it. Turning an endpoint
// on clears why and since when it was off, and its failing streak.
func (s *Service) Update(ctx context.Context, userID, programID, id int64, p Patch) (Endpoint, error) {
	if err := s.Check(ctx, userID, programID, true); err != nil {
		return Endpoint{}, err
	}
	if id <= 0 {
		return Endpoint{}, ErrBadEndpointID
	}
	if p.empty() {
		return Endpoint{}, ErrEmptyPatch
	}
	if p.URL != nil {
		if err := s.checkURL(*p.URL); err != nil {
			return Endpoint{}, err
		}
	}
	if p.Events != nil {
		events, err := checkEvents(p.Events)
		if err != nil {
			return Endpoint{}, err
		}
		p.Events = events
	}
	if p.Description != nil {
		if err := checkDescription(*p.Description); err != nil {
			return Endpoint{}, err
		}
	}
	e, ok, err := s.cfg.Store.Update(ctx, programID, id, p, s.cfg.Now().UTC())
	if err != nil {
		return Endpoint{}, err
	}
	if !ok {
		return Endpoint{}, ErrNotFound
	}
	return e, nil
}

// Delete checks access and deletes the endpoint with its secrets and
// deliveries; its notifications stay, without its url.
func (s *Service) Delete(ctx context.Context, userID, programID, id int64) error {
	if err := s.Check(ctx, userID, programID, true); err != nil {
		return err
	}
	if id <= 0 {
		return ErrBadEndpointID
	}
	ok, err := s.cfg.Store.Delete(ctx, programID, id)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNotFound
	}
	return nil
}

// Rotate checks access and gives the endpoint a new secret, answered this
// once; the previous one keeps signing for SecretOverlap.
func (s *Service) Rotate(ctx context.Context, userID, programID, id int64) (string, error) {
	if err := s.Check(ctx, userID, programID, true); err != nil {
		return "", err
	}
	if id <= 0 {
		return "", ErrBadEndpointID
	}
	if s.cfg.Box == nil {
		return "", ErrNoSecretKey
	}
	sec, err := secret.New()
	if err != nil {
		return "", err
	}
	ok, err := s.cfg.Store.Rotate(ctx, programID, id, s.seal(sec), s.cfg.Now().UTC(), SecretOverlap)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", ErrNotFound
	}
	return sec, nil
}

// Pinged is the test route's event and delivery.
type Pinged struct {
	EventID    string
	DeliveryID int64
}

// Ping checks access and writes a ping event with one delivery to this
// endpoint only, due now.
func (s *Service) Ping(ctx context.Context, userID, programID, id int64) (Pinged, error) {
	if err := s.Check(ctx, userID, programID, true); err != nil {
		return Pinged{}, err
	}
	if id <= 0 {
		return Pinged{}, ErrBadEndpointID
	}
	ev, err := PingEvent(programID, id, s.cfg.Now())
	if err != nil {
		return Pinged{}, err
	}
	did, ok, err := s.cfg.Store.Ping(ctx, programID, id, ev)
	if err != nil {
		return Pinged{}, err
	}
	if !ok {
		return Pinged{}, ErrNotFound
	}
	return Pinged{EventID: ev.ID, DeliveryID: did}, nil
}

// PingEvent is the ping for an endpoint: the contract's body, data
// {"endpoint_id": …}.
func PingEvent(programID, endpointID int64, at time.Time) (Event, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return Event{}, fmt.Errorf("ping event id: %w", err)
	}
	at = at.UTC().Truncate(time.Millisecond)
	ev := Event{ID: "evt_" + hex.EncodeToString(b), ProgramID: programID, Type: TypePing,
		ObjectKey: fmt.Sprintf("endpoint:%d", endpointID), CreatedAt: at}
	body, err := json.Marshal(struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		CreatedAt string `json:"created_at"`
		ProgramID int64  `json:"program_id"`
		Data      struct {
			EndpointID int64 `json:"endpoint_id"`
		} `json:"data"`
	}{ID: ev.ID, Type: ev.Type, CreatedAt: at.Format("2006-01-02T15:04:05.000Z"), ProgramID: programID,
		Data: struct {
			EndpointID int64 `json:"endpoint_id"`
		}{endpointID}})
	if err != nil {
		return Event{}, err
	}
	ev.Body = body
	return ev, nil
}

// Deliveries checks access and the endpoint, then answers a page of its
// delivery log below beforeID (0: from the newest).
func (s *Service) Deliveries(ctx context.Context, userID, programID, id int64, status string, beforeID int64, limit int) ([]Delivery, error) {
	if err := s.Check(ctx, userID, programID, false); err != nil {
		return nil, err
	}
	if id <= 0 {
		return nil, ErrBadEndpointID
	}
	if _, ok, err := s.cfg.Store.Get(ctx, programID, id); err != nil {
		return nil, err
	} else if !ok {
		return nil, ErrNotFound
	}
	return s.cfg.Store.Deliveries(ctx, id, status, beforeID, limit)
}

// Retry checks access and makes the delivery due now again.
func (s *Service) Retry(ctx context.Context, userID, programID, id, deliveryID int64) (Delivery, error) {
	if err := s.Check(ctx, userID, programID, true); err != nil {
		return Delivery{}, err
	}
	if id <= 0 {
		return Delivery{}, ErrBadEndpointID
	}
	if deliveryID <= 0 {
		return Delivery{}, ErrBadDeliveryID
	}
	if _, ok, err := s.cfg.Store.Get(ctx, programID, id); err != nil {
		return Delivery{}, err
	} else if !ok {
		return Delivery{}, ErrNotFound
	}
	d, ok, err := s.cfg.Store.Retry(ctx, programID, id, deliveryID, s.cfg.Now().UTC())
	if err != nil {
		return Delivery{}, err
	}
	if !ok {
		return Delivery{}, ErrDeliveryNotFound
	}
	return d, nil
}

// Notifications checks access (a reader may read them) and answers a page
// of the program's notifications below beforeID (0: from the newest).
func (s *Service) Notifications(ctx context.Context, userID, programID, beforeID int64, limit int) ([]Notification, error) {
	if err := s.Check(ctx, userID, programID, false); err != nil {
		return nil, err
	}
	return s.cfg.Store.Notifications(ctx, programID, beforeID, limit)
}

// checkURL is the URL's shape, then the dispatcher's own refusal.
func (s *Service) checkURL(raw string) error {
	if raw == "" {
		return ErrURLRequired
	}
	if utf8.RuneCountInString(raw) > MaxURL || len(raw) > 4*MaxURL {
		return ErrURLTooLong
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" {
		return ErrURLInvalid
	}
	if strings.ContainsAny(raw, " \t\r\n") {
		return ErrURLInvalid
	}
	if u.User != nil {
		return ErrURLCredentials
	}
	if err := s.cfg.CheckURL(raw); err != nil {
		return ErrURLRefused
	}
	return nil
}

// checkEvents answers the types in the order sent.
func checkEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return nil, ErrEventsRequired
	}
	seen := map[string]bool{}
	for _, v := range events {
		if !slices.Contains(EventTypes, v) {
			return nil, errUnknownEvent(v)
		}
		if seen[v] {
			return nil, errDuplicateEvent(v)
		}
		seen[v] = true
	}
	return slices.Clone(events), nil
}

func checkDescription(d string) error {
	if utf8.RuneCountInString(d) > MaxDescription {
		return ErrDescription
	}
	return nil
}
