package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/libs/pg"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

// A backfill republishes catalog state that some replica may never have
// been given. A replica that starts keeping a kind of event its consumer
// group had already passed (analytics' users replica came after the
// blocked flag was first published) holds only what changed since: a
// person suspended before then kept their sessions there. The topic is
// kept forever, so a new consumer group replays everything; an existing
// one needs the state sent again. Each backfill runs once per database.
type backfill struct {
	name string
	run  func(ctx context.Context, s *Store, tx pgx.Tx) (int, error)
}

// backfills are run in this order at every start; a name is never reused.
func backfills() []backfill {
	return []backfill{
		// Replicas refuse a suspended person's sessions (analytics since
		// the session revocations). Only blocked users: a replica treats
		// a user it has never heard of as not blocked.
		{name: "2026-11-blocked-users", run: func(ctx context.Context, s *Store, tx pgx.Tx) (int, error) {
			return s.republishUsers(ctx, tx, `SELECT id, email, name, advertiser_id, blocked, created_at FROM users WHERE blocked ORDER BY id`)
		}},
		// Commissions' console replica (memberships, users' blocks,
		// sign-outs, partner records) came after its catalog group had
		// passed those events: without them its console routes would
		// refuse every member. Unexpired sign-outs only: an expired one
		// opens nothing anyway.
		{name: "2026-11-commissions-console-replica", run: func(ctx context.Context, s *Store, tx pgx.Tx) (int, error) {
			n, err := s.republishUsers(ctx, tx, `SELECT id, email, name, advertiser_id, blocked, created_at FROM users WHERE blocked ORDER BY id`)
			if err != nil {
				return 0, err
			}
			m, err := s.republishConsoleState(ctx, tx)
			return n + m, err
		}},
	}
}

// Backfill runs every backfill this database has not run yet, each in one
// transaction with its marker row: pods starting together run each once
// (the second waits on the first's marker, then finds it) and a failed
// one runs again at the next start. It answers the events published.
func (s *Store) Backfill(ctx context.Context) (int, error) {
	total := 0
	for _, b := range backfills() {
		err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `INSERT INTO catalog_backfills (name, events) VALUES ($1, 0) ON CONFLICT (name) DO NOTHING`, b.name)
			if err != nil {
				return fmt.Errorf("mark backfill %s: %w", b.name, err)
			}
			if tag.RowsAffected() == 0 {
				return nil
			}
			n, err := b.run(ctx, s, tx)
			if err != nil {
				return fmt.Errorf("backfill %s: %w", b.name, err)
			}
			if _, err := tx.Exec(ctx, `UPDATE catalog_backfills SET events = $2 WHERE name = $1`, b.name, n); err != nil {
				return fmt.Errorf("mark backfill %s: %w", b.name, err)
			}
			total += n
			return nil
		})
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// republishUsers publishes catalog.user.upserted for each user query reads,
// as it stands now: a replica applies it like any later change.
func (s *Store) republishUsers(ctx context.Context, tx pgx.Tx, query string) (int, error) {
	rows, err := tx.Query(ctx, query)
	if err != nil {
		return 0, fmt.Errorf("read users: %w", err)
	}
	var users []catalog.User
	var u catalog.User
	var adv *int64
	_, err = pgx.ForEachRow(rows, []any{&u.ID, &u.Email, &u.Name, &adv, &u.Blocked, &u.CreatedAt}, func() error {
		u.AdvertiserID = 0
		if adv != nil {
			u.AdvertiserID = *adv
		}
		users = append(users, u)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read users: %w", err)
	}
	for _, u := range users {
		if _, err := s.publish(ctx, tx, eventsv1.TypeUserUpserted, 0, userEvent(u)); err != nil {
			return 0, err
		}
	}
	return len(users), nil
}

// republishConsoleState publishes every membership, partner record and
// unexpired session revocation as it stands now, each as the event its
// change publishes.
func (s *Store) republishConsoleState(ctx context.Context, tx pgx.Tx) (int, error) {
	type event struct {
		typ     string
		program int64
		msg     proto.Message
	}
	var events []event
	rows, err := tx.Query(ctx, `SELECT program_id, user_id, active, permissions FROM memberships ORDER BY program_id, user_id`)
	if err != nil {
		return 0, fmt.Errorf("read memberships: %w", err)
	}
	var m catalog.Membership
	if _, err := pgx.ForEachRow(rows, []any{&m.ProgramID, &m.UserID, &m.Active, &m.Permissions}, func() error {
		events = append(events, event{eventsv1.TypeMembershipUpserted, m.ProgramID, &eventsv1.Membership{
			ProgramId: m.ProgramID, UserId: m.UserID, Active: m.Active, Permissions: m.Permissions}})
		return nil
	}); err != nil {
		return 0, fmt.Errorf("read memberships: %w", err)
	}
	rows, err = tx.Query(ctx, `SELECT id, partner_id, program_id, approved, created_at FROM partner_programs ORDER BY id`)
	if err != nil {
		return 0, fmt.Errorf("read partner records: %w", err)
	}
	var pp catalog.PartnerProgram
	if _, err := pgx.ForEachRow(rows, []any{&pp.ID, &pp.PartnerID, &pp.ProgramID, &pp.Approved, &pp.CreatedAt}, func() error {
		events = append(events, event{eventsv1.TypePartnerProgramUpserted, pp.ProgramID, partnerProgramEvent(pp)})
		return nil
	}); err != nil {
		return 0, fmt.Errorf("read partner records: %w", err)
	}
	rows, err = tx.Query(ctx, `SELECT session_id, user_id, expires_at, revoked_at FROM session_revocations WHERE expires_at > $1 ORDER BY session_id`, s.now())
	if err != nil {
		return 0, fmt.Errorf("read revocations: %w", err)
	}
	var r catalog.SessionRevocation
	if _, err := pgx.ForEachRow(rows, []any{&r.SessionID, &r.UserID, &r.ExpiresAt, &r.RevokedAt}, func() error {
		events = append(events, event{eventsv1.TypeSessionRevoked, 0, &eventsv1.SessionRevoked{
			SessionId: r.SessionID, UserId: r.UserID, ExpiresAt: ts(r.ExpiresAt), RevokedAt: ts(r.RevokedAt)}})
		return nil
	}); err != nil {
		return 0, fmt.Errorf("read revocations: %w", err)
	}
	for _, e := range events {
		if _, err := s.publish(ctx, tx, e.typ, e.program, e.msg); err != nil {
			return 0, err
		}
	}
	return len(events), nil
}
