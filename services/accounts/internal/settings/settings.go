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
	"strings"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// The refusals of the access check are identity's (identity.ErrNoAccess,
// ErrBlocked, ErrReadOnly). Validation failures are *catalog.FieldError
// (errkind.Invalid), from the catalog itself.

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

// Service is the settings routes' use cases. userID comes from a verified
// dashboard session.
type Service interface {
	Get(ctx context.Context, userID, programID int64) (Settings, error)
	Update(ctx context.Context, userID, programID int64, in Input) (Settings, catalog.Seq, error)
}

type service struct {
	auth    identity.Authorizer
	catalog catalog.Service
}

// NewService checks the wiring.
func NewService(auth identity.Authorizer, cat catalog.Service) (Service, error) {
	if auth == nil || cat == nil {
		return nil, errors.New("settings: authorizer and catalog service are required")
	}
	return &service{auth: auth, catalog: cat}, nil
}

func (s *service) Get(ctx context.Context, userID, programID int64) (Settings, error) {
	if err := s.auth.Authorize(ctx, userID, programID, identity.PermissionRead); err != nil {
		return Settings{}, err
	}
	p, err := s.catalog.GetProgram(ctx, programID)
	if errors.Is(err, errkind.NotFound) {
		return Settings{}, identity.ErrNoAccess
	}
	if err != nil {
		return Settings{}, fmt.Errorf("load program %d: %w", programID, err)
	}
	return fromProgram(p), nil
}

// ErrNothingToChange answers a PATCH that names no setting.
var ErrNothingToChange = &catalog.FieldError{Field: "body", Message: "Send at least one of: " + strings.Join(Fields, ", ")}

func (s *service) Update(ctx context.Context, userID, programID int64, in Input) (Settings, catalog.Seq, error) {
	if err := s.auth.Authorize(ctx, userID, programID, identity.PermissionWrite); err != nil {
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
		return Settings{}, 0, identity.ErrNoAccess
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
