// Package pgstore is processor.Store over pgx: the processor_events and
// payment_refs tables (migration 00004) and the program reads of the
// catalog replica.
package pgstore

import (
	"context"
	"errors"
	"fmt"

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
		tag, err := tx.Exec(ctx, `INSERT INTO processor_events (event_id, type, account_id, program_id, livemode, outcome, sale_id, payload, received_at)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9) ON CONFLICT (event_id) DO NOTHING`,
			r.ID, r.Type, r.AccountID, program, r.Livemode, r.Outcome, sale, string(r.Payload), r.ReceivedAt)
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

// SaleByRef finds the sale a payment reference was linked to (refunds and
// disputes name a charge or a payment intent).
func (s *Store) SaleByRef(ctx context.Context, ref string) (int64, bool, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT sale_id FROM payment_refs WHERE ref = $1`, ref).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("look up payment reference: %w", err)
	}
	return id, true, nil
}
