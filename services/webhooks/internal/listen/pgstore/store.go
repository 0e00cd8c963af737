// Package pgstore is `svc listen`'s Store over webhooks' schema: the
// replica's programs, memberships and revocations, the listeners, and the
// events table the writer fills. Each statement reads by a key or an index
// range (memberships' key, listeners_program, listener_events' key); times
// come from the caller's clock, never the database's.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/services/webhooks/internal/listen"
)

// Store reads and writes listeners.
type Store struct {
	pool *pgxpool.Pool
}

// New returns the store over pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Member reads a membership (memberships' primary key).
func (s *Store) Member(ctx context.Context, programID, userID int64) (listen.Member, bool, error) {
	active, perms, found, err := catalogsync.ConsoleMember(ctx, s.pool, programID, userID)
	return listen.Member{Active: active, Permissions: perms}, found, err
}

// ProgramExists reports whether the replica knows the program.
func (s *Store) ProgramExists(ctx context.Context, programID int64) (bool, error) {
	return catalogsync.ProgramKnown(ctx, s.pool, programID)
}

// Revoked is session.Revocations over the replica (CLI login tokens are
// signed out and suspended like dashboard sessions).
func (s *Store) Revoked(ctx context.Context, c session.Claims) (bool, error) {
	return catalogsync.SessionRevoked(ctx, s.pool, c.ID, c.UserID)
}

// Create deletes the program's expired listeners, counts its live ones and
// inserts the new one, under a transaction-scoped advisory lock on the
// program so creates at once cannot pass max; then seals the secret for
// the new id. The program's highest seq is read in the same transaction.
func (s *Store) Create(ctx context.Context, l listen.Listener, seal listen.Seal, max int) (listen.Listener, int64, error) {
	var after int64
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		// The lock's key space is the listeners'; the endpoint routes
		// lock the program under their own key (a different class).
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('webhooks.listeners'), hashtext($1::bigint::text))`, l.ProgramID); err != nil {
			return fmt.Errorf("lock listeners of program %d: %w", l.ProgramID, err)
		}
		var live int
		if err := tx.QueryRow(ctx, `WITH gone AS (
				DELETE FROM listeners WHERE program_id = $1 AND expires_at <= $2
			)
			SELECT count(*) FROM listeners WHERE program_id = $1 AND expires_at > $2`, l.ProgramID, l.CreatedAt).Scan(&live); err != nil {
			return fmt.Errorf("count listeners of program %d: %w", l.ProgramID, err)
		}
		if live >= max {
			return listen.ErrTooMany
		}
		if err := tx.QueryRow(ctx, `INSERT INTO listeners (program_id, secret_sealed, events, include_test, created_at, expires_at)
			VALUES ($1, '', $2, $3, $4, $5) RETURNING id`, l.ProgramID, l.Events, l.IncludeTest, l.CreatedAt, l.ExpiresAt).Scan(&l.ID); err != nil {
			return fmt.Errorf("insert listener of program %d: %w", l.ProgramID, err)
		}
		sealed, err := seal(l.ID)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE listeners SET secret_sealed = $2 WHERE id = $1`, l.ID, sealed); err != nil {
			return fmt.Errorf("seal listener %d: %w", l.ID, err)
		}
		// The highest seq: a backward scan of events_program_seq.
		return tx.QueryRow(ctx, `SELECT COALESCE(max(seq), 0) FROM events WHERE program_id = $1`, l.ProgramID).Scan(&after)
	})
	if err != nil {
		return listen.Listener{}, 0, err
	}
	return l, after, nil
}

// Touch moves a live listener's expiry (its primary key).
func (s *Store) Touch(ctx context.Context, programID, id int64, now, expires time.Time) (listen.Listener, bool, error) {
	var l listen.Listener
	err := s.pool.QueryRow(ctx, `UPDATE listeners SET expires_at = $4
		WHERE id = $1 AND program_id = $2 AND expires_at > $3
		RETURNING id, program_id, events, include_test, created_at, expires_at`, id, programID, now, expires).
		Scan(&l.ID, &l.ProgramID, &l.Events, &l.IncludeTest, &l.CreatedAt, &l.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return listen.Listener{}, false, nil
	}
	if err != nil {
		return listen.Listener{}, false, fmt.Errorf("touch listener %d: %w", id, err)
	}
	l.CreatedAt, l.ExpiresAt = l.CreatedAt.UTC(), l.ExpiresAt.UTC()
	return l, true, nil
}

// Take removes and answers up to limit events queued for the listener, in
// seq order (listener_events' key range). Taking rather than reading after
// a cursor: an event whose transaction committed after a later-numbered
// one was taken is still in the queue for the next poll.
func (s *Store) Take(ctx context.Context, listenerID int64, limit int) ([]listen.Event, error) {
	rows, err := s.pool.Query(ctx, `WITH taken AS (
			DELETE FROM listener_events WHERE listener_id = $1 AND seq IN (
				SELECT seq FROM listener_events WHERE listener_id = $1 ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED)
			RETURNING seq, event_id
		)
		SELECT t.seq, e.id, e.type, e.body FROM taken t JOIN events e ON e.id = t.event_id ORDER BY t.seq`, listenerID, limit)
	if err != nil {
		return nil, fmt.Errorf("events of listener %d: %w", listenerID, err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (listen.Event, error) {
		var e listen.Event
		var body []byte
		err := r.Scan(&e.Seq, &e.ID, &e.Type, &body)
		e.Body = body
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("events of listener %d: %w", listenerID, err)
	}
	return evs, nil
}

// Delete deletes the program's listener.
func (s *Store) Delete(ctx context.Context, programID, id int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM listeners WHERE id = $1 AND program_id = $2`, id, programID)
	if err != nil {
		return false, fmt.Errorf("delete listener %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}
