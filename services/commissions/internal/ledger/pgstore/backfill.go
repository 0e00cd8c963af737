package pgstore

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BackfillResult is what BackfillCustomerClicks did.
type BackfillResult struct {
	Read        int64 // customers in the file
	Sales       int64 // sales given their customer's click id
	Commissions int64 // commissions given it
}

// BackfillCustomerClicks fills the customer_click_id that sales and
// commissions written before the column have empty, from r: tracking's
// `customers export-clicks` CSV (header customer_id,click_id). The file is
// checked whole first (a bad line names its number and nothing is
// written); then it is copied into a temporary table and both tables are
// updated in one transaction. Only empty ids are filled, so running it
// again, or after new rows were written, changes nothing already set.
func BackfillCustomerClicks(ctx context.Context, pool *pgxpool.Pool, r io.Reader) (BackfillResult, error) {
	rows, err := readCustomerClicks(r)
	if err != nil {
		return BackfillResult{}, err
	}
	res := BackfillResult{Read: int64(len(rows))}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE customer_clicks (customer_id bigint PRIMARY KEY, click_id text NOT NULL) ON COMMIT DROP`); err != nil {
			return fmt.Errorf("temporary table: %w", err)
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"customer_clicks"}, []string{"customer_id", "click_id"}, pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("copy customer clicks: %w", err)
		}
		if _, err := tx.Exec(ctx, `ANALYZE customer_clicks`); err != nil {
			return fmt.Errorf("analyze customer clicks: %w", err)
		}
		tag, err := tx.Exec(ctx, `UPDATE sales s SET customer_click_id = c.click_id FROM customer_clicks c
			WHERE s.customer_id = c.customer_id AND s.customer_click_id = '' AND s.customer_id > 0`)
		if err != nil {
			return fmt.Errorf("fill sales: %w", err)
		}
		res.Sales = tag.RowsAffected()
		tag, err = tx.Exec(ctx, `UPDATE commissions m SET customer_click_id = c.click_id FROM customer_clicks c
			WHERE m.customer_id = c.customer_id AND m.customer_click_id = ''`)
		if err != nil {
			return fmt.Errorf("fill commissions: %w", err)
		}
		res.Commissions = tag.RowsAffected()
		return nil
	})
	if err != nil {
		return BackfillResult{}, err
	}
	return res, nil
}

// readCustomerClicks parses and checks the export: the header, a positive
// customer id, a non-empty click id, each id once.
func readCustomerClicks(r io.Reader) ([][]any, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 2
	cr.ReuseRecord = true
	head, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("empty file: want the header customer_id,click_id")
	}
	if err != nil {
		return nil, fmt.Errorf("line 1: %w", err)
	}
	if strings.TrimSpace(head[0]) != "customer_id" || strings.TrimSpace(head[1]) != "click_id" {
		return nil, fmt.Errorf("line 1: header %q, want customer_id,click_id", strings.Join(head, ","))
	}
	var rows [][]any
	seen := map[int64]bool{}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		id, err := strconv.ParseInt(strings.TrimSpace(rec[0]), 10, 64)
		if err != nil || id <= 0 {
			return nil, fmt.Errorf("line %d: customer_id %q is not a positive integer", line, rec[0])
		}
		click := strings.TrimSpace(rec[1])
		if click == "" || strings.ContainsRune(click, 0) {
			return nil, fmt.Errorf("line %d: empty or unusable click_id", line)
		}
		if seen[id] {
			return nil, fmt.Errorf("line %d: customer_id %d repeated", line, id)
		}
		seen[id] = true
		rows = append(rows, []any{id, click})
	}
}
