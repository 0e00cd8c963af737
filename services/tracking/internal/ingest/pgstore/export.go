package pgstore

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ExportCustomerClicks writes every customer's id and click id to w as CSV
// with the header customer_id,click_id, in id order, streamed by COPY (a
// million customers are a few seconds, in constant memory). It returns the
// number of customers written.
func ExportCustomerClicks(ctx context.Context, pool *pgxpool.Pool, w io.Writer) (int64, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("export customer clicks: %w", err)
	}
	defer conn.Release()
	tag, err := conn.Conn().PgConn().CopyTo(ctx, w,
		`COPY (SELECT id AS customer_id, click_id FROM customers ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER true)`)
	if err != nil {
		return 0, fmt.Errorf("export customer clicks: %w", err)
	}
	return tag.RowsAffected(), nil
}
