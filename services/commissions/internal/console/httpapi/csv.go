package httpapi

import (
	"context"
	"encoding/csv"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/commissions/internal/console"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
)

// flushEvery is how many CSV rows are written between flushes: the answer
// streams while the rows are read, never held whole in memory.
const flushEvery = 500

// CSV headers, in column order.
var (
	CommissionsHeader = []string{"id", "sale_id", "transaction_id", "partner_id", "customer_click_id", "kind", "status",
		"amount", "currency", "refunded_amount", "test", "hold_until", "created_at", "approved_at"}
	PayoutsHeader = []string{"id", "partner_id", "currency", "amount", "requested_amount", "status", "reference", "created_at", "updated_at"}
)

// cell guards a text cell against spreadsheet formulas: a value a brand or
// a customer chose (a transaction id, a reference) that starts with = + -
// @ or a tab would run as a formula when the file is opened, so it gets a
// leading apostrophe. encoding/csv quotes commas, quotes and newlines.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

func id(n int64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func optTS(t *time.Time) string {
	if t == nil {
		return ""
	}
	return ts(*t)
}

// csvWriter writes the header and streams rows, flushing every flushEvery
// rows. The status and header go out with the first row (or at the end of
// an empty list), so a query that fails at once is still the route's 500;
// a failure after the first byte cannot change the status any more: it is
// logged and the answer ends short (a truncated file, never an error body
// mixed into the CSV).
type csvWriter struct {
	w       http.ResponseWriter
	c       *csv.Writer
	name    string
	header  []string
	started bool
	n       int
}

func newCSV(w http.ResponseWriter, name string, header []string) *csvWriter {
	return &csvWriter{w: w, c: csv.NewWriter(w), name: name, header: header}
}

func (cw *csvWriter) start() error {
	h := cw.w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="`+cw.name+`"`)
	h.Set("Cache-Control", "no-store")
	cw.w.WriteHeader(http.StatusOK)
	cw.started = true
	return cw.c.Write(cw.header)
}

func (cw *csvWriter) row(rec []string) error {
	if !cw.started {
		if err := cw.start(); err != nil {
			return err
		}
	}
	if err := cw.c.Write(rec); err != nil {
		return err
	}
	if cw.n++; cw.n%flushEvery == 0 {
		cw.c.Flush()
		if f, ok := cw.w.(http.Flusher); ok {
			f.Flush()
		}
	}
	return cw.c.Error()
}

func (cw *csvWriter) end(ctx context.Context, err error, enc errorEncoder) error {
	if err != nil && !cw.started {
		enc.encode(ctx, err, cw.w)
		return nil
	}
	if !cw.started {
		err = cw.start()
	}
	cw.c.Flush()
	if err == nil {
		err = cw.c.Error()
	}
	if err != nil {
		enc.logger.ErrorContext(ctx, "csv export failed", "export", cw.name, "request_id", httpkit.RequestIDFrom(ctx), "rows", cw.n, "err", err)
	}
	return nil
}

func streamCommissions(ctx context.Context, w http.ResponseWriter, rows func(context.Context, func(console.Commission) error) error, enc errorEncoder) error {
	cw := newCSV(w, "commissions.csv", CommissionsHeader)
	err := rows(ctx, func(c console.Commission) error {
		return cw.row([]string{id(c.ID), id(c.SaleID), cell(c.TransactionID), id(c.PartnerID), cell(c.CustomerClickID), c.Kind, c.Status,
			strconv.FormatInt(c.Amount, 10), c.Currency, strconv.FormatInt(c.Refunded, 10), strconv.FormatBool(c.Test),
			ts(c.HoldUntil), ts(c.CreatedAt), optTS(c.ApprovedAt)})
	})
	return cw.end(ctx, err, enc)
}

func streamPayouts(ctx context.Context, w http.ResponseWriter, rows func(context.Context, func(ledger.Withdrawal) error) error, enc errorEncoder) error {
	cw := newCSV(w, "payouts.csv", PayoutsHeader)
	err := rows(ctx, func(p ledger.Withdrawal) error {
		return cw.row([]string{id(p.ID), id(p.PartnerID), string(p.Amount.Currency), strconv.FormatInt(p.Amount.Minor, 10),
			strconv.FormatInt(p.Requested, 10), p.Status, cell(p.Reference), ts(p.CreatedAt), ts(p.UpdatedAt)})
	})
	return cw.end(ctx, err, enc)
}
