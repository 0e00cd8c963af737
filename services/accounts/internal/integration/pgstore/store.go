// Package pgstore is the Postgres side of the command-line integration
// routes: program API key lookup over accounts' api_keys, the test events
// kept from tracking's topic, the synthetic-chain runs, and the reads of
// accounts' own catalog tables the test fixtures need. It never writes the
// catalog: those writes go through the catalog service so their events flow.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	"github.com/svc-dev/svc/services/accounts/internal/integration"
)

// chainHistory is how long chain runs are kept after they leave the cap's
// window: a day of history to look at, and a table that stays small.
const chainHistory = 24 * time.Hour

// Store implements integration.Store and apikey.Store.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a store over the accounts schema.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

var (
	_ integration.Store = (*Store)(nil)
	_ apikey.Store      = (*Store)(nil)
)

// LookupKeyByHash finds a program API key by the SHA-256 of its value.
// A key revoked from the console is found with Revoked set (refused).
func (s *Store) LookupKeyByHash(ctx context.Context, hash []byte) (apikey.Key, error) {
	var k apikey.Key
	err := s.pool.QueryRow(ctx, `SELECT id, program_id, test, rotation_marked_at, rotation_deadline, revoked_at IS NOT NULL
		FROM api_keys WHERE key_hash = $1`, hash).
		Scan(&k.ID, &k.ProgramID, &k.Test, &k.RotationMarkedAt, &k.RotationDeadline, &k.Revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return apikey.Key{}, apikey.ErrKeyNotFound
	}
	if err != nil {
		return apikey.Key{}, fmt.Errorf("look up api key: %w", err)
	}
	return k, nil
}

// RecordTestEvent keeps one test event inside the consumer's inbox
// transaction; a redelivered event changes nothing.
func RecordTestEvent(ctx context.Context, tx pgx.Tx, e integration.RecordedEvent) error {
	_, err := tx.Exec(ctx, `INSERT INTO integration_test_events (kind, event_id, program_id, occurred_at, published_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (kind, event_id) DO NOTHING`,
		e.Kind, e.EventID, e.ProgramID, e.OccurredAt, e.PublishedAt)
	if err != nil {
		return fmt.Errorf("record test %s %d of program %d: %w", e.Kind, e.EventID, e.ProgramID, err)
	}
	return nil
}

func (s *Store) TestEvents(ctx context.Context, programID int64, kind string, limit int) (integration.EventStats, error) {
	var st integration.EventStats
	// Counting stops at limit: the answer never needs more, and a program
	// that sends test events all day must not make the route slower.
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM (
			SELECT 1 FROM integration_test_events WHERE program_id = $1 AND kind = $2 LIMIT $3) t`,
		programID, kind, limit).Scan(&st.Count); err != nil {
		return st, fmt.Errorf("count test %ss: %w", kind, err)
	}
	if st.Count == 0 {
		return st, nil
	}
	var ev integration.TestEvent
	err := s.pool.QueryRow(ctx, `SELECT event_id, occurred_at, published_at FROM integration_test_events
		WHERE program_id = $1 AND kind = $2 ORDER BY occurred_at DESC, event_id DESC LIMIT 1`, programID, kind).
		Scan(&ev.ID, &ev.Timestamp, &ev.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return integration.EventStats{}, nil
	}
	if err != nil {
		return st, fmt.Errorf("latest test %s: %w", kind, err)
	}
	st.Latest = &ev
	return st, nil
}

func (s *Store) HasApprovedPartners(ctx context.Context, programID int64, exceptEmail string) (bool, error) {
	var has bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (
			SELECT 1 FROM partner_programs pp JOIN partners p ON p.id = pp.partner_id
			WHERE pp.program_id = $1 AND pp.approved AND lower(p.email) <> lower($2))`, programID, exceptEmail).Scan(&has)
	if err != nil {
		return false, fmt.Errorf("approved partners of program %d: %w", programID, err)
	}
	return has, nil
}

func (s *Store) FindLink(ctx context.Context, programID int64, code string) (integration.FixtureLink, bool, error) {
	var l integration.FixtureLink
	err := s.pool.QueryRow(ctx, `SELECT id, partner_id, active FROM links WHERE program_id = $1 AND code = $2`, programID, code).
		Scan(&l.ID, &l.PartnerID, &l.Active)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, false, nil
	}
	if err != nil {
		return l, false, fmt.Errorf("find link %q of program %d: %w", code, programID, err)
	}
	return l, true, nil
}

func (s *Store) FindPartnerByEmail(ctx context.Context, email string) (int64, bool, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT id FROM partners WHERE lower(email) = lower($1) ORDER BY id LIMIT 1`, email).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("find partner by email: %w", err)
	}
	return id, true, nil
}

func (s *Store) PartnerEnrolled(ctx context.Context, programID, partnerID int64) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM partner_programs WHERE program_id = $1 AND partner_id = $2)`,
		programID, partnerID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("partner %d in program %d: %w", partnerID, programID, err)
	}
	return ok, nil
}

func (s *Store) CatalogSeq(ctx context.Context) (catalog.Seq, error) {
	var seq int64
	if err := s.pool.QueryRow(ctx, `SELECT seq FROM catalog_seq`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("read catalog sequence: %w", err)
	}
	return catalog.Seq(seq), nil
}

// ReserveChainRun checks the cap and records the run in one transaction,
// serialised per program on its quota row.
func (s *Store) ReserveChainRun(ctx context.Context, programID int64, now time.Time, window time.Duration, limit int, requestID string) (time.Duration, bool, error) {
	if limit < 1 {
		return 0, false, fmt.Errorf("chain limit %d: must be at least 1", limit)
	}
	var retry time.Duration
	var ok bool
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO integration_chain_quota (program_id) VALUES ($1) ON CONFLICT DO NOTHING`, programID); err != nil {
			return fmt.Errorf("create chain quota row: %w", err)
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM integration_chain_quota WHERE program_id = $1 FOR UPDATE`, programID); err != nil {
			return fmt.Errorf("lock chain quota row: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM integration_chain_runs WHERE program_id = $1 AND started_at <= $2`,
			programID, now.Add(-window-chainHistory)); err != nil {
			return fmt.Errorf("sweep old chain runs: %w", err)
		}
		// The limit-th newest run in the window is the one whose expiry
		// frees a slot; when there is none, a slot is free now.
		var oldest time.Time
		err := tx.QueryRow(ctx, `SELECT started_at FROM integration_chain_runs
			WHERE program_id = $1 AND started_at > $2
			ORDER BY started_at DESC OFFSET $3 LIMIT 1`, programID, now.Add(-window), limit-1).Scan(&oldest)
		switch {
		case err == nil:
			retry = oldest.Add(window).Sub(now)
			return nil
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("count chain runs: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO integration_chain_runs (program_id, started_at, request_id) VALUES ($1, $2, $3)`,
			programID, now, requestID); err != nil {
			return fmt.Errorf("record chain run: %w", err)
		}
		ok = true
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("reserve chain run for program %d: %w", programID, err)
	}
	return retry, ok, nil
}
