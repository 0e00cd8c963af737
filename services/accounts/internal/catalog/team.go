package catalog

import (
	"context"
	"fmt"

	"github.com/svc-dev/svc/libs/errkind"
)

// Refusals of TeamStore.SetMember, nothing written.
var (
	// ErrLastWriter: the change would leave the program with no active
	// member holding the writer permission.
	ErrLastWriter = fmt.Errorf("the program's last member holding the writer permission: %w", errkind.Conflict)
	// ErrActorNotWriter: the member making the change no longer holds the
	// writer permission (another change removed it meanwhile).
	ErrActorNotWriter = fmt.Errorf("the member making the change holds no writer permission: %w", errkind.Forbidden)
	// ErrNotMember: the membership to deactivate is not an active one.
	ErrNotMember = fmt.Errorf("not an active member: %w", errkind.NotFound)
)

// TeamStore changes a program's memberships from the console, where the
// program must keep a member who can change it.
type TeamStore interface {
	// SetMember upserts m with its catalog event (as UpsertMembership)
	// after locking every membership of m's program, so two changes of one
	// team are checked one after the other: ErrLastWriter when no active
	// member would hold writer afterwards, else ErrActorNotWriter when
	// actorID is not an active member holding writer, else ErrNotMember
	// when m deactivates a membership that is not active.
	SetMember(ctx context.Context, actorID int64, m Membership, writer string) (Seq, error)
}
