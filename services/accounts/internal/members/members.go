// Package members is the brand console's team: a member of a program lists
// its members, and a member who holds tracking:write adds people by email
// (a person unknown here is created without a sign-in identity; their
// first dashboard sign-in with that verified email binds it) and removes
// members, never the last one holding tracking:write. Memberships are
// catalog data: every change is a catalog write with its event, so the
// other services' replicas follow. No HTTP or SQL here.
package members

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// Refusals; the membership refusals are identity's.
var (
	// ErrMemberNotFound answers a user id that is not an active member of
	// the program (another program's member, a removed one, nobody).
	ErrMemberNotFound = &identity.Error{Kind: errkind.NotFound, Message: "Member not found"}
	// ErrReadOnly answers a change by a member without tracking:write.
	ErrReadOnly = &identity.Error{Kind: errkind.Forbidden, Message: "You do not have permission to change this program's team"}
	// ErrLastWriter answers a removal (or a re-add without
	// tracking:write) of the program's last active member holding
	// tracking:write: someone must be able to change the program.
	ErrLastWriter = &identity.Error{Kind: errkind.Conflict,
		Message: "This is the program's last member with tracking:write. Give another member tracking:write first.",
		Code:    "LAST_WRITER"}
	ErrBadLimit  = &catalog.FieldError{Field: "limit", Message: "limit must be a whole number from 1 to " + strconv.Itoa(MaxLimit)}
	ErrBadCursor = &catalog.FieldError{Field: "cursor", Message: "cursor must be the next_cursor of a previous page"}
)

// MsgPermissions is the permissions field's validation message.
const MsgPermissions = "permissions must be a non-empty list of: tracking:read, tracking:write"

// Page sizes of the list.
const (
	DefaultLimit = 50
	MaxLimit     = 100
)

// Member is a person's membership of a program.
type Member struct {
	UserID      int64
	Email       string
	Name        string
	Permissions []string
	Active      bool
}

// Page asks for the members with a user id above After, at most Limit.
type Page struct {
	After int64
	Limit int
}

// Listed is a page; Next is the After of the next page, 0 on the last.
type Listed struct {
	Members []Member
	Next    int64
}

// Store reads memberships with their people.
type Store interface {
	// List reads at most limit of the program's memberships, active or
	// not, with a user id above after, by user id.
	List(ctx context.Context, programID, after int64, limit int) ([]Member, error)
	// Get reads one membership; a *catalog.NotFoundError when there is none.
	Get(ctx context.Context, programID, userID int64) (Member, error)
}

// Catalog is what the routes need of the catalog service (users, with
// their events) and of its store (the team's guarded write).
type Catalog interface {
	FindUserByEmail(ctx context.Context, email *string) (catalog.User, error)
	CreateUser(ctx context.Context, in catalog.UserInput) (catalog.User, catalog.Seq, error)
	WaitForSync(ctx context.Context, seq catalog.Seq, timeout time.Duration) error
}

// Service is the team routes' use cases; userID comes from a verified
// dashboard session.
type Service interface {
	List(ctx context.Context, userID, programID int64, p Page) (Listed, error)
	// Add makes the person with email an active member with permissions
	// (re-adding updates them), creating the user when unknown.
	Add(ctx context.Context, userID, programID int64, email string, permissions []string) (Member, catalog.Seq, error)
	// Remove deactivates memberID's membership, then waits (up to the
	// propagation timeout) until every replica holds it, so the person's
	// next request on the program is refused everywhere.
	Remove(ctx context.Context, userID, programID, memberID int64) (Member, catalog.Seq, error)
	// CanRead and CanChange answer nil when userID may read (change)
	// programID's team: the checks a malformed request is refused after.
	CanRead(ctx context.Context, userID, programID int64) error
	CanChange(ctx context.Context, userID, programID int64) error
}

// DefaultPropagationTimeout bounds Remove's wait for the replicas.
const DefaultPropagationTimeout = 5 * time.Second

// Config wires the service.
type Config struct {
	Access             identity.Authorizer
	Store              Store
	Catalog            Catalog
	Team               catalog.TeamStore
	PropagationTimeout time.Duration // DefaultPropagationTimeout when zero
}

type service struct{ cfg Config }

// NewService checks the wiring.
func NewService(cfg Config) (Service, error) {
	if cfg.Access == nil || cfg.Store == nil || cfg.Catalog == nil || cfg.Team == nil {
		return nil, errors.New("members: authorizer, store, catalog and team store are required")
	}
	if cfg.PropagationTimeout <= 0 {
		cfg.PropagationTimeout = DefaultPropagationTimeout
	}
	return &service{cfg: cfg}, nil
}

func (s *service) authorize(ctx context.Context, userID, programID int64, need identity.Permission) error {
	err := s.cfg.Access.Authorize(ctx, userID, programID, need)
	if errors.Is(err, identity.ErrReadOnly) {
		return ErrReadOnly
	}
	return err
}

func (s *service) CanRead(ctx context.Context, userID, programID int64) error {
	return s.authorize(ctx, userID, programID, identity.PermissionRead)
}

func (s *service) CanChange(ctx context.Context, userID, programID int64) error {
	return s.authorize(ctx, userID, programID, identity.PermissionWrite)
}

func (s *service) List(ctx context.Context, userID, programID int64, p Page) (Listed, error) {
	if err := s.authorize(ctx, userID, programID, identity.PermissionRead); err != nil {
		return Listed{}, err
	}
	if p.Limit < 1 || p.Limit > MaxLimit {
		return Listed{}, ErrBadLimit
	}
	if p.After < 0 {
		return Listed{}, ErrBadCursor
	}
	ms, err := s.cfg.Store.List(ctx, programID, p.After, p.Limit+1)
	if err != nil {
		return Listed{}, fmt.Errorf("list members of program %d: %w", programID, err)
	}
	out := Listed{Members: ms}
	if len(ms) > p.Limit {
		out.Members = ms[:p.Limit]
		out.Next = out.Members[p.Limit-1].UserID
	}
	return out, nil
}

// Permissions checks a requested set and answers it in its stored form:
// tracking:write implies tracking:read (a member who may change a program
// may see it), so ["tracking:write"] is stored as both.
func Permissions(in []string) ([]string, error) {
	read, write := false, false
	for _, p := range in {
		switch identity.Permission(p) {
		case identity.PermissionRead:
			read = true
		case identity.PermissionWrite:
			write = true
		default:
			return nil, &catalog.FieldError{Field: "permissions", Message: MsgPermissions}
		}
	}
	switch {
	case write:
		return identity.CreatorPermissions(), nil
	case read:
		return []string{string(identity.PermissionRead)}, nil
	}
	return nil, &catalog.FieldError{Field: "permissions", Message: MsgPermissions}
}

// person finds the user with email, or creates them. Two invites of one
// new address at once: the second create conflicts, and finds the first's.
func (s *service) person(ctx context.Context, email string) (catalog.User, error) {
	u, err := s.cfg.Catalog.FindUserByEmail(ctx, &email)
	if !errors.Is(err, errkind.NotFound) {
		return u, err
	}
	u, _, err = s.cfg.Catalog.CreateUser(ctx, catalog.UserInput{Email: &email})
	if errors.Is(err, errkind.Conflict) {
		return s.cfg.Catalog.FindUserByEmail(ctx, &email)
	}
	return u, err
}

// write is the guarded catalog write, its refusals worded for the console.
func (s *service) write(ctx context.Context, actorID int64, m catalog.Membership) (catalog.Seq, error) {
	seq, err := s.cfg.Team.SetMember(ctx, actorID, m, string(identity.PermissionWrite))
	switch {
	case errors.Is(err, catalog.ErrLastWriter):
		return 0, ErrLastWriter
	case errors.Is(err, catalog.ErrActorNotWriter):
		// Checked again under the team's lock: the actor lost the
		// permission (or the membership) since the first check.
		return 0, s.authorize(ctx, actorID, m.ProgramID, identity.PermissionWrite)
	case errors.Is(err, catalog.ErrNotMember):
		return 0, ErrMemberNotFound
	case err != nil:
		return 0, fmt.Errorf("write membership %d/%d: %w", m.ProgramID, m.UserID, err)
	}
	return seq, nil
}

// lostAccess is the refusal for a write whose actor lost the permission
// between the two checks and whose second check found nothing wrong
// (restored again meanwhile): a plain read-only refusal.
func lostAccess(err error) error {
	if err == nil {
		return ErrReadOnly
	}
	return err
}

func (s *service) Add(ctx context.Context, userID, programID int64, email string, permissions []string) (Member, catalog.Seq, error) {
	if err := s.authorize(ctx, userID, programID, identity.PermissionWrite); err != nil {
		return Member{}, 0, err
	}
	perms, err := Permissions(permissions)
	if err != nil {
		return Member{}, 0, err
	}
	u, err := s.person(ctx, email)
	if err != nil {
		return Member{}, 0, err
	}
	seq, err := s.write(ctx, userID, catalog.Membership{ProgramID: programID, UserID: u.ID, Active: true, Permissions: perms})
	if err != nil || seq == 0 {
		return Member{}, 0, lostAccess(err)
	}
	return Member{UserID: u.ID, Email: u.Email, Name: u.Name, Permissions: perms, Active: true}, seq, nil
}

func (s *service) Remove(ctx context.Context, userID, programID, memberID int64) (Member, catalog.Seq, error) {
	if err := s.authorize(ctx, userID, programID, identity.PermissionWrite); err != nil {
		return Member{}, 0, err
	}
	m, err := s.cfg.Store.Get(ctx, programID, memberID)
	if errors.Is(err, errkind.NotFound) || (err == nil && !m.Active) {
		return Member{}, 0, ErrMemberNotFound
	}
	if err != nil {
		return Member{}, 0, fmt.Errorf("load member %d of program %d: %w", memberID, programID, err)
	}
	// Deactivated, not deleted: every replica applies the membership's
	// event with active false and refuses the person, and the list keeps
	// who was removed.
	seq, err := s.write(ctx, userID, catalog.Membership{ProgramID: programID, UserID: memberID, Active: false, Permissions: []string{}})
	if err != nil || seq == 0 {
		return Member{}, 0, lostAccess(err)
	}
	// A replica that lags is not the caller's failure: the removal is
	// stored and published; the answer only comes later.
	_ = s.cfg.Catalog.WaitForSync(ctx, seq, s.cfg.PropagationTimeout)
	m.Active, m.Permissions = false, []string{}
	return m, seq, nil
}
