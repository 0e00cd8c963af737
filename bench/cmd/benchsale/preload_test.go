package main

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/svc-dev/svc/bench/internal/rig"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/libs/platform"
	commissions "github.com/svc-dev/svc/services/commissions/server"
	tracking "github.com/svc-dev/svc/services/tracking/server"
)

// The preload writes, on the services' own migrated schemas, the sales
// asked for with one customer, click and attribution each, a commission
// each, a refund of every 20th sale, and balance entries whose running
// balance ends at the partners' balance rows; twice in a row it stays
// consistent (the second adds to the balances).
func TestPreload(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	for _, spec := range []platform.Spec{tracking.Spec(), commissions.Spec()} {
		if code := platform.Run(ctx, spec, []string{"migrate"}, func(k string) string {
			if k == "DATABASE_URL" {
				return dsn
			}
			return ""
		}, io.Discard); code != 0 {
			t.Fatalf("migrate %s: exit %d", spec.Name, code)
		}
	}
	db, err := rig.OpenPool(ctx, dsn, 2, "preload-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	const program = 7
	if _, err := db.Exec(ctx, `INSERT INTO tracking.links (id, program_id, partner_id, code, active, catalog_seq)
		VALUES (1, $1, 11, 'a', true, 1), (2, $1, 12, 'b', true, 1), (3, 99, 13, 'other', true, 1)`, program); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	for round := 1; round <= 2; round++ {
		if round == 2 {
			// The second round's sales are new ones: tell them apart.
			if _, err := db.Exec(ctx, `UPDATE tracking.customers SET click_id = 'old_' || click_id;
				UPDATE tracking.attributions SET transaction_id = 'old_' || transaction_id;
				UPDATE commissions.sales SET transaction_id = 'old_' || transaction_id`); err != nil {
				t.Fatal(err)
			}
		}
		p, err := preload(ctx, db, program, 1000, 30, logger)
		if err != nil {
			t.Fatal(err)
		}
		if p.Sales != 1000 || p.Refunds != 50 || p.Entries == 0 {
			t.Fatalf("round %d: %+v", round, p)
		}
	}
	var got struct {
		customers, clicks, attributions, sales, commissions, pending, reversed, partnersWrong int64
		balances, lastAfter, sumEntries                                                       int64
	}
	err = db.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM tracking.customers WHERE program_id = $1),
		(SELECT count(*) FROM tracking.affiliate_click_events WHERE program_id = $1),
		(SELECT count(*) FROM tracking.attributions WHERE program_id = $1),
		(SELECT count(*) FROM commissions.sales WHERE program_id = $1),
		(SELECT count(*) FROM commissions.commissions WHERE program_id = $1),
		(SELECT count(*) FROM commissions.commissions WHERE status = 'pending'),
		(SELECT count(*) FROM commissions.commissions WHERE status = 'reversed' AND refunded_amount = amount),
		(SELECT count(*) FROM commissions.sales s JOIN tracking.customers c ON c.id = s.customer_id WHERE s.partner_id <> c.first_partner_id OR s.partner_id NOT IN (11, 12)),
		(SELECT sum(balance) FROM commissions.balances),
		(SELECT sum(a) FROM (SELECT DISTINCT ON (partner_id) balance_after a FROM commissions.balance_entries ORDER BY partner_id, id DESC) l),
		(SELECT sum(delta) FROM commissions.balance_entries)`, program).Scan(
		&got.customers, &got.clicks, &got.attributions, &got.sales, &got.commissions, &got.pending, &got.reversed, &got.partnersWrong,
		&got.balances, &got.lastAfter, &got.sumEntries)
	if err != nil {
		t.Fatal(err)
	}
	if got.customers != 2000 || got.clicks != 2000 || got.attributions != 2000 || got.sales != 2000 || got.commissions != 2000 || got.partnersWrong != 0 {
		t.Fatalf("rows: %+v", got)
	}
	// Sales span 395 days ending 5 days ago: the last 25 days' are held.
	if got.pending == 0 || got.pending > 2000*30/395 || got.reversed != 20 {
		t.Fatalf("pending %d, reversed %d", got.pending, got.reversed)
	}
	if got.balances <= 0 || got.balances != got.sumEntries || got.lastAfter != got.balances {
		t.Fatalf("balances %d, entries add up to %d, last balance_after %d", got.balances, got.sumEntries, got.lastAfter)
	}
	// The program totals (written by the preload, the triggers being off
	// in its session) are what the credited commissions add up to.
	var wrongTotals, totals int64
	err = db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE c.earned IS DISTINCT FROM m.earned), count(m.earned) FROM
		(SELECT program_id, partner_id, currency, sum(amount - refunded_amount) AS earned FROM commissions.commissions
			WHERE credited GROUP BY 1, 2, 3) c
		FULL JOIN commissions.program_money m USING (program_id, partner_id, currency)`).Scan(&wrongTotals, &totals)
	if err != nil || wrongTotals != 0 || totals == 0 {
		t.Fatalf("program totals: %d of %d wrong (%v)", wrongTotals, totals, err)
	}
}
