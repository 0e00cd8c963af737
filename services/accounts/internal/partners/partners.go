// Package partners is the brand console's partner and link changes: a
// member who holds tracking:write invites a partner (the partner, its
// approved record in the program and a first link, in one transaction),
// approves or rejects a partner of the program, adds a link for a partner
// and turns a link of the program on or off. Partners, their records and
// links are catalog data: every change goes through the catalog, which
// publishes it for tracking, commissions and analytics to replicate. No
// HTTP or SQL here.
package partners

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/identity"
)

// Refusals of these routes; the membership refusals are identity's.
var (
	// ErrPartnerNotFound answers a partner id that is not enrolled in the
	// program (another program's partner, none at all).
	ErrPartnerNotFound = &identity.Error{Kind: errkind.NotFound, Message: "Partner not found in this program"}
	// ErrLinkNotFound answers a link id that is not one of the program's
	// links: another program's link is never changed, nor confirmed.
	ErrLinkNotFound = &identity.Error{Kind: errkind.NotFound, Message: "Link not found in this program"}
	// ErrReadOnly answers a change by a member without tracking:write.
	ErrReadOnly = &identity.Error{Kind: errkind.Forbidden, Message: "You do not have permission to change this program's partners"}
)

// Generated link codes: CodeLength characters of CodeAlphabet (lower case
// letters and digits without 0, 1, i, l and o, which read alike), a shape
// the admin API's code rule accepts.
const (
	CodeAlphabet = "23456789abcdefghjkmnpqrstuvwxyz"
	CodeLength   = 8
	// codeAttempts bounds the retries of a generated code the program
	// already uses (one in 31^8 per existing link).
	codeAttempts = 3
)

// Invited is an invitation's three records.
type Invited struct {
	Partner        catalog.Partner
	PartnerProgram catalog.PartnerProgram
	Link           catalog.Link
}

// Approval is an approval or rejection: the record, and the partner's
// links a rejection turned off.
type Approval struct {
	PartnerProgram catalog.PartnerProgram
	LinksTurnedOff []catalog.Link
}

// Catalog is what the routes need of the catalog.
type Catalog interface {
	FindPartnersByEmail(ctx context.Context, email *string) ([]catalog.Partner, error)
}

// Service is the partner routes' use cases. userID comes from a verified
// dashboard session. Every change needs tracking:write on the program.
type Service interface {
	// Invite enrolls the partner with email (an existing partner with that
	// email is reused, its stored name kept: partners are global) approved
	// in the program with a first link of code, or of a generated code
	// when code is nil.
	Invite(ctx context.Context, userID, programID int64, in catalog.PartnerInput, code *string) (Invited, catalog.Seq, error)
	// SetApproval approves or rejects an enrolled partner; a rejection
	// also turns off the partner's links of the program.
	SetApproval(ctx context.Context, userID, programID, partnerID int64, approved bool) (Approval, catalog.Seq, error)
	// CreateLink adds a link for an approved partner of the program.
	CreateLink(ctx context.Context, userID, programID, partnerID int64, code *string) (catalog.Link, catalog.Seq, error)
	// SetLinkActive turns the program's link on or off.
	SetLinkActive(ctx context.Context, userID, programID, linkID int64, active bool) (catalog.Link, catalog.Seq, error)
	// List answers a page of the program's partners with their figures,
	// to a member who may read it (list.go).
	List(ctx context.Context, userID, programID int64, p Page) (Listed, error)
	// CanRead answers nil when userID may read programID's partners.
	CanRead(ctx context.Context, userID, programID int64) error
	// CanChange answers nil when userID may change programID's partners:
	// the check a malformed change is refused after, so a non-member
	// learns nothing from validation.
	CanChange(ctx context.Context, userID, programID int64) error
}

// Config wires the service. Random is crypto/rand.Read unless set (tests).
type Config struct {
	Access  identity.Authorizer
	Catalog Catalog
	Store   catalog.PartnerConsoleStore
	Random  func([]byte) (int, error)
	// Lister reads the list; Figures, when set, adds analytics' figures.
	Lister  Lister
	Figures FiguresSource
}

type service struct{ cfg Config }

// NewService checks the wiring.
func NewService(cfg Config) (Service, error) {
	if cfg.Access == nil || cfg.Catalog == nil || cfg.Store == nil {
		return nil, errors.New("partners: authorizer, catalog and store are required")
	}
	if cfg.Random == nil {
		cfg.Random = rand.Read
	}
	return &service{cfg: cfg}, nil
}

func (s *service) CanRead(ctx context.Context, userID, programID int64) error {
	return s.cfg.Access.Authorize(ctx, userID, programID, identity.PermissionRead)
}

func (s *service) CanChange(ctx context.Context, userID, programID int64) error {
	err := s.cfg.Access.Authorize(ctx, userID, programID, identity.PermissionWrite)
	if errors.Is(err, identity.ErrReadOnly) {
		return ErrReadOnly
	}
	return err
}

// refusal turns the store's not-found answers into this feature's.
func refusal(err error) error {
	var nf *catalog.NotFoundError
	if errors.As(err, &nf) {
		switch nf.What {
		case "partner":
			return ErrPartnerNotFound
		case "link":
			return ErrLinkNotFound
		}
		return identity.ErrNoAccess // the program vanished after the check
	}
	return err
}

// public reports whether err is a refusal the client sees as it is.
func public(err error) bool {
	return errors.Is(err, errkind.Invalid) || errors.Is(err, errkind.Conflict) || errors.Is(err, errkind.NotFound) || errors.Is(err, errkind.Forbidden)
}

func wrap(what string, err error) error {
	err = refusal(err)
	if public(err) {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// GenerateCode is a new link code of the documented shape.
func (s *service) GenerateCode() (string, error) {
	const max = 256 - 256%len(CodeAlphabet) // rejection keeps every character equally likely
	out := make([]byte, 0, CodeLength)
	buf := make([]byte, 16)
	for len(out) < CodeLength {
		if _, err := s.cfg.Random(buf); err != nil {
			return "", fmt.Errorf("generate link code: %w", err)
		}
		for _, b := range buf {
			if int(b) < max && len(out) < CodeLength {
				out = append(out, CodeAlphabet[int(b)%len(CodeAlphabet)])
			}
		}
	}
	return string(out), nil
}

// withCode runs write with code, or with generated codes until one is
// free (a given code the program uses is the caller's conflict).
func (s *service) withCode(programID, partnerID int64, code *string, write func(catalog.Link) error) error {
	for attempt := 1; ; attempt++ {
		c := code
		if c == nil {
			g, err := s.GenerateCode()
			if err != nil {
				return err
			}
			c = &g
		}
		if err := catalog.ValidateLinkCode(c); err != nil {
			return err
		}
		err := write(catalog.Link{ProgramID: programID, PartnerID: partnerID, Code: *c, Active: true})
		taken := errors.Is(err, catalog.ErrLinkCodeTaken) || errors.Is(err, catalog.ErrLinkCodeInUse)
		if code != nil || !taken || attempt == codeAttempts {
			return err
		}
	}
}

func (s *service) Invite(ctx context.Context, userID, programID int64, in catalog.PartnerInput, code *string) (Invited, catalog.Seq, error) {
	if err := s.CanChange(ctx, userID, programID); err != nil {
		return Invited{}, 0, err
	}
	p, err := catalog.NewPartner(in)
	if err != nil {
		return Invited{}, 0, err
	}
	found, err := s.cfg.Catalog.FindPartnersByEmail(ctx, &p.Email)
	if err != nil {
		return Invited{}, 0, fmt.Errorf("find partner by email: %w", err)
	}
	if len(found) > 0 {
		p = found[0] // the oldest partner with the email (the list is by id)
	}
	var (
		out Invited
		seq catalog.Seq
	)
	err = s.withCode(programID, p.ID, code, func(l catalog.Link) error {
		var err error
		out.Partner, out.PartnerProgram, out.Link, seq, err = s.cfg.Store.InvitePartner(ctx, p, l)
		return err
	})
	if err != nil {
		return Invited{}, 0, wrap(fmt.Sprintf("invite partner to program %d", programID), err)
	}
	return out, seq, nil
}

func (s *service) SetApproval(ctx context.Context, userID, programID, partnerID int64, approved bool) (Approval, catalog.Seq, error) {
	if err := s.CanChange(ctx, userID, programID); err != nil {
		return Approval{}, 0, err
	}
	pp, off, seq, err := s.cfg.Store.SetPartnerApproval(ctx, programID, partnerID, approved)
	if err != nil {
		return Approval{}, 0, wrap(fmt.Sprintf("set partner %d approval in program %d", partnerID, programID), err)
	}
	return Approval{PartnerProgram: pp, LinksTurnedOff: off}, seq, nil
}

func (s *service) CreateLink(ctx context.Context, userID, programID, partnerID int64, code *string) (catalog.Link, catalog.Seq, error) {
	if err := s.CanChange(ctx, userID, programID); err != nil {
		return catalog.Link{}, 0, err
	}
	if partnerID <= 0 {
		return catalog.Link{}, 0, ErrPartnerNotFound
	}
	var (
		out catalog.Link
		seq catalog.Seq
	)
	err := s.withCode(programID, partnerID, code, func(l catalog.Link) error {
		var err error
		out, seq, err = s.cfg.Store.CreatePartnerLink(ctx, l)
		return err
	})
	if err != nil {
		return catalog.Link{}, 0, wrap(fmt.Sprintf("create link for partner %d in program %d", partnerID, programID), err)
	}
	return out, seq, nil
}

func (s *service) SetLinkActive(ctx context.Context, userID, programID, linkID int64, active bool) (catalog.Link, catalog.Seq, error) {
	if err := s.CanChange(ctx, userID, programID); err != nil {
		return catalog.Link{}, 0, err
	}
	l, seq, err := s.cfg.Store.SetProgramLinkActive(ctx, programID, linkID, active)
	if err != nil {
		return catalog.Link{}, 0, wrap(fmt.Sprintf("set link %d active in program %d", linkID, programID), err)
	}
	return l, seq, nil
}
