package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

var _ catalog.OwnedProgramStore = (*Store)(nil)

// CreateOwnedProgram inserts the program and upserts its creator's
// membership, each with its event, in one transaction.
func (s *Store) CreateOwnedProgram(ctx context.Context, p catalog.Program, userID int64, permissions []string) (catalog.Program, catalog.Seq, error) {
	var seq catalog.Seq
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		if p, _, err = s.insertProgram(ctx, tx, p); err != nil {
			return err
		}
		seq, err = s.upsertMembership(ctx, tx, catalog.Membership{ProgramID: p.ID, UserID: userID, Active: true, Permissions: permissions})
		return err
	})
	if err != nil {
		return catalog.Program{}, 0, err
	}
	return p, seq, nil
}
