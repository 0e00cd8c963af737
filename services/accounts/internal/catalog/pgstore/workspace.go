package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

var _ catalog.WorkspaceStore = (*Store)(nil)

func (s *Store) insertAdvertiser(ctx context.Context, tx pgx.Tx, a *catalog.Advertiser) (catalog.Seq, error) {
	if err := tx.QueryRow(ctx, `INSERT INTO advertisers (name, email) VALUES ($1, $2) RETURNING id, created_at`,
		a.Name, a.Email).Scan(&a.ID, &a.CreatedAt); err != nil {
		return 0, fmt.Errorf("insert advertiser: %w", err)
	}
	return s.publish(ctx, tx, eventsv1.TypeAdvertiserUpserted, 0, &eventsv1.Advertiser{
		Id: a.ID, Name: a.Name, Email: a.Email, CreatedAt: ts(a.CreatedAt),
	})
}

// CreateUserWithWorkspace inserts the advertiser, then the user owning it,
// each with its event, in one transaction.
func (s *Store) CreateUserWithWorkspace(ctx context.Context, u catalog.User, a catalog.Advertiser) (catalog.User, catalog.Seq, error) {
	var seq catalog.Seq
	err := s.write(ctx, func(tx pgx.Tx) error {
		if _, err := s.insertAdvertiser(ctx, tx, &a); err != nil {
			return err
		}
		u.AdvertiserID = a.ID
		if err := tx.QueryRow(ctx, `INSERT INTO users (email, name, advertiser_id, blocked) VALUES ($1, $2, $3, $4) RETURNING id, created_at`,
			u.Email, u.Name, u.AdvertiserID, u.Blocked).Scan(&u.ID, &u.CreatedAt); err != nil {
			return fmt.Errorf("insert user: %w", err)
		}
		var err error
		seq, err = s.publish(ctx, tx, eventsv1.TypeUserUpserted, 0, userEvent(u))
		return err
	})
	if err != nil {
		return catalog.User{}, 0, err
	}
	return u, seq, nil
}

// AddWorkspace locks the user, and when it has no advertiser inserts one
// and sets it, with both events, in one transaction: two sign-ins at once
// make one workspace.
func (s *Store) AddWorkspace(ctx context.Context, userID int64, a catalog.Advertiser) (catalog.User, catalog.Seq, error) {
	var (
		seq catalog.Seq
		u   catalog.User
	)
	err := s.write(ctx, func(tx pgx.Tx) error {
		var adv *int64
		err := tx.QueryRow(ctx, `SELECT id, email, name, advertiser_id, blocked, created_at FROM users WHERE id = $1 FOR UPDATE`, userID).
			Scan(&u.ID, &u.Email, &u.Name, &adv, &u.Blocked, &u.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound("user", userID)
		}
		if err != nil {
			return fmt.Errorf("load user %d: %w", userID, err)
		}
		if adv != nil {
			u.AdvertiserID = *adv
			return nil
		}
		if _, err := s.insertAdvertiser(ctx, tx, &a); err != nil {
			return err
		}
		u.AdvertiserID = a.ID
		if _, err := tx.Exec(ctx, `UPDATE users SET advertiser_id = $2 WHERE id = $1`, userID, a.ID); err != nil {
			return fmt.Errorf("set workspace of user %d: %w", userID, err)
		}
		seq, err = s.publish(ctx, tx, eventsv1.TypeUserUpserted, 0, userEvent(u))
		return err
	})
	if err != nil {
		return catalog.User{}, 0, err
	}
	return u, seq, nil
}
