package pgstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

var _ catalog.TeamStore = (*Store)(nil)

// SetMember locks the program's memberships (FOR UPDATE, by user id so
// two teams' changes cannot deadlock) and checks the team as it is once
// the lock is held: of two writers removing each other at once, the
// second reads the first's removal and is refused.
func (s *Store) SetMember(ctx context.Context, actorID int64, m catalog.Membership, writer string) (catalog.Seq, error) {
	var seq catalog.Seq
	err := s.write(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT user_id, active, permissions FROM memberships
			WHERE program_id = $1 ORDER BY user_id FOR UPDATE`, m.ProgramID)
		if err != nil {
			return fmt.Errorf("lock memberships of program %d: %w", m.ProgramID, err)
		}
		team, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (catalog.Membership, error) {
			var t catalog.Membership
			err := r.Scan(&t.UserID, &t.Active, &t.Permissions)
			return t, err
		})
		if err != nil {
			return fmt.Errorf("read memberships of program %d: %w", m.ProgramID, err)
		}
		actor, target, writers := false, false, 0
		for _, t := range team {
			w := t.Active && slices.Contains(t.Permissions, writer)
			if t.UserID == actorID {
				actor = w
			}
			if t.UserID == m.UserID {
				target = t.Active
				continue
			}
			if w {
				writers++
			}
		}
		// The team's rule first: of two writers removing each other, the
		// second learns why nothing changed, not only that it lost access.
		switch {
		case writers == 0 && !(m.Active && slices.Contains(m.Permissions, writer)):
			return catalog.ErrLastWriter
		case !actor:
			return catalog.ErrActorNotWriter
		case !m.Active && !target:
			return catalog.ErrNotMember
		}
		seq, err = s.upsertMembership(ctx, tx, m)
		return err
	})
	return seq, err
}
