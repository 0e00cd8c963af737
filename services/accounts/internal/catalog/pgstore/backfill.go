package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

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
