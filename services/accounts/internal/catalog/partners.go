package catalog

import (
	"context"
	"strings"
)

// MsgLinkCodeTaken is the conflict a duplicate link code answers, on the
// admin routes and the console's alike.
const MsgLinkCodeTaken = "a link with this code already exists in this program"

// ErrLinkCodeTaken is a link whose code the program already uses; nothing
// is written.
var ErrLinkCodeTaken = &ConflictError{Message: MsgLinkCodeTaken}

// MsgLinkCodeInUse is the conflict of a code another program's link has.
const MsgLinkCodeInUse = "a link with this code already exists in another program"

// ErrLinkCodeInUse is a link whose code another program's link has: a
// code is one program's, since a click sent without program_id is
// resolved by its code alone. Nothing is written.
var ErrLinkCodeInUse = &ConflictError{Message: MsgLinkCodeInUse}

// NewPartner is in validated as the admin route validates a partner
// (messages included), without the write.
func NewPartner(in PartnerInput) (Partner, error) { return in.validate() }

// FixtureLinkCodePrefix starts the code of each program's test link
// (the command-line synthetic chain's, "svc-test-<program id>"). A code is
// one program's, so a brand's console may not use the prefix: it could
// otherwise take another program's test link code before its chain runs.
const FixtureLinkCodePrefix = "svc-test-"

const msgLinkCodeReserved = "code must not start with " + FixtureLinkCodePrefix + " (reserved for the test link)"

// ValidateLinkCode checks a link code from the console with the admin
// route's rule and messages (LinkInput's), for a link whose partner is
// not made yet, and refuses the test link's prefix.
func ValidateLinkCode(code *string) error {
	if code == nil || *code == "" {
		return invalid("code", "code is required")
	}
	if !linkCodeRe.MatchString(*code) {
		return invalid("code", msgLinkCode)
	}
	if strings.HasPrefix(*code, FixtureLinkCodePrefix) {
		return invalid("code", msgLinkCodeReserved)
	}
	return nil
}

// PartnerConsoleStore is the console's partner changes, each one
// transaction with its catalog events, so that no change is ever half made
// and every service replicates it. A partner who is not in the program is a
// *NotFoundError (What "partner"), nothing written.
type PartnerConsoleStore interface {
	// InvitePartner enrolls a partner in l's program, approved, with the
	// first link l: p is inserted when its ID is 0 (partners are global:
	// one found by email is reused as it is). ErrLinkCodeTaken or a
	// *ConflictError (already in the program) write nothing.
	InvitePartner(ctx context.Context, p Partner, l Link) (Partner, PartnerProgram, Link, Seq, error)
	// SetPartnerApproval sets the partner's approval in the program; a
	// rejection also turns off the partner's active links of the program
	// (returned), since tracking counts a link's clicks whatever the
	// approval.
	SetPartnerApproval(ctx context.Context, programID, partnerID int64, approved bool) (PartnerProgram, []Link, Seq, error)
	// CreatePartnerLink adds l for a partner approved in l's program:
	// ErrPartnerNotApproved when not, ErrLinkCodeTaken for a code in use.
	CreatePartnerLink(ctx context.Context, l Link) (Link, Seq, error)
	// SetProgramLinkActive turns the program's link on or off: a link of
	// another program is a *NotFoundError (What "link"); turning on a link
	// of a partner no longer approved is ErrPartnerNotApproved.
	SetProgramLinkActive(ctx context.Context, programID, linkID int64, active bool) (Link, Seq, error)
}

// ErrPartnerNotApproved refuses a link for a partner the program rejected.
var ErrPartnerNotApproved = &ConflictError{Message: "this partner is not approved in this program; approve the partner first"}
