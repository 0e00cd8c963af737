// Package fx loads dated exchange rates into analytics' rate table
// (fx_rates: US dollars per major unit of a currency, from a date on),
// from a CSV file: `analytics fx import <csv>`. The whole file is checked
// first and loaded in one transaction, or not at all.
package fx

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/pg"
)

// Header is the CSV's first line.
var Header = []string{"currency", "date", "usd_per_unit"}

// The days fx_daily holds (migration 00007), and so the dates a rate may
// have.
var (
	FirstDay = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	LastDay  = time.Date(2100, 12, 31, 0, 0, 0, 0, time.UTC)
)

// MaxRows bounds a file: decades of daily rates for a few currencies.
const MaxRows = 1_000_000

// Rate is one row: from Date on, one unit of Currency is USDPerUnit
// dollars (a decimal string, kept exact).
type Rate struct {
	Currency   string
	Date       time.Time
	USDPerUnit string
}

// Parse reads a rates CSV: the header, then `currency,date,usd_per_unit`
// rows (ISO 4217 code, YYYY-MM-DD, a positive decimal). Every problem is
// reported with its line; any problem means no rates.
func Parse(r io.Reader) ([]Rate, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(Header)
	cr.TrimLeadingSpace = true
	var out []Rate
	var problems []error
	seen := map[string]int{}
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			problems = append(problems, err)
			if len(problems) >= 20 {
				break
			}
			continue
		}
		if line == 1 {
			if strings.Join(rec, ",") != strings.Join(Header, ",") {
				return nil, fmt.Errorf("line 1: the header must be %q, got %q", strings.Join(Header, ","), strings.Join(rec, ","))
			}
			continue
		}
		if len(out) >= MaxRows {
			return nil, fmt.Errorf("more than %d rates in one file", MaxRows)
		}
		rate, err := parseRow(rec)
		if err != nil {
			problems = append(problems, fmt.Errorf("line %d: %w", line, err))
			continue
		}
		key := rate.Currency + " " + rate.Date.Format(time.DateOnly)
		if first, dup := seen[key]; dup {
			problems = append(problems, fmt.Errorf("line %d: %s %s is also on line %d", line, rate.Currency, rate.Date.Format(time.DateOnly), first))
			continue
		}
		seen[key] = line
		out = append(out, rate)
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	if len(out) == 0 {
		return nil, errors.New("no rates after the header")
	}
	return out, nil
}

func parseRow(rec []string) (Rate, error) {
	code := strings.ToUpper(strings.TrimSpace(rec[0]))
	if len(code) != 3 || strings.Trim(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		return Rate{}, fmt.Errorf("currency %q is not an ISO 4217 code", rec[0])
	}
	date, err := time.Parse(time.DateOnly, strings.TrimSpace(rec[1]))
	if err != nil {
		return Rate{}, fmt.Errorf("date %q is not YYYY-MM-DD", rec[1])
	}
	if date.Before(FirstDay) || date.After(LastDay) {
		return Rate{}, fmt.Errorf("date %s is outside %s to %s (the daily rate table's years)", rec[1], FirstDay.Format(time.DateOnly), LastDay.Format(time.DateOnly))
	}
	raw := strings.TrimSpace(rec[2])
	v, ok := new(big.Rat).SetString(raw)
	if !ok || len(raw) > 40 || strings.ContainsAny(raw, "/eE") || v.Sign() <= 0 {
		return Rate{}, fmt.Errorf("usd_per_unit %q is not a positive decimal", rec[2])
	}
	if code == "USD" && v.Cmp(big.NewRat(1, 1)) != 0 {
		return Rate{}, fmt.Errorf("USD is 1 dollar per unit, not %s", raw)
	}
	return Rate{Currency: code, Date: date, USDPerUnit: raw}, nil
}

// Result is what an import changed.
type Result struct {
	// Added: dates new to the table; Replaced: dates it had, now the file's.
	Added, Replaced int
	// Latest is each currency's newest rate date after the import.
	Latest map[string]time.Time
}

// Import loads rates in one transaction: a new (currency, date) is added,
// an existing one takes the file's value. A currency analytics does not
// know (the currencies table) fails the whole import. writersLock is the
// advisory lock the figures' writers hold shared (aggregate.FiguresLock):
// the import holds it exclusively, so no writer converts an amount at a
// rate the import is replacing while it recomputes the daily dollars.
func Import(ctx context.Context, pool *pgxpool.Pool, rates []Rate, writersLock int64) (Result, error) {
	res := Result{Latest: map[string]time.Time{}}
	err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, writersLock); err != nil {
			return fmt.Errorf("hold the figures' writers: %w", err)
		}
		known := map[string]bool{}
		rows, err := tx.Query(ctx, `SELECT code FROM currencies`)
		if err != nil {
			return err
		}
		codes, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, c := range codes {
			known[c] = true
		}
		for _, r := range rates {
			if !known[r.Currency] {
				return fmt.Errorf("%s: not a sale currency analytics knows (%s)", r.Currency, strings.Join(codes, ", "))
			}
			// xmax is 0 on a row this statement inserted (Postgres' usual
			// upsert tell), not on one it updated.
			var inserted bool
			err := tx.QueryRow(ctx, `INSERT INTO fx_rates (currency, valid_from, usd_per_unit) VALUES ($1, $2, $3::numeric)
				ON CONFLICT (currency, valid_from) DO UPDATE SET usd_per_unit = EXCLUDED.usd_per_unit
				RETURNING (xmax = 0)`, r.Currency, r.Date, r.USDPerUnit).Scan(&inserted)
			if err != nil {
				return fmt.Errorf("%s %s: %w", r.Currency, r.Date.Format(time.DateOnly), err)
			}
			if inserted {
				res.Added++
			} else {
				res.Replaced++
			}
		}
		// The daily table follows, from each currency's earliest changed
		// date on (a day before it keeps its rate).
		since := map[string]time.Time{}
		for _, r := range rates {
			if d, ok := since[r.Currency]; !ok || r.Date.Before(d) {
				since[r.Currency] = r.Date
			}
		}
		for cur, from := range since {
			// A new first rate also stands for every day before it.
			if _, err := tx.Exec(ctx, `UPDATE fx_daily d SET (usd_per_minor, estimated) = (SELECT r.usd_per_minor, r.estimated FROM fx_rate_on($1, d.day) r)
				WHERE d.currency = $1 AND (d.day >= $2 OR $2 <= (SELECT min(valid_from) FROM fx_rates WHERE currency = $1))`, cur, from); err != nil {
				return fmt.Errorf("refresh the daily rates of %s: %w", cur, err)
			}
		}
		if _, err := RefreshDollars(ctx, tx, ""); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT currency, max(valid_from) FROM fx_rates GROUP BY currency ORDER BY currency`)
		if err != nil {
			return err
		}
		var cur string
		var latest time.Time
		_, err = pgx.ForEachRow(rows, []any{&cur, &latest}, func() error {
			res.Latest[cur] = latest
			return nil
		})
		return err
	})
	return res, err
}

// Execer is a transaction or a connection.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// RefreshDollars sets the dollars of every UTC day (activity_days) whose
// money (money_days, in minor units per currency) the rates in fx_daily
// now convert to other dollars than the day holds, and answers how many
// days it changed. The consumers keep the dollars as they add amounts;
// this is for when the rates change. It reads every day's money once.
// schema holds both tables ("": the search path's, the live ones; a
// rebuild passes its new generation's).
func RefreshDollars(ctx context.Context, db Execer, schema string) (int64, error) {
	days, money := "activity_days", "money_days"
	if schema != "" {
		days, money = pgx.Identifier{schema, days}.Sanitize(), pgx.Identifier{schema, money}.Sanitize()
	}
	tag, err := db.Exec(ctx, `INSERT INTO `+days+` AS a (program_id, day, revenue_usd, commission_usd, refunded_usd, fx_estimated)
		SELECT m.program_id, m.day, sum(m.revenue_minor * f.usd_per_minor), sum(m.commission_minor * f.usd_per_minor),
			sum(m.refunded_minor * f.usd_per_minor), bool_or(f.estimated)
		FROM `+money+` m
		JOIN fx_daily f ON f.currency = m.currency AND f.day = LEAST(GREATEST(m.day, DATE '2000-01-01'), DATE '2100-12-31')
		GROUP BY 1, 2
		ON CONFLICT (program_id, day) DO UPDATE
			SET revenue_usd = EXCLUDED.revenue_usd, commission_usd = EXCLUDED.commission_usd, refunded_usd = EXCLUDED.refunded_usd,
				fx_estimated = EXCLUDED.fx_estimated
			WHERE (a.revenue_usd, a.commission_usd, a.refunded_usd, a.fx_estimated)
				IS DISTINCT FROM (EXCLUDED.revenue_usd, EXCLUDED.commission_usd, EXCLUDED.refunded_usd, EXCLUDED.fx_estimated)`)
	if err != nil {
		return 0, fmt.Errorf("refresh the daily dollars: %w", err)
	}
	return tag.RowsAffected(), nil
}
