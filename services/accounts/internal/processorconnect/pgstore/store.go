// Package pgstore is the Postgres side of the processor connection's
// states (processorconnect.Store). The connection itself is the program's,
// written through the catalog.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/services/accounts/internal/processorconnect"
)

// Store implements processorconnect.Store.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// New makes the store.
func New(pool *pgxpool.Pool, now func() time.Time) *Store { return &Store{pool: pool, now: now} }

var _ processorconnect.Store = (*Store)(nil)

// sweepAfter is how long a used or expired state is kept (to tell a replay
// from an invention in the logs of a day) before an issue sweeps it.
const sweepAfter = 24 * time.Hour

// SaveState keeps a state's hash, and sweeps states expired for a day so
// the table stays the size of the connections in progress.
func (s *Store) SaveState(ctx context.Context, hash []byte, st processorconnect.State, expires time.Time) error {
	now := s.now().UTC()
	if _, err := s.pool.Exec(ctx, `DELETE FROM processor_connect_states WHERE expires_at < $1`, now.Add(-sweepAfter)); err != nil {
		return fmt.Errorf("sweep states: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO processor_connect_states (state_hash, program_id, user_id, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5)`, hash, st.ProgramID, st.UserID, now, expires.UTC()); err != nil {
		return fmt.Errorf("save state of program %d: %w", st.ProgramID, err)
	}
	return nil
}

// TakeState uses the state up in one statement: of two callbacks with the
// same state, one alone gets it.
func (s *Store) TakeState(ctx context.Context, hash []byte, now time.Time) (processorconnect.State, bool, error) {
	var st processorconnect.State
	err := s.pool.QueryRow(ctx, `UPDATE processor_connect_states SET used_at = $2
		WHERE state_hash = $1 AND used_at IS NULL AND expires_at > $2
		RETURNING program_id, user_id`, hash, now.UTC()).Scan(&st.ProgramID, &st.UserID)
	if errors.Is(err, pgx.ErrNoRows) {
		return processorconnect.State{}, false, nil
	}
	if err != nil {
		return processorconnect.State{}, false, fmt.Errorf("take state: %w", err)
	}
	return st, true, nil
}
