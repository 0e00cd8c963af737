// Package settings is the program settings routes' domain: an active
// member of a program reads and changes its tracking settings (lead auth
// policy, attribution window, payment tracking mode, allowed origins).
// Changes go through the catalog service, so they are validated with the
// catalog's messages and published as catalog events. No HTTP or SQL here.
package settings

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

// Error is a refusal whose message the client sees; Kind is one of
// libs/errkind's kinds. Validation failures are *catalog.FieldError
// (errkind.Invalid), from the catalog itself.
type Error struct {
	Kind    error
	Message string
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Kind }

// ErrNoAccess answers a caller who is not an active member of the program,
// and a program that does not exist: the two look the same from outside,
// so program ids cannot be probed.
var ErrNoAccess = &Error{Kind: errkind.Forbidden, Message: "You do not have access to this program"}

// ErrBlocked answers a suspended account whose session is still valid.
var ErrBlocked = &Error{Kind: errkind.Forbidden, Message: "Your account has been suspended."}

// ErrReadOnly answers a change by a member who may read the program's
// settings but not change them (no tracking:write).
var ErrReadOnly = &Error{Kind: errkind.Forbidden, Message: "You do not have permission to change this program's settings"}

// PermissionWrite is the membership permission that changing settings
// needs; reading needs membership (tracking:read or more).
const PermissionWrite = "tracking:write"

// Fields are the settings' names, in the order they are shown.
var Fields = []string{"lead_auth_policy", "attribution_window_days", "payment_tracking_mode", "allowed_origins"}

// Settings are a program's tracking settings.
type Settings struct {
	ProgramID             int64
	LeadAuthPolicy        string
	AttributionWindowDays int
	PaymentTrackingMode   string
	AllowedOrigins        []string
}

// Input is a change as sent; nil fields are left alone. Numbers are raw JSON
// (see catalog.ProgramInput) so the catalog reports type and range problems
// with its own messages.
type Input struct {
	LeadAuthPolicy        *string
	AttributionWindowDays *string
	PaymentTrackingMode   *string
	AllowedOrigins        []string
	AllowedOriginsSet     bool
}

// Empty reports whether the input changes nothing.
func (in Input) Empty() bool {
	return in.LeadAuthPolicy == nil && in.AttributionWindowDays == nil && in.PaymentTrackingMode == nil && !in.AllowedOriginsSet
}

// AccessResult is what the access check found.
type AccessResult struct {
	ActiveMember bool
	Blocked      bool
	// Permissions are the membership's (tracking:read, tracking:write).
	Permissions []string
}

// Access answers whether a user may use a program's settings. A program or
// membership that does not exist gives the zero AccessResult.
type Access interface {
	MemberAccess(ctx context.Context, userID, programID int64) (AccessResult, error)
}

// Service is the settings routes' use cases. userID comes from a verified
// dashboard session.
type Service interface {
	Get(ctx context.Context, userID, programID int64) (Settings, error)
	Update(ctx context.Context, userID, programID int64, in Input) (Settings, catalog.Seq, error)
}

type service struct {
	access  Access
	catalog catalog.Service
}

// NewService checks the wiring.
func NewService(access Access, cat catalog.Service) (Service, error) {
	if access == nil || cat == nil {
		return nil, errors.New("settings: access store and catalog service are required")
	}
	return &service{access: access, catalog: cat}, nil
}

func (s *service) authorize(ctx context.Context, userID, programID int64, write bool) error {
	if programID <= 0 || userID <= 0 {
		return ErrNoAccess
	}
	a, err := s.access.MemberAccess(ctx, userID, programID)
	if err != nil {
		return fmt.Errorf("check access: %w", err)
	}
	if a.Blocked {
		return ErrBlocked
	}
	if !a.ActiveMember {
		return ErrNoAccess
	}
	if write && !slices.Contains(a.Permissions, PermissionWrite) {
		return ErrReadOnly
	}
	return nil
}

func (s *service) Get(ctx context.Context, userID, programID int64) (Settings, error) {
	if err := s.authorize(ctx, userID, programID, false); err != nil {
		return Settings{}, err
	}
	p, err := s.catalog.GetProgram(ctx, programID)
	if errors.Is(err, errkind.NotFound) {
		return Settings{}, ErrNoAccess
	}
	if err != nil {
		return Settings{}, fmt.Errorf("load program %d: %w", programID, err)
	}
	return fromProgram(p), nil
}

// ErrNothingToChange answers a PATCH that names no setting.
var ErrNothingToChange = &catalog.FieldError{Field: "body", Message: "Send at least one of: " + strings.Join(Fields, ", ")}

func (s *service) Update(ctx context.Context, userID, programID int64, in Input) (Settings, catalog.Seq, error) {
	if err := s.authorize(ctx, userID, programID, true); err != nil {
		return Settings{}, 0, err
	}
	if in.Empty() {
		return Settings{}, 0, ErrNothingToChange
	}
	p, seq, err := s.catalog.UpdateProgram(ctx, programID, catalog.ProgramInput{
		LeadAuthPolicy:        in.LeadAuthPolicy,
		AttributionWindowDays: in.AttributionWindowDays,
		PaymentTrackingMode:   in.PaymentTrackingMode,
		AllowedOrigins:        in.AllowedOrigins,
		AllowedOriginsSet:     in.AllowedOriginsSet,
	})
	switch {
	case err == nil:
		return fromProgram(p), seq, nil
	case errors.Is(err, errkind.Invalid):
		return Settings{}, 0, err
	case errors.Is(err, errkind.NotFound):
		return Settings{}, 0, ErrNoAccess
	}
	return Settings{}, 0, fmt.Errorf("update program %d settings: %w", programID, err)
}

func fromProgram(p catalog.Program) Settings {
	origins := p.AllowedOrigins
	if origins == nil {
		origins = []string{}
	}
	return Settings{
		ProgramID:             p.ID,
		LeadAuthPolicy:        p.LeadAuthPolicy,
		AttributionWindowDays: p.AttributionWindowDays,
		PaymentTrackingMode:   p.PaymentTrackingMode,
		AllowedOrigins:        origins,
	}
}
