package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/services/accounts/internal/cliauth"
)

func (s *Store) SessionByConfirm(ctx context.Context, confirmHash []byte) (cliauth.Session, error) {
	sess, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM cli_login_sessions WHERE confirm_hash = $1`, confirmHash))
	if errors.Is(err, pgx.ErrNoRows) {
		return cliauth.Session{}, cliauth.ErrConfirmNotFound
	}
	if err != nil {
		return cliauth.Session{}, fmt.Errorf("load sign-in session by confirmation: %w", err)
	}
	return sess, nil
}

func (s *Store) ConfirmSession(ctx context.Context, id int64, at time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE cli_login_sessions SET confirmed_at = $2
		WHERE id = $1 AND user_id IS NOT NULL AND confirmed_at IS NULL AND consumed_at IS NULL`, id, at)
	if err != nil {
		return false, fmt.Errorf("confirm sign-in session %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}
