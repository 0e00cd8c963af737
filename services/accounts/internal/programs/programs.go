// Package programs is the console's programs: a signed-in person creates a
// program in a workspace they own (the command-line init's fields and
// validation, through the catalog, plus allowed_origins) and becomes its
// first member with tracking:read and tracking:write; and lists the
// programs they are an active member of, a page at a time. No HTTP or SQL
// here.
package programs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// Refusals.
var (
	// ErrNoWorkspace answers a person who owns no workspace (an invited
	// member, on a server whose sign-up is invite-only) and names none.
	ErrNoWorkspace = &identity.Error{Kind: errkind.Forbidden,
		Message: "You have no workspace to create a program in. Ask the owner of a workspace to invite you to one of its programs.",
		Code:    "NO_WORKSPACE"}
	// ErrNotYourWorkspace answers an advertiser_id that is not the
	// person's own workspace: another's, one that does not exist, or no
	// id at all, alike (ids cannot be probed).
	ErrNotYourWorkspace = &identity.Error{Kind: errkind.Forbidden, Message: "advertiser_id is not a workspace you own"}
	// ErrSessionUser answers a session whose user is gone.
	ErrSessionUser = &identity.Error{Kind: errkind.Unauthenticated, Message: "Invalid session token. Sign in again."}
	ErrBadLimit    = &catalog.FieldError{Field: "limit", Message: "limit must be a whole number from 1 to " + strconv.Itoa(MaxLimit)}
	ErrBadCursor   = &catalog.FieldError{Field: "cursor", Message: "cursor must be the next_cursor of a previous page"}
)

// Page sizes of the list.
const (
	DefaultLimit = 50
	MaxLimit     = 100
)

// CreateInput is POST /api/v1/programs's body: the program as sent (raw
// JSON numbers, see catalog.ProgramInput) and the optional advertiser_id as
// raw JSON.
type CreateInput struct {
	Program      catalog.ProgramInput
	AdvertiserID *string
}

// Page asks for the programs after the one with id After (0: from the
// first), at most Limit of them.
type Page struct {
	After int64
	Limit int
}

// Member is a program the person is an active member of, with the
// membership's permissions.
type Member struct {
	Program     catalog.Program
	Permissions []string
}

// Listed is a page; Next is the After of the next page, 0 when this is the
// last.
type Listed struct {
	Programs []Member
	Next     int64
}

// Membership is a row of the person's active memberships.
type Membership struct {
	ProgramID   int64
	Permissions []string
}

// Store reads the person and their memberships; catalog writes go through
// the catalog service.
type Store interface {
	// UserByID answers a *catalog.NotFoundError when the user is gone.
	UserByID(ctx context.Context, id int64) (catalog.User, error)
	// ActiveMemberships lists at most limit of the user's active
	// memberships with a program id above after, by program id.
	ActiveMemberships(ctx context.Context, userID, after int64, limit int) ([]Membership, error)
}

// Service is the programs routes' use cases; userID comes from a verified
// dashboard session.
type Service interface {
	Create(ctx context.Context, userID int64, in CreateInput) (catalog.Program, catalog.Seq, error)
	List(ctx context.Context, userID int64, p Page) (Listed, error)
}

type service struct {
	store   Store
	owned   catalog.OwnedProgramStore
	catalog catalog.Service
}

// NewService checks the wiring. owned writes a program with its creator's
// membership (the catalog's store); cat reads programs as the catalog
// shows them.
func NewService(store Store, owned catalog.OwnedProgramStore, cat catalog.Service) (Service, error) {
	if store == nil || owned == nil || cat == nil {
		return nil, errors.New("programs: store, catalog store and catalog service are required")
	}
	return &service{store: store, owned: owned, catalog: cat}, nil
}

// person loads the session's user: gone is a 401, suspended the settings
// routes' 403.
func (s *service) person(ctx context.Context, userID int64) (catalog.User, error) {
	u, err := s.store.UserByID(ctx, userID)
	if errors.Is(err, errkind.NotFound) {
		return catalog.User{}, ErrSessionUser
	}
	if err != nil {
		return catalog.User{}, fmt.Errorf("load user %d: %w", userID, err)
	}
	if u.Blocked {
		return catalog.User{}, identity.ErrBlocked
	}
	return u, nil
}

// ownWorkspace reports whether a raw advertiser_id names the workspace
// owned (a whole JSON number, 12 or 12.0, or a string of its digits), as
// the command-line init reads it.
func ownWorkspace(raw string, own int64) bool {
	if own == 0 {
		return false
	}
	raw = strings.TrimSpace(raw)
	want := strconv.FormatInt(own, 10)
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		return raw[1:len(raw)-1] == want
	}
	r, ok := catalog.JSONNumber(raw)
	return ok && r.IsInt() && r.Num().String() == want
}

func (s *service) Create(ctx context.Context, userID int64, in CreateInput) (catalog.Program, catalog.Seq, error) {
	u, err := s.person(ctx, userID)
	if err != nil {
		return catalog.Program{}, 0, err
	}
	// The workspace first, as init checks the advertiser before the
	// fields: a person learns nothing about another's workspace from
	// validation.
	switch {
	case in.AdvertiserID != nil && !ownWorkspace(*in.AdvertiserID, u.AdvertiserID):
		return catalog.Program{}, 0, ErrNotYourWorkspace
	case u.AdvertiserID == 0:
		return catalog.Program{}, 0, ErrNoWorkspace
	}
	pin := in.Program
	adv := strconv.FormatInt(u.AdvertiserID, 10)
	pin.AdvertiserID = &adv
	// The admin API's and init's own validation: same order and messages.
	p, err := catalog.NewProgram(pin)
	if err != nil {
		return catalog.Program{}, 0, err
	}
	// The program and its creator's membership in one transaction, with
	// both catalog events.
	prog, seq, err := s.owned.CreateOwnedProgram(ctx, p, u.ID, identity.CreatorPermissions())
	if err != nil {
		return catalog.Program{}, 0, fmt.Errorf("create program with its creator: %w", err)
	}
	return prog, seq, nil
}

func (s *service) List(ctx context.Context, userID int64, p Page) (Listed, error) {
	if p.Limit < 1 || p.Limit > MaxLimit {
		return Listed{}, ErrBadLimit
	}
	if p.After < 0 {
		return Listed{}, ErrBadCursor
	}
	if _, err := s.person(ctx, userID); err != nil {
		return Listed{}, err
	}
	ms, err := s.store.ActiveMemberships(ctx, userID, p.After, p.Limit+1)
	if err != nil {
		return Listed{}, fmt.Errorf("list memberships of user %d: %w", userID, err)
	}
	out := Listed{Programs: make([]Member, 0, min(len(ms), p.Limit))}
	if len(ms) > p.Limit {
		ms = ms[:p.Limit]
		out.Next = ms[len(ms)-1].ProgramID
	}
	// Read through the catalog so a program looks exactly as init and the
	// admin API show it: the page's programs in one statement.
	ids := make([]int64, len(ms))
	for i, m := range ms {
		ids[i] = m.ProgramID
	}
	progs, err := s.catalog.GetPrograms(ctx, ids)
	if err != nil {
		return Listed{}, fmt.Errorf("load the programs of user %d: %w", userID, err)
	}
	byID := make(map[int64]catalog.Program, len(progs))
	for _, p := range progs {
		byID[p.ID] = p
	}
	for _, m := range ms {
		prog, ok := byID[m.ProgramID]
		if !ok { // a membership's program always exists (foreign key)
			return Listed{}, fmt.Errorf("program %d of user %d's membership: %w", m.ProgramID, userID, errkind.Internal)
		}
		out.Programs = append(out.Programs, Member{Program: prog, Permissions: m.Permissions})
	}
	return out, nil
}
