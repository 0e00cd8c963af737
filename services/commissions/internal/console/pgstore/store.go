// Package pgstore is the console's Store over commissions' schema: the
// replica's memberships and partner-program records, the ledger's
// commissions, balances and withdrawals. Every statement is served by an
// index whose leading columns its predicate fixes (migration 00009; the
// plan test in deploy/devstack/plans).
package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/catalogsync"

	"github.com/svc-dev/svc/services/commissions/internal/console"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
	"github.com/svc-dev/svc/services/commissions/internal/money"
)

// Store reads the console's rows.
type Store struct {
	pool *pgxpool.Pool
	// page is how many rows one statement of a whole export reads: an
	// export without a limit is read in keyset pages so every statement
	// stays a bounded index range (one unlimited statement lets the
	// planner hash-join all of sales once a program grows).
	page int
}

// New returns the store over pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool, page: 1000} }

// Member reads a membership (memberships' primary key).
func (s *Store) Member(ctx context.Context, programID, userID int64) (console.Member, bool, error) {
	active, perms, found, err := catalogsync.ConsoleMember(ctx, s.pool, programID, userID)
	return console.Member{Active: active, Permissions: perms}, found, err
}

// PartnerInProgram reports whether the partner has a record in the program,
// approved or not (partner_programs_program_partner).
func (s *Store) PartnerInProgram(ctx context.Context, programID, partnerID int64) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM partner_programs WHERE program_id = $1 AND partner_id = $2)`,
		programID, partnerID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("partner %d in program %d: %w", partnerID, programID, err)
	}
	return ok, nil
}

// CommissionsQuery is the list's statement for a filter, a cursor and a
// page of limit rows, with its arguments. Only the filter's predicates
// are written (an optional predicate written as `$n IS NULL OR …` would keep
// the planner from the indexes). Every page is an index range read
// backwards from the cursor and stopped by LIMIT (migration 00011):
//   - a partner: commissions_program_partner_created (a status, if any,
//     filters the partner's rows);
//   - a status: commissions_program_status_created;
//   - neither: commissions_program_listed, a partial index whose
//     predicate (kind IN ('sale', 'lead'): every row, by the table's CHECK)
//     only this statement states. A status page cannot use it, so the
//     planner cannot pick it for one: it did, guessing from approved being
//     most rows that a page came soon, while the newest commissions are
//     all pending (in their hold period) and a page of approved ones
//     scanned them all first.
//
// The sale of each row is read by its key (OFFSET 0 keeps the planner from
// turning that into a join, which it may make a hash join over all of
// sales for a partner with many commissions). Exported for the plan test.
func CommissionsQuery(programID int64, f console.Filter, after *console.Cursor, limit int) (string, []any) {
	args := []any{programID}
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	where := []string{"c.program_id = $1"}
	if f.PartnerID != 0 {
		where = append(where, "c.partner_id = "+arg(f.PartnerID))
	}
	if f.Status != "" {
		where = append(where, "c.status = "+arg(f.Status))
	}
	if f.PartnerID == 0 && f.Status == "" {
		where = append(where, "c.kind IN ('sale', 'lead')")
	}
	if !f.From.IsZero() {
		where = append(where, "c.created_at >= "+arg(f.From))
	}
	if !f.To.IsZero() {
		where = append(where, "c.created_at < "+arg(f.To))
	}
	if after != nil {
		where = append(where, fmt.Sprintf("(c.created_at, c.id) < (%s, %s)", arg(after.CreatedAt), arg(after.ID)))
	}
	q := `SELECT c.id, COALESCE(c.sale_id, 0), COALESCE(s.transaction_id, ''), c.partner_id, c.customer_click_id, c.kind, c.status,
			c.amount, c.currency, c.refunded_amount, COALESCE(s.is_test, false), c.hold_until, c.created_at, c.approved_at
		FROM commissions c
		LEFT JOIN LATERAL (SELECT s.transaction_id, s.is_test FROM sales s WHERE s.id = c.sale_id OFFSET 0) s ON true
		WHERE ` + strings.Join(where, " AND ") + `
		ORDER BY c.created_at DESC, c.id DESC
		LIMIT ` + arg(limit)
	return q, args
}

// Commissions lists the program's commissions newest first, calling each
// per row while they are read; limit 0 reads them all, page by page.
func (s *Store) Commissions(ctx context.Context, programID int64, f console.Filter, after *console.Cursor, limit int, each func(console.Commission) error) error {
	if limit > 0 {
		_, err := s.commissionsPage(ctx, programID, f, after, limit, each)
		return err
	}
	for {
		last, err := s.commissionsPage(ctx, programID, f, after, s.page, each)
		if err != nil || last == nil {
			return err
		}
		after = last
	}
}

// commissionsPage reads at most limit rows after the cursor and answers
// the cursor of the last one when the page was full (nil: no more rows).
func (s *Store) commissionsPage(ctx context.Context, programID int64, f console.Filter, after *console.Cursor, limit int, each func(console.Commission) error) (*console.Cursor, error) {
	q, args := CommissionsQuery(programID, f, after, limit)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("commissions of program %d: %w", programID, err)
	}
	defer rows.Close()
	n := 0
	var last console.Cursor
	for rows.Next() {
		var c console.Commission
		if err := rows.Scan(&c.ID, &c.SaleID, &c.TransactionID, &c.PartnerID, &c.CustomerClickID, &c.Kind, &c.Status,
			&c.Amount, &c.Currency, &c.Refunded, &c.Test, &c.HoldUntil, &c.CreatedAt, &c.ApprovedAt); err != nil {
			return nil, fmt.Errorf("commissions of program %d: %w", programID, err)
		}
		// The cursor keeps the row's own timestamp (not its UTC copy) so
		// the next page's comparison is exact.
		last = console.Cursor{CreatedAt: c.CreatedAt, ID: c.ID}
		n++
		c.HoldUntil, c.CreatedAt = c.HoldUntil.UTC(), c.CreatedAt.UTC()
		if c.ApprovedAt != nil {
			t := c.ApprovedAt.UTC()
			c.ApprovedAt = &t
		}
		if err := each(c); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("commissions of program %d: %w", programID, err)
	}
	if n < limit {
		return nil, nil
	}
	return &last, nil
}

// MoneyQuery is a page of the payouts list's money per partner and
// currency, after (partner_id, currency): the program's running totals
// (program_money, migration 00010: one row per partner and currency, kept
// by the ledger's statements), so a page costs the same at any number of
// commissions. A program's available money is its own
// (ledger.ProgramAvailable), not capped by the partner's balance in other
// programs. Exported for the plan test.
const MoneyQuery = `SELECT m.partner_id, m.currency, m.earned, m.paid, m.open
	FROM program_money m
	WHERE m.program_id = $1 AND (m.partner_id, m.currency) > ($2, $3)
	ORDER BY m.partner_id, m.currency
	LIMIT $4`

// Money lists a page of the partners' money in the program after the
// cursor (the zero MoneyCursor: from the first).
func (s *Store) Money(ctx context.Context, programID int64, after console.MoneyCursor, limit int, each func(console.PartnerMoney) error) error {
	rows, err := s.pool.Query(ctx, MoneyQuery, programID, after.PartnerID, after.Currency, limit)
	if err != nil {
		return fmt.Errorf("money of program %d: %w", programID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var m console.PartnerMoney
		if err := rows.Scan(&m.PartnerID, &m.Currency, &m.Earned, &m.Paid, &m.Open); err != nil {
			return fmt.Errorf("money of program %d: %w", programID, err)
		}
		if err := each(m); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("money of program %d: %w", programID, err)
	}
	return nil
}

// PayoutsQuery lists a program's payouts newest first after an id
// (withdrawals_program). Exported for the plan test.
const PayoutsQuery = `SELECT id, partner_id, program_id, reference, currency, amount, requested_amount, status, created_at, updated_at
	FROM withdrawals WHERE program_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3`

// Payouts lists the program's payouts, calling each per row.
func (s *Store) Payouts(ctx context.Context, programID, afterID int64, limit int, each func(ledger.Withdrawal) error) error {
	if afterID <= 0 {
		afterID = 1<<63 - 1
	}
	var lim any = limit
	if limit <= 0 {
		lim = nil // LIMIT NULL: every row
	}
	rows, err := s.pool.Query(ctx, PayoutsQuery, programID, afterID, lim)
	if err != nil {
		return fmt.Errorf("payouts of program %d: %w", programID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var w ledger.Withdrawal
		var cur string
		if err := rows.Scan(&w.ID, &w.PartnerID, &w.ProgramID, &w.Reference, &cur, &w.Amount.Minor, &w.Requested, &w.Status,
			&w.CreatedAt, &w.UpdatedAt); err != nil {
			return fmt.Errorf("payouts of program %d: %w", programID, err)
		}
		w.Amount.Currency = money.Currency(cur)
		w.CreatedAt, w.UpdatedAt = w.CreatedAt.UTC(), w.UpdatedAt.UTC()
		if err := each(w); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("payouts of program %d: %w", programID, err)
	}
	return nil
}

// Revoked is session.Revocations over the replica: a session no longer
// stands when it was signed out or its user is suspended. One round trip,
// two primary-key lookups.
func (s *Store) Revoked(ctx context.Context, c session.Claims) (bool, error) {
	return catalogsync.SessionRevoked(ctx, s.pool, c.ID, c.UserID)
}
