// Package pgstore is the Postgres side of the console's keys: the last use
// of a key, as the services that authenticate keys report it. The keys
// themselves are the catalog's (catalog/pgstore).
package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RecordUse keeps the latest reported use of a key inside the consumer's
// inbox transaction: a repeated or late report (another service's, another
// process's, a redelivery) never moves last_used_at back. A key that does
// not exist here changes nothing.
func RecordUse(ctx context.Context, tx pgx.Tx, keyID int64, at time.Time) error {
	if _, err := tx.Exec(ctx, `UPDATE api_keys SET last_used_at = $2
		WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)`, keyID, at); err != nil {
		return fmt.Errorf("record use of key %d: %w", keyID, err)
	}
	return nil
}
