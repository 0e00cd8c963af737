// Package pgstore is the Postgres side of the command-line account routes
// (cliauth.Store); user reads by id are identity's (identity/pgstore). It
// only reads catalog tables; catalog writes go
// through the catalog service and its store, so their events are published.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/svc-dev/svc/libs/errkind"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/cliauth"
	idstore "github.com/svc-dev/svc/services/accounts/internal/identity/pgstore"
)

// sweepBatch bounds the rows one Sweep deletes, so a backlog never turns a
// sign-in start into a long transaction.
const sweepBatch = 500

// Store implements cliauth.Store.
type Store struct {
	pool *pgxpool.Pool
	*idstore.Store
}

func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool, Store: idstore.New(pool)} }

var _ cliauth.Store = (*Store)(nil)

const sessionColumns = `id, state_hash, nonce, user_code, created_at, expires_at, user_id, signed_in_at, confirm_hash, confirmed_at, consumed_at`

func scanSession(row pgx.Row) (cliauth.Session, error) {
	var s cliauth.Session
	var uid *int64
	err := row.Scan(&s.ID, &s.StateHash, &s.Nonce, &s.UserCode, &s.CreatedAt, &s.ExpiresAt, &uid, &s.SignedInAt, &s.ConfirmHash, &s.ConfirmedAt, &s.ConsumedAt)
	if uid != nil {
		s.UserID = *uid
	}
	return s, err
}

func (s *Store) CreateSession(ctx context.Context, sess cliauth.Session) (cliauth.Session, error) {
	out, err := scanSession(s.pool.QueryRow(ctx, `INSERT INTO cli_login_sessions (state_hash, nonce, user_code, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5) RETURNING `+sessionColumns, sess.StateHash, sess.Nonce, sess.UserCode, sess.CreatedAt, sess.ExpiresAt))
	if err != nil {
		return cliauth.Session{}, fmt.Errorf("insert sign-in session: %w", err)
	}
	return out, nil
}

func (s *Store) SessionByState(ctx context.Context, stateHash []byte) (cliauth.Session, error) {
	sess, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM cli_login_sessions WHERE state_hash = $1`, stateHash))
	if errors.Is(err, pgx.ErrNoRows) {
		return cliauth.Session{}, cliauth.ErrSessionNotFound
	}
	if err != nil {
		return cliauth.Session{}, fmt.Errorf("load sign-in session: %w", err)
	}
	return sess, nil
}

func (s *Store) LinkSession(ctx context.Context, id, userID int64, at time.Time, confirmHash []byte) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE cli_login_sessions SET user_id = $2, signed_in_at = $3, confirm_hash = $4
		WHERE id = $1 AND user_id IS NULL AND consumed_at IS NULL AND expires_at > $3`, id, userID, at, confirmHash)
	if err != nil {
		return false, fmt.Errorf("link sign-in session %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (s *Store) ConsumeSession(ctx context.Context, id int64, at time.Time, tok cliauth.LoginToken) (bool, error) {
	consumed := false
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE cli_login_sessions SET consumed_at = $2
			WHERE id = $1 AND user_id IS NOT NULL AND confirmed_at IS NOT NULL AND consumed_at IS NULL`, id, at)
		if err != nil {
			return fmt.Errorf("consume sign-in session %d: %w", id, err)
		}
		if tag.RowsAffected() != 1 {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO cli_login_tokens (token_hash, user_id, session_id, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5)`, tok.Hash, tok.UserID, tok.SessionID, tok.CreatedAt, tok.ExpiresAt); err != nil {
			return fmt.Errorf("insert login token: %w", err)
		}
		consumed = true
		return nil
	})
	return consumed, err
}

func (s *Store) UserByEmail(ctx context.Context, email string) (catalog.User, error) {
	// lower(email) is the unique index of users.
	u, err := idstore.ScanUser(s.pool.QueryRow(ctx, `SELECT `+idstore.UserColumns+` FROM users WHERE lower(email) = lower($1)`, email))
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.User{}, &catalog.NotFoundError{What: "user"}
	}
	if err != nil {
		return catalog.User{}, fmt.Errorf("load user by email: %w", err)
	}
	return u, nil
}

func (s *Store) UserByToken(ctx context.Context, tokenHash []byte, now time.Time) (catalog.User, error) {
	var userID *int64
	err := s.pool.QueryRow(ctx, `SELECT u.id FROM cli_login_tokens t LEFT JOIN users u ON u.id = t.user_id
		WHERE t.token_hash = $1 AND t.expires_at > $2`, tokenHash, now).Scan(&userID)
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.User{}, cliauth.ErrTokenInvalid
	}
	if err != nil {
		return catalog.User{}, fmt.Errorf("load login token: %w", err)
	}
	if userID == nil {
		return catalog.User{}, cliauth.ErrUserNotFound
	}
	u, err := s.UserByID(ctx, *userID)
	if errors.Is(err, errkind.NotFound) {
		return catalog.User{}, cliauth.ErrUserNotFound
	}
	return u, err
}

func (s *Store) ProgramIDsByAdvertiser(ctx context.Context, advertiserID int64) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM programs WHERE advertiser_id = $1 ORDER BY id`, advertiserID)
	if err != nil {
		return nil, fmt.Errorf("list programs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("scan program ids: %w", err)
	}
	return ids, nil
}

func (s *Store) Sweep(ctx context.Context, before time.Time) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM cli_login_sessions WHERE id IN (
		SELECT id FROM cli_login_sessions WHERE created_at < $1 ORDER BY created_at LIMIT $2)`, before, sweepBatch); err != nil {
		return fmt.Errorf("sweep sign-in sessions: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM cli_login_tokens WHERE id IN (
		SELECT id FROM cli_login_tokens WHERE expires_at < $1 ORDER BY expires_at LIMIT $2)`, before, sweepBatch); err != nil {
		return fmt.Errorf("sweep login tokens: %w", err)
	}
	return nil
}
