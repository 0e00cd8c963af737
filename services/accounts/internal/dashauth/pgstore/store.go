// Package pgstore is the Postgres side of the dashboard sign-in
// (dashauth.Store): its sign-in sessions, and reads of the catalog tables
// (users through identity's store, memberships and programs). Every query
// is parameterised.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/dashauth"
	idstore "github.com/svc-dev/svc/services/accounts/internal/identity/pgstore"
)

// sweepBatch bounds the rows one Sweep deletes.
const sweepBatch = 500

// Store implements dashauth.Store.
type Store struct {
	pool  *pgxpool.Pool
	users *idstore.Store
}

// New makes the store.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool, users: idstore.New(pool)} }

var _ dashauth.Store = (*Store)(nil)

func (s *Store) CreateSession(ctx context.Context, sess dashauth.Session) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO dashboard_signin_sessions (state_hash, nonce, return_to, tab_nonce, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, sess.StateHash, sess.Nonce, sess.ReturnTo, sess.TabNonce, sess.CreatedAt, sess.ExpiresAt)
	if err != nil {
		return fmt.Errorf("insert dashboard sign-in: %w", err)
	}
	return nil
}

func (s *Store) SessionByState(ctx context.Context, stateHash []byte) (dashauth.Session, error) {
	var sess dashauth.Session
	err := s.pool.QueryRow(ctx, `SELECT id, state_hash, nonce, return_to, tab_nonce, created_at, expires_at, consumed_at
		FROM dashboard_signin_sessions WHERE state_hash = $1`, stateHash).
		Scan(&sess.ID, &sess.StateHash, &sess.Nonce, &sess.ReturnTo, &sess.TabNonce, &sess.CreatedAt, &sess.ExpiresAt, &sess.ConsumedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return dashauth.Session{}, dashauth.ErrSessionNotFound
	}
	if err != nil {
		return dashauth.Session{}, fmt.Errorf("select dashboard sign-in: %w", err)
	}
	return sess, nil
}

func (s *Store) ConsumeSession(ctx context.Context, id int64, at time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE dashboard_signin_sessions SET consumed_at = $2
		WHERE id = $1 AND consumed_at IS NULL AND expires_at > $2`, id, at)
	if err != nil {
		return false, fmt.Errorf("consume dashboard sign-in: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

func (s *Store) Sweep(ctx context.Context, before time.Time) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM dashboard_signin_sessions WHERE id IN (
		SELECT id FROM dashboard_signin_sessions WHERE created_at < $1 ORDER BY created_at LIMIT $2)`, before, sweepBatch)
	if err != nil {
		return fmt.Errorf("sweep dashboard sign-ins: %w", err)
	}
	return nil
}

func (s *Store) UserByID(ctx context.Context, id int64) (catalog.User, error) {
	return s.users.UserByID(ctx, id)
}

func (s *Store) Memberships(ctx context.Context, userID int64) ([]dashauth.Membership, error) {
	rows, err := s.pool.Query(ctx, `SELECT p.id, p.advertiser_id, p.name, p.domain, m.permissions
		FROM memberships m JOIN programs p ON p.id = m.program_id
		WHERE m.user_id = $1 AND m.active ORDER BY p.id`, userID)
	if err != nil {
		return nil, fmt.Errorf("select memberships: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dashauth.Membership, error) {
		var m dashauth.Membership
		err := r.Scan(&m.ProgramID, &m.AdvertiserID, &m.Name, &m.Domain, &m.Permissions)
		if m.Permissions == nil {
			m.Permissions = []string{}
		}
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("scan memberships: %w", err)
	}
	return out, nil
}

func (s *Store) Workspaces(ctx context.Context, userID int64) ([]dashauth.Workspace, error) {
	// The workspace ids first (the person's own, those of the programs they
	// are a member of), then each by its key: a join on "owned OR member"
	// read every advertiser.
	rows, err := s.pool.Query(ctx, `SELECT a.id, a.name, bool_or(w.owner)
		FROM (SELECT u.advertiser_id AS id, true AS owner FROM users u WHERE u.id = $1 AND u.advertiser_id IS NOT NULL
			UNION ALL
			SELECT p.advertiser_id, false FROM memberships m JOIN programs p ON p.id = m.program_id
			WHERE m.user_id = $1 AND m.active) w
		JOIN advertisers a ON a.id = w.id
		GROUP BY a.id, a.name ORDER BY a.id`, userID)
	if err != nil {
		return nil, fmt.Errorf("select workspaces: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (dashauth.Workspace, error) {
		var w dashauth.Workspace
		err := r.Scan(&w.ID, &w.Name, &w.Owner)
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("scan workspaces: %w", err)
	}
	return out, nil
}
