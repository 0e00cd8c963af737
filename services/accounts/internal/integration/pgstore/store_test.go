package pgstore_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/services/accounts/internal/integration"
	"github.com/svc-dev/svc/services/accounts/internal/integration/pgstore"
	"github.com/svc-dev/svc/services/accounts/migrations"
)

// open migrates a fresh database's accounts schema and returns a pool on it
// with one program (id returned).
func open(t *testing.T) (*pgxpool.Pool, int64) {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	if err := pg.Migrate(ctx, dsn, "accounts", migrations.FS, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	pool, err := pg.NewPool(ctx, dsn, pg.Options{Schema: "accounts", MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var prog int64
	err = pool.QueryRow(ctx, `WITH a AS (INSERT INTO advertisers (name, email) VALUES ('A', 'a@a.example') RETURNING id)
		INSERT INTO programs (advertiser_id, name, domain, commission_type, commission_rate)
		SELECT id, 'P', 'brand.example', 'percent', 10 FROM a RETURNING id`).Scan(&prog)
	if err != nil {
		t.Fatal(err)
	}
	return pool, prog
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestLookupKeyByHash(t *testing.T) {
	pool, prog := open(t)
	s := pgstore.New(pool)
	ctx := context.Background()
	plain, hash, prefix, err := apikey.Generate(false)
	if err != nil {
		t.Fatal(err)
	}
	marked := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	deadline := marked.Add(72 * time.Hour)
	exec(t, pool, `INSERT INTO api_keys (program_id, key_hash, prefix, test, rotation_marked_at, rotation_deadline) VALUES ($1, $2, $3, true, $4, $5)`,
		prog, hash, prefix, marked, deadline)
	k, err := s.LookupKeyByHash(ctx, apikey.Hash(plain))
	if err != nil {
		t.Fatal(err)
	}
	if k.ProgramID != prog || !k.Test || k.Revoked || k.RotationMarkedAt == nil || !k.RotationMarkedAt.Equal(marked) || !k.RotationDeadline.Equal(deadline) {
		t.Fatalf("key = %+v", k)
	}
	if _, err := s.LookupKeyByHash(ctx, apikey.Hash("svc_live_nope")); !errors.Is(err, apikey.ErrKeyNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
}

func record(t *testing.T, pool *pgxpool.Pool, e integration.RecordedEvent) {
	t.Helper()
	if err := pg.InTx(context.Background(), pool, func(tx pgx.Tx) error { return pgstore.RecordTestEvent(context.Background(), tx, e) }); err != nil {
		t.Fatal(err)
	}
}

func TestTestEventsCountUpToTheLimitAndLatestIsByEventTime(t *testing.T) {
	pool, prog := open(t)
	s := pgstore.New(pool)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for i := range 12 {
		record(t, pool, integration.RecordedEvent{Kind: integration.KindClick, EventID: int64(100 + i), ProgramID: prog,
			OccurredAt: base.Add(time.Duration(i) * time.Minute), PublishedAt: base.Add(time.Duration(i)*time.Minute + time.Second)})
	}
	// A redelivered event changes nothing; other programs and kinds are apart.
	record(t, pool, integration.RecordedEvent{Kind: integration.KindClick, EventID: 100, ProgramID: prog, OccurredAt: base.Add(time.Hour), PublishedAt: base.Add(time.Hour)})
	record(t, pool, integration.RecordedEvent{Kind: integration.KindClick, EventID: 500, ProgramID: prog + 1, OccurredAt: base.Add(2 * time.Hour), PublishedAt: base})
	record(t, pool, integration.RecordedEvent{Kind: integration.KindLead, EventID: 111, ProgramID: prog, OccurredAt: base.Add(3 * time.Hour), PublishedAt: base})

	for _, tc := range []struct {
		name      string
		kind      string
		limit     int
		wantCount int
		wantID    int64
	}{
		{"clicks capped at ten", integration.KindClick, 10, 10, 111},
		{"clicks under a larger cap", integration.KindClick, 50, 12, 111},
		{"leads", integration.KindLead, 10, 1, 111},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := s.TestEvents(ctx, prog, tc.kind, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if st.Count != tc.wantCount || st.Latest == nil || st.Latest.ID != tc.wantID {
				t.Fatalf("stats = %+v latest %+v", st, st.Latest)
			}
		})
	}
	st, _ := s.TestEvents(ctx, prog, integration.KindClick, 10)
	if !st.Latest.Timestamp.Equal(base.Add(11*time.Minute)) || !st.Latest.CreatedAt.Equal(base.Add(11*time.Minute+time.Second)) {
		t.Fatalf("latest times %v / %v", st.Latest.Timestamp, st.Latest.CreatedAt)
	}
	none, err := s.TestEvents(ctx, prog+7, integration.KindClick, 10)
	if err != nil || none.Count != 0 || none.Latest != nil {
		t.Fatalf("no events: %+v %v", none, err)
	}
}

func TestHasApprovedPartnersLeavesOutTheFixturePartner(t *testing.T) {
	pool, prog := open(t)
	s := pgstore.New(pool)
	ctx := context.Background()
	fixture := integration.FixturePartnerEmail(prog)
	enrol := func(email string, approved bool) {
		exec(t, pool, `WITH p AS (INSERT INTO partners (name, email) VALUES ('x', $2) RETURNING id)
			INSERT INTO partner_programs (partner_id, program_id, approved) SELECT id, $1, $3 FROM p`, prog, email, approved)
	}
	steps := []struct {
		name string
		do   func()
		want bool
	}{
		{"no partner", func() {}, false},
		{"fixture partner approved", func() { enrol(fixture, true) }, false},
		{"real partner not approved", func() { enrol("real@p.example", false) }, false},
		{"real partner approved", func() { enrol("other@p.example", true) }, true},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.do()
			got, err := s.HasApprovedPartners(ctx, prog, fixture)
			if err != nil || got != st.want {
				t.Fatalf("got %t, %v; want %t", got, err, st.want)
			}
		})
	}
}

func TestFixtureLookups(t *testing.T) {
	pool, prog := open(t)
	s := pgstore.New(pool)
	ctx := context.Background()
	if _, ok, err := s.FindLink(ctx, prog, "svc-test-1"); ok || err != nil {
		t.Fatalf("missing link: %t %v", ok, err)
	}
	if _, ok, err := s.FindPartnerByEmail(ctx, "test-partner+1@svc.invalid"); ok || err != nil {
		t.Fatalf("missing partner: %t %v", ok, err)
	}
	var p1, p2 int64
	_ = pool.QueryRow(ctx, `INSERT INTO partners (name, email) VALUES ('t', 'Test-Partner+1@svc.invalid') RETURNING id`).Scan(&p1)
	_ = pool.QueryRow(ctx, `INSERT INTO partners (name, email) VALUES ('t', 'test-partner+1@svc.invalid') RETURNING id`).Scan(&p2)
	if id, ok, err := s.FindPartnerByEmail(ctx, "test-partner+1@svc.invalid"); !ok || err != nil || id != p1 {
		t.Fatalf("partner = %d %t %v, want the oldest %d", id, ok, err, p1)
	}
	if ok, err := s.PartnerEnrolled(ctx, prog, p1); ok || err != nil {
		t.Fatalf("enrolled before: %t %v", ok, err)
	}
	exec(t, pool, `INSERT INTO partner_programs (partner_id, program_id) VALUES ($1, $2)`, p1, prog)
	if ok, err := s.PartnerEnrolled(ctx, prog, p1); !ok || err != nil {
		t.Fatalf("enrolled after: %t %v", ok, err)
	}
	exec(t, pool, `INSERT INTO links (program_id, partner_id, code, active) VALUES ($1, $2, 'svc-test-1', false)`, prog, p1)
	l, ok, err := s.FindLink(ctx, prog, "svc-test-1")
	if !ok || err != nil || l.PartnerID != p1 || l.Active {
		t.Fatalf("link = %+v %t %v", l, ok, err)
	}
	exec(t, pool, `UPDATE catalog_seq SET seq = 41`)
	if seq, err := s.CatalogSeq(ctx); seq != 41 || err != nil {
		t.Fatalf("seq = %d %v", seq, err)
	}
}

func TestReserveChainRunWindowAndRetryAfter(t *testing.T) {
	pool, prog := open(t)
	s := pgstore.New(pool)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	reserve := func(at time.Time) (time.Duration, bool) {
		t.Helper()
		d, ok, err := s.ReserveChainRun(ctx, prog, at, time.Hour, 3, "req")
		if err != nil {
			t.Fatal(err)
		}
		return d, ok
	}
	for _, tc := range []struct {
		name      string
		at        time.Duration
		wantOK    bool
		wantRetry time.Duration
	}{
		{"first", 0, true, 0},
		{"second", 10 * time.Minute, true, 0},
		{"third", 20 * time.Minute, true, 0},
		{"fourth refused until the first leaves the hour", 30 * time.Minute, false, 30 * time.Minute},
		{"a refused run is not counted", 59 * time.Minute, false, time.Minute},
		{"exactly an hour after the first", time.Hour, true, 0},
		{"full again: the second leaves next", time.Hour + time.Second, false, 10*time.Minute - time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := reserve(t0.Add(tc.at))
			if ok != tc.wantOK || d != tc.wantRetry {
				t.Fatalf("reserve at +%v = %v, %t; want %v, %t", tc.at, d, ok, tc.wantRetry, tc.wantOK)
			}
		})
	}
	var n int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM integration_chain_runs WHERE program_id = $1`, prog).Scan(&n)
	if n != 4 {
		t.Fatalf("runs recorded = %d, want 4", n)
	}
	// A day after the window, old runs are swept on the next reservation.
	if _, ok := reserve(t0.Add(30 * time.Hour)); !ok {
		t.Fatal("refused a day later")
	}
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM integration_chain_runs WHERE program_id = $1`, prog).Scan(&n)
	if n != 1 {
		t.Fatalf("runs after sweep = %d, want 1", n)
	}
}

func TestReserveChainRunConcurrentCallersNeverExceedTheCap(t *testing.T) {
	pool, prog := open(t)
	s := pgstore.New(pool)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 20 {
		wg.Go(func() {
			_, ok, err := s.ReserveChainRun(context.Background(), prog, now, time.Hour, 10, "")
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if allowed != 10 {
		t.Fatalf("allowed %d concurrent chains, want 10", allowed)
	}
}
