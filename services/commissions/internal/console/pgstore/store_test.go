package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"

	"github.com/svc-dev/svc/services/commissions/internal/console"
	"github.com/svc-dev/svc/services/commissions/migrations"
)

// A whole export is read in keyset pages: every row comes once, newest
// first, across page ends that fall inside a run of equal created_at, and
// the filter holds on every page (another partner's and another
// program's rows never come).
func TestExportReadsEveryRowOnceAcrossPages(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	logger := slog.New(slog.DiscardHandler)
	if err := pg.Migrate(ctx, dsn, "commissions", migrations.FS, logger); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, dsn, "commissions", logger); err != nil {
		t.Fatal(err)
	}
	pool, err := pg.NewPool(ctx, dsn, pg.Options{Schema: "commissions", MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	if _, err := pool.Exec(ctx, `CREATE SEQUENCE customers`); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	// 11 rows of partner 7 in program 1: three share each created_at, so
	// pages of 2 end inside a tie; one row of partner 8 and one of
	// program 2 sit among them.
	insert := func(program, partner int64, at time.Time) int64 {
		var id int64
		if err := pool.QueryRow(ctx, `INSERT INTO commissions (program_id, partner_id, customer_id, kind, status, amount, currency, hold_until, created_at, updated_at)
			VALUES ($1, $2, nextval('customers'), 'lead', 'pending', 100, 'USD', $3, $3, $3) RETURNING id`, program, partner, at).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	var want []int64
	for i := 0; i < 11; i++ {
		at := t0.Add(time.Duration(i/3) * time.Hour)
		want = append([]int64{insert(1, 7, at)}, want...)
		if i == 4 {
			insert(1, 8, at)
			insert(2, 7, at)
		}
	}
	// Newest first: within one created_at the higher id first, which is
	// the reverse of insertion order throughout.
	s := &Store{pool: pool, page: 2}
	for _, page := range []int{2, 3, 11, 1000} {
		s.page = page
		var got []int64
		err := s.Commissions(ctx, 1, console.Filter{PartnerID: 7}, nil, 0, func(c console.Commission) error {
			got = append(got, c.ID)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("pages of %d: %v, want %v", page, got, want)
		}
	}
	// A limited read is one page, whatever the export's page size.
	s.page = 2
	var got []int64
	if err := s.Commissions(ctx, 1, console.Filter{PartnerID: 7}, nil, 5, func(c console.Commission) error {
		got = append(got, c.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want[:5]) {
		t.Fatalf("limit 5: %v, want %v", got, want[:5])
	}
}
