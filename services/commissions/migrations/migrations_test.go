package migrations_test

import (
	"context"
	"fmt"
	"io/fs"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/services/commissions/migrations"
)

// upTo is the migrations numbered at most last.
func upTo(t *testing.T, last string) fs.FS { return pgtest.MigrationsUpTo(t, migrations.FS, last) }

// A database from before the running totals (00010) gets them from the
// rows it holds: credited commissions net of refunds (not the uncredited
// ones), and the program's paid and open payouts (not the cancelled ones,
// nor the admin API's program-less withdrawals).
func TestProgramMoneyFromExistingRows(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDatabase(t)
	if err := pg.Migrate(ctx, dsn, "commissions", upTo(t, "00009"), nil); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SET search_path = commissions;
		INSERT INTO commissions (program_id, partner_id, customer_id, kind, status, amount, currency, refunded_amount, credited, hold_until, created_at, updated_at) VALUES
			(1, 7, 1, 'lead', 'approved', 1000, 'USD', 0, true, now(), now(), now()),
			(1, 7, 2, 'lead', 'approved', 500, 'USD', 200, true, now(), now(), now()),
			(1, 7, 3, 'lead', 'pending', 900, 'USD', 0, false, now(), now(), now()),
			(1, 7, 4, 'lead', 'approved', 300, 'EUR', 0, true, now(), now(), now()),
			(2, 7, 5, 'lead', 'approved', 800, 'USD', 0, true, now(), now(), now());
		INSERT INTO withdrawals (partner_id, program_id, currency, amount, requested_amount, status, created_at, updated_at) VALUES
			(7, 1, 'USD', 400, 400, 'paid', now(), now()),
			(7, 1, 'USD', 100, 100, 'open', now(), now()),
			(7, 1, 'USD', 50, 50, 'cancelled', now(), now()),
			(7, NULL, 'USD', 70, 70, 'paid', now(), now())`); err != nil {
		t.Fatal(err)
	}
	if err := pg.Migrate(ctx, dsn, "commissions", migrations.FS, nil); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT program_id, partner_id, currency, earned, paid, open FROM commissions.program_money ORDER BY 1, 2, 3`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var prog, partner, earned, paid, open int64
		var cur string
		if err := rows.Scan(&prog, &partner, &cur, &earned, &paid, &open); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d/%d/%s %d %d %d", prog, partner, cur, earned, paid, open))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := "[1/7/EUR 300 0 0 1/7/USD 1300 400 100 2/7/USD 800 0 0]"
	if fmt.Sprint(got) != want {
		t.Fatalf("program_money %v, want %s", got, want)
	}
	// The triggers keep it from here, on a session whose search_path is
	// not the schema's (the functions carry their own).
	if _, err := conn.Exec(ctx, `SET search_path = public;
		UPDATE commissions.withdrawals SET status = 'paid' WHERE status = 'open' AND program_id = 1`); err != nil {
		t.Fatal(err)
	}
	var paid, open int64
	if err := conn.QueryRow(ctx, `SELECT paid, open FROM commissions.program_money WHERE program_id = 1 AND currency = 'USD'`).Scan(&paid, &open); err != nil {
		t.Fatal(err)
	}
	if paid != 500 || open != 0 {
		t.Fatalf("after paying on another search_path: paid %d, open %d", paid, open)
	}
}
