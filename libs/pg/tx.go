package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// TxBeginner is satisfied by *pgxpool.Pool, *pgx.Conn and pgx.Tx (the
// latter opens a savepoint).
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	BeginTx(ctx context.Context, txOptions pgx.TxOptions) (pgx.Tx, error)
}

// InTx runs fn in a transaction with default options: it commits when fn
// returns nil and rolls back otherwise. fn's own error is returned as is (so
// errors.Is on domain sentinels keeps working); a failed rollback is joined
// to it.
func InTx(ctx context.Context, db TxBeginner, fn func(pgx.Tx) error) error {
	return InTxWithOptions(ctx, db, pgx.TxOptions{}, fn)
}

// InTxWithOptions is InTx with explicit options, e.g. an isolation level.
func InTxWithOptions(ctx context.Context, db TxBeginner, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin tx: %w", err)
	}
	if err := fn(tx); err != nil {
		// The caller's context may be cancelled already; the rollback must
		// still reach the server or the connection goes back dirty.
		if rbErr := tx.Rollback(context.WithoutCancel(ctx)); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) {
			return errors.Join(err, fmt.Errorf("rollback tx: %w", rbErr))
		}
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit tx: %w", err)
	}
	return nil
}
