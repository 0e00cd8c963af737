// Package pgstore is readiness.Store over pgx: the program's payment setup
// from the catalog replica, its real events from the aggregates and its
// test events from status's list.
package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/catalogsync"
	"github.com/svc-dev/svc/services/analytics/internal/readiness"
)

// Store is readiness.Store, and the key lookup of the readiness route.
type Store struct {
	pool *pgxpool.Pool
}

var (
	_ readiness.Store = (*Store)(nil)
	_ apikey.Store    = (*Store)(nil)
)

// New builds the store on pool (search_path: the analytics schema).
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Facts counts the program's events (real ones from the buckets, test ones
// from the kept list) and its latest event; the last is the start of the
// latest bucket for real events (the buckets' grain, 15 minutes).
func (s *Store) Facts(ctx context.Context, programID int64) (readiness.Facts, error) {
	var f readiness.Facts
	var last *time.Time
	err := s.pool.QueryRow(ctx, `
		SELECT
			COALESCE((SELECT sum(clicks) FROM activity_buckets WHERE program_id = $1), 0)
				+ (SELECT count(*) FROM test_events WHERE program_id = $1 AND kind = 'click'),
			COALESCE((SELECT sum(leads) FROM activity_buckets WHERE program_id = $1), 0)
				+ (SELECT count(*) FROM test_events WHERE program_id = $1 AND kind = 'lead'),
			COALESCE((SELECT sum(sales) FROM activity_buckets WHERE program_id = $1), 0),
			GREATEST((SELECT max(bucket) FROM activity_buckets WHERE program_id = $1),
				(SELECT max(occurred_at) FROM test_events WHERE program_id = $1)),
			COALESCE((SELECT payment_tracking_mode FROM programs WHERE id = $1), ''),
			COALESCE((SELECT processor_status FROM programs WHERE id = $1), '')`, programID).
		Scan(&f.Clicks, &f.Leads, &f.Sales, &last, &f.PaymentTrackingMode, &f.ProcessorStatus)
	if err != nil {
		return readiness.Facts{}, fmt.Errorf("readiness facts of program %d: %w", programID, err)
	}
	if last != nil {
		f.LastEvent = *last
	}
	return f, nil
}

// LookupKeyByHash finds a program API key of the replica.
func (s *Store) LookupKeyByHash(ctx context.Context, hash []byte) (apikey.Key, error) {
	return catalogsync.LookupAPIKey(ctx, s.pool, hash)
}
