// Package apikeys is the brand console's program API keys: a member of a
// program lists its keys (masked, with their last use), and a member who
// holds tracking:write issues, marks for rotation and revokes them. Every
// change goes through the catalog service, so it is published as a catalog
// event and tracking, commissions and analytics replicate it. No HTTP or
// SQL here.
package apikeys

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// Modes of a key, as the console names them.
const (
	ModeLive = "live"
	ModeTest = "test"
)

// Refusals of these routes; the membership refusals are identity's.
var (
	// ErrKeyNotFound answers a key id that is not one of the program's
	// keys (another program's, a revoked one, none at all): nothing about
	// other programs' keys can be probed.
	ErrKeyNotFound = &identity.Error{Kind: errkind.NotFound, Message: "API key not found"}
	// ErrReadOnly answers a change by a member without tracking:write.
	ErrReadOnly = &identity.Error{Kind: errkind.Forbidden, Message: "You do not have permission to change this program's API keys"}
)

// Validation messages.
const (
	MsgMode             = "mode must be one of: test, live"
	MsgDeadline         = "deadline is required and must be an ISO 8601 time with offset"
	MsgDeadlineInFuture = "deadline must be in the future"
)

// Key is a program API key as the console shows it: never the key itself.
type Key struct {
	ID   int64
	Mode string
	// Masked is the stored prefix and the last 4 characters
	// ("svc_live_AbCd…wXyZ"); a key issued before the last 4 characters
	// were kept shows its prefix alone ("svc_live_AbCd…").
	Masked    string
	CreatedAt time.Time
	// LastUsedAt is the latest successful authentication reported by the
	// services that authenticate keys, at most their report interval (a
	// minute) late; nil when the key was never used.
	LastUsedAt       *time.Time
	RotationMarkedAt *time.Time
	RotationDeadline *time.Time
}

// Issued is a new key with its value, shown this once and never stored.
type Issued struct {
	Key
	Plain string
}

// Catalog is what the routes need of the catalog (catalog.Service).
type Catalog interface {
	ListKeys(ctx context.Context, programID int64) ([]catalog.APIKey, error)
	IssueKey(ctx context.Context, programID int64, test bool) (catalog.IssuedKey, catalog.Seq, error)
	RotateKey(ctx context.Context, keyID int64, deadline time.Time) (catalog.APIKey, catalog.Seq, error)
	RevokeKey(ctx context.Context, keyID int64) (catalog.APIKey, catalog.Seq, error)
	WaitForSync(ctx context.Context, seq catalog.Seq, timeout time.Duration) error
}

// Service is the key routes' use cases. userID comes from a verified
// dashboard session.
type Service interface {
	List(ctx context.Context, userID, programID int64) ([]Key, error)
	Create(ctx context.Context, userID, programID int64, mode string) (Issued, catalog.Seq, error)
	// MarkRotation sets the key's rotation deadline; until it the key works
	// with the rotation headers and warnings, from it on it is refused.
	MarkRotation(ctx context.Context, userID, programID, keyID int64, deadline time.Time) (Key, catalog.Seq, error)
	// Revoke refuses the key everywhere. It waits (up to the propagation
	// timeout) until every replica holds the revocation, so the key's next
	// request is refused; past the timeout it answers anyway, the
	// revocation stored and on its way.
	// It answers when the key was revoked.
	Revoke(ctx context.Context, userID, programID, keyID int64) (time.Time, catalog.Seq, error)
	// CanChange answers nil when userID may change programID's keys: the
	// check a malformed change is refused after, so a non-member learns
	// nothing from validation.
	CanChange(ctx context.Context, userID, programID int64) error
}

// DefaultPropagationTimeout bounds Revoke's wait for the replicas.
const DefaultPropagationTimeout = 5 * time.Second

// Config wires the service.
type Config struct {
	Access             identity.Authorizer
	Catalog            Catalog
	Now                func() time.Time
	PropagationTimeout time.Duration // DefaultPropagationTimeout when zero
}

type service struct{ cfg Config }

// NewService checks the wiring.
func NewService(cfg Config) (Service, error) {
	if cfg.Access == nil || cfg.Catalog == nil || cfg.Now == nil {
		return nil, errors.New("apikeys: authorizer, catalog and clock are required")
	}
	if cfg.PropagationTimeout <= 0 {
		cfg.PropagationTimeout = DefaultPropagationTimeout
	}
	return &service{cfg: cfg}, nil
}

// authorize is identity's check, with this feature's read-only message.
func (s *service) authorize(ctx context.Context, userID, programID int64, need identity.Permission) error {
	err := s.cfg.Access.Authorize(ctx, userID, programID, need)
	if errors.Is(err, identity.ErrReadOnly) {
		return ErrReadOnly
	}
	return err
}

// keys lists the program's live (not revoked) keys. A program that
// vanished between the check and the read answers as a non-member.
func (s *service) keys(ctx context.Context, programID int64) ([]catalog.APIKey, error) {
	ks, err := s.cfg.Catalog.ListKeys(ctx, programID)
	if errors.Is(err, errkind.NotFound) {
		return nil, identity.ErrNoAccess
	}
	if err != nil {
		return nil, fmt.Errorf("list program %d keys: %w", programID, err)
	}
	out := ks[:0]
	for _, k := range ks {
		if k.RevokedAt == nil {
			out = append(out, k)
		}
	}
	return out, nil
}

func (s *service) List(ctx context.Context, userID, programID int64) ([]Key, error) {
	if err := s.authorize(ctx, userID, programID, identity.PermissionRead); err != nil {
		return nil, err
	}
	ks, err := s.keys(ctx, programID)
	if err != nil {
		return nil, err
	}
	out := make([]Key, 0, len(ks))
	for _, k := range ks {
		out = append(out, view(k))
	}
	return out, nil
}

func (s *service) Create(ctx context.Context, userID, programID int64, mode string) (Issued, catalog.Seq, error) {
	if err := s.authorize(ctx, userID, programID, identity.PermissionWrite); err != nil {
		return Issued{}, 0, err
	}
	if mode != ModeLive && mode != ModeTest {
		return Issued{}, 0, &catalog.FieldError{Field: "mode", Message: MsgMode}
	}
	k, seq, err := s.cfg.Catalog.IssueKey(ctx, programID, mode == ModeTest)
	if errors.Is(err, errkind.NotFound) {
		return Issued{}, 0, identity.ErrNoAccess
	}
	if err != nil {
		return Issued{}, 0, fmt.Errorf("issue program %d key: %w", programID, err)
	}
	return Issued{Key: view(k.APIKey), Plain: k.Plain}, seq, nil
}

// find is the program's live key keyID, or ErrKeyNotFound.
func (s *service) find(ctx context.Context, programID, keyID int64) (catalog.APIKey, error) {
	ks, err := s.keys(ctx, programID)
	if err != nil {
		return catalog.APIKey{}, err
	}
	for _, k := range ks {
		if k.ID == keyID {
			return k, nil
		}
	}
	return catalog.APIKey{}, ErrKeyNotFound
}

func (s *service) MarkRotation(ctx context.Context, userID, programID, keyID int64, deadline time.Time) (Key, catalog.Seq, error) {
	if err := s.authorize(ctx, userID, programID, identity.PermissionWrite); err != nil {
		return Key{}, 0, err
	}
	if _, err := s.find(ctx, programID, keyID); err != nil {
		return Key{}, 0, err
	}
	if !deadline.After(s.cfg.Now()) {
		return Key{}, 0, &catalog.FieldError{Field: "deadline", Message: MsgDeadlineInFuture}
	}
	k, seq, err := s.cfg.Catalog.RotateKey(ctx, keyID, deadline)
	if err != nil {
		return Key{}, 0, fmt.Errorf("mark key %d for rotation: %w", keyID, err)
	}
	return view(k), seq, nil
}

func (s *service) CanChange(ctx context.Context, userID, programID int64) error {
	return s.authorize(ctx, userID, programID, identity.PermissionWrite)
}

func (s *service) Revoke(ctx context.Context, userID, programID, keyID int64) (time.Time, catalog.Seq, error) {
	if err := s.authorize(ctx, userID, programID, identity.PermissionWrite); err != nil {
		return time.Time{}, 0, err
	}
	if _, err := s.find(ctx, programID, keyID); err != nil {
		return time.Time{}, 0, err
	}
	k, seq, err := s.cfg.Catalog.RevokeKey(ctx, keyID)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("revoke key %d: %w", keyID, err)
	}
	if k.RevokedAt == nil {
		return time.Time{}, 0, fmt.Errorf("revoke key %d: the catalog kept no revocation time", keyID)
	}
	// A replica that lags is not the caller's failure: the revocation is
	// stored and published; the answer only comes later.
	_ = s.cfg.Catalog.WaitForSync(ctx, seq, s.cfg.PropagationTimeout)
	return *k.RevokedAt, seq, nil
}

// Mask is how a key is shown after issue: its stored prefix and last 4
// characters, or the prefix alone for keys issued before the last 4 were
// kept.
func Mask(prefix, last4 string) string {
	return prefix + "…" + last4
}

func view(k catalog.APIKey) Key {
	mode := ModeLive
	if k.Test {
		mode = ModeTest
	}
	return Key{
		ID: k.ID, Mode: mode, Masked: Mask(k.Prefix, k.Last4), CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt,
		RotationMarkedAt: k.RotationMarkedAt, RotationDeadline: k.RotationDeadline,
	}
}
