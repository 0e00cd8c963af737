// Package pgstore is processor.Store over pgx: the processor_events and
// payment_refs tables (migration 00004) and the program reads of the
// catalog replica.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/services/commissions/internal/processor"
)

// Store is processor.Store.
type Store struct {
	pool *pgxpool.Pool
}

var _ processor.Store = (*Store)(nil)

// New builds the store on pool (search_path: the commissions schema).
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// EventSeen reports whether the event was stored before.
func (s *Store) EventSeen(ctx context.Context, id string) (bool, error) {
	var seen bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM processor_events WHERE event_id = $1)`, id).Scan(&seen); err != nil {
		return false, fmt.Errorf("look up processor event: %w", err)
	}
	return seen, nil
}

// ProgramByAccount finds the program connected to a processor account
// (the oldest when several name it).
func (s *Store) ProgramByAccount(ctx context.Context, account string) (processor.Program, bool, error) {
	return s.program(ctx, `SELECT id, payment_tracking_mode FROM programs WHERE processor_account_id = $1 ORDER BY id LIMIT 1`, account)
}

// Program reads a program of the replica.
func (s *Store) Program(ctx context.Context, id int64) (processor.Program, bool, error) {
	return s.program(ctx, `SELECT id, payment_tracking_mode FROM programs WHERE id = $1`, id)
}

func (s *Store) program(ctx context.Context, q string, arg any) (processor.Program, bool, error) {
	var p processor.Program
	err := s.pool.QueryRow(ctx, q, arg).Scan(&p.ID, &p.PaymentTrackingMode)
	if errors.Is(err, pgx.ErrNoRows) {
		return processor.Program{}, false, nil
	}
	if err != nil {
		return processor.Program{}, false, fmt.Errorf("read program of processor event: %w", err)
	}
	return p, true, nil
}

// Save stores the event and links the sale's payment references in one
// transaction. References are linked only to a recorded (not reserved)
// sale of the event's program, and a reference linked before keeps its
// sale.
func (s *Store) Save(ctx context.Context, r processor.Record) (bool, error) {
	dup := false
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var program, sale any
		if r.ProgramID != 0 {
			program = r.ProgramID
		}
		if r.SaleID != 0 {
			sale = r.SaleID
		}
		waiting := r.Waiting
		if waiting == nil {
			waiting = []string{}
		}
		tag, err := tx.Exec(ctx, `INSERT INTO processor_events (event_id, type, account_id, program_id, livemode, outcome, sale_id, payload, received_at, refs)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) ON CONFLICT (event_id) DO NOTHING`,
			r.ID, r.Type, r.AccountID, program, r.Livemode, r.Outcome, sale, string(r.Payload), r.ReceivedAt, waiting)
		if err != nil {
			return fmt.Errorf("store processor event: %w", err)
		}
		if tag.RowsAffected() == 0 {
			dup = true
			return nil
		}
		if r.SaleID == 0 {
			return nil
		}
		for _, ref := range r.Refs {
			if _, err := tx.Exec(ctx, `INSERT INTO payment_refs (ref, kind, sale_id, program_id, created_at)
				SELECT $1, $2, id, program_id, $5 FROM sales WHERE id = $3 AND program_id = $4 AND NOT reserved AND NOT is_test
				ON CONFLICT (ref) DO NOTHING`, ref.Ref, ref.Kind, r.SaleID, r.ProgramID, r.ReceivedAt); err != nil {
				return fmt.Errorf("store payment reference: %w", err)
			}
		}
		return nil
	})
	return dup, err
}

// SaleFor finds the recorded live sale a refund or dispute names: first
// through a payment reference linked to it (its own program's, whatever
// programID says, as the processor's ids are unique), else one whose
// transaction id is one of refs (the brand's sale route may have recorded
// the payment under its payment intent or invoice).
func (s *Store) SaleFor(ctx context.Context, programID int64, refs []string) (processor.SaleRef, bool, error) {
	var r processor.SaleRef
	err := s.pool.QueryRow(ctx, `
		SELECT s.id, s.program_id, s.transaction_id, s.currency FROM (
			SELECT r.sale_id AS id, 0 AS rank FROM payment_refs r WHERE r.ref = ANY($1) AND ($2 = 0 OR r.program_id = $2)
			UNION ALL
			SELECT id, 1 FROM sales WHERE transaction_id = ANY($1) AND NOT is_test AND ($2 = 0 OR program_id = $2)
		) f JOIN sales s ON s.id = f.id
		WHERE NOT s.reserved AND NOT s.is_test
		ORDER BY f.rank, s.id LIMIT 1`, refs, programID).Scan(&r.ID, &r.ProgramID, &r.TransactionID, &r.Currency)
	if errors.Is(err, pgx.ErrNoRows) {
		return processor.SaleRef{}, false, nil
	}
	if err != nil {
		return processor.SaleRef{}, false, fmt.Errorf("find the sale of a processor refund: %w", err)
	}
	return r, true, nil
}

// Waiting lists the awaiting_payment events naming one of refs (refs nil:
// those whose payment was recorded before recordedBefore, found as SaleFor
// finds it), oldest first. The event's object is read back from the stored payload.
func (s *Store) Waiting(ctx context.Context, refs []string, recordedBefore time.Time, limit int) ([]processor.Record, error) {
	q := `SELECT e.event_id, e.type, e.account_id, COALESCE(e.program_id, 0), e.livemode, e.payload->'data'->'object', e.received_at, e.refs
		FROM processor_events e
		WHERE e.outcome = 'awaiting_payment' AND e.refs && $1::text[]
		ORDER BY e.received_at, e.event_id LIMIT $2`
	args := []any{refs, limit}
	if refs == nil {
		q = `SELECT e.event_id, e.type, e.account_id, COALESCE(e.program_id, 0), e.livemode, e.payload->'data'->'object', e.received_at, e.refs
			FROM processor_events e
			WHERE e.outcome = 'awaiting_payment' AND (
				EXISTS (SELECT 1 FROM payment_refs r JOIN sales s ON s.id = r.sale_id
					WHERE r.ref = ANY(e.refs) AND NOT s.reserved AND r.created_at < $2 AND (e.program_id IS NULL OR r.program_id = e.program_id))
				OR EXISTS (SELECT 1 FROM sales s WHERE s.transaction_id = ANY(e.refs) AND NOT s.is_test AND NOT s.reserved
					AND s.created_at < $2 AND (e.program_id IS NULL OR s.program_id = e.program_id)))
			ORDER BY e.received_at, e.event_id LIMIT $1`
		args = []any{limit, recordedBefore}
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list waiting processor events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (processor.Record, error) {
		var r processor.Record
		var object []byte
		err := row.Scan(&r.ID, &r.Type, &r.AccountID, &r.ProgramID, &r.Livemode, &object, &r.ReceivedAt, &r.Waiting)
		r.Object, r.Created = object, r.ReceivedAt
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("read waiting processor events: %w", err)
	}
	return out, nil
}

// Resolve replaces the outcome of a waiting event once applied; another
// process that applied it first wins (the ledger applied it once).
func (s *Store) Resolve(ctx context.Context, eventID, outcome string, saleID int64) error {
	var sale any
	if saleID != 0 {
		sale = saleID
	}
	if _, err := s.pool.Exec(ctx, `UPDATE processor_events SET outcome = $2, sale_id = $3 WHERE event_id = $1 AND outcome = 'awaiting_payment'`,
		eventID, outcome, sale); err != nil {
		return fmt.Errorf("resolve waiting processor event: %w", err)
	}
	return nil
}

// WaitingStats counts the awaiting_payment events and gives the oldest's
// receipt time (zero when none); the partial index keeps it small.
func (s *Store) WaitingStats(ctx context.Context) (int64, time.Time, error) {
	var n int64
	var oldest *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT count(*), min(received_at) FROM processor_events WHERE outcome = 'awaiting_payment'`).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("count waiting processor events: %w", err)
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, *oldest, nil
}
