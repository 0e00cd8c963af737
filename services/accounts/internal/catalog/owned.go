package catalog

import "context"

// OwnedProgramStore creates a program with its first member in one
// transaction, with both catalog events (program, then membership): a
// program made from the console is never left without the person who
// made it.
type OwnedProgramStore interface {
	// CreateOwnedProgram stores p (from NewProgram) and makes userID an
	// active member of it with permissions. A *NotFoundError, nothing
	// written, when p's advertiser or the user does not exist.
	CreateOwnedProgram(ctx context.Context, p Program, userID int64, permissions []string) (Program, Seq, error)
}
