package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	keystore "github.com/svc-dev/svc/services/accounts/internal/apikeys/pgstore"
)

// A key's last use is the latest report seen: an earlier or repeated
// report (another service's, a redelivery) never moves it back, and a
// report of a key that does not exist changes nothing.
func TestKeyLastUseKeepsTheLatestReport(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	ids := s.seedCatalog()
	ctx := context.Background()
	record := func(key int64, at time.Time) {
		t.Helper()
		if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return keystore.RecordUse(ctx, tx, key, at) }); err != nil {
			t.Fatal(err)
		}
	}
	lastUse := func() time.Time {
		t.Helper()
		var at *time.Time
		if err := s.pool.QueryRow(ctx, `SELECT last_used_at FROM api_keys WHERE id = $1`, ids.key).Scan(&at); err != nil || at == nil {
			t.Fatalf("last use %v %v", at, err)
		}
		return at.UTC()
	}
	t1 := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	record(ids.key, t1)
	for _, at := range []time.Time{t1.Add(-time.Minute), t1} {
		record(ids.key, at)
		if got := lastUse(); !got.Equal(t1) {
			t.Fatalf("after a report of %v: %v, want %v", at, got, t1)
		}
	}
	record(ids.key, t1.Add(time.Minute))
	if got := lastUse(); !got.Equal(t1.Add(time.Minute)) {
		t.Fatalf("a later report: %v", got)
	}
	record(ids.key+1000, t1)
	if n := s.countWhere("api_keys", "last_used_at IS NOT NULL"); n != 1 {
		t.Fatalf("%d keys have a last use", n)
	}
}
