package pgstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// writes are a transaction's deferred writes (the package comment), in the
// order they were made: plain statements, and rows of bulk writes.
//
// A bulk write sends all its rows of the transaction as one statement, at
// the place of its first row. A group of refunds or completions
// (ledger's group commit) writes the same few rows for each of its calls,
// and Postgres pays per statement what it pays once per row set: the
// executor's start, and for a table with CHECK constraints the parsing
// and planning of every constraint (ExecRelCheck rebuilds them for each
// statement). Measured in the refund run (perf record -a): those two were
// 14 % of the machine's samples with one statement per row.
//
// Moving a row to its kind's first place is safe because every deferred
// write targets a row the transaction locked or created before the write
// was made (the package comment): two deferred writes of different rows
// commute. A row whose key (its first value) the open statement of its
// kind has already is not merged: it starts a new statement in its own
// place, so two writes of one row keep their order.
type writes struct {
	items []*writeItem
	// open is each bulk write's statement still taking rows.
	open map[*bulkWrite]*writeItem
}

type writeItem struct {
	what string
	sql  string
	args []any
	// bulk rows, and the keys among them
	bulk *bulkWrite
	rows [][]any
	keys map[any]struct{}
}

// bulkWrite is a write whose rows go as one statement: sql takes one array
// parameter per column ($1 … $n, of types, "bigint" …), the rows' values;
// what names n rows in an error ("update %d commissions").
type bulkWrite struct {
	sql   string
	what  string
	types []string
}

// exec keeps a plain statement.
func (w *writes) exec(what, sql string, args ...any) {
	w.items = append(w.items, &writeItem{what: what, sql: sql, args: args})
}

// row keeps one row of b and returns its values: until the writes are
// sent, the caller may still change them.
func (w *writes) row(b *bulkWrite, what string, values ...any) []any {
	it := w.open[b]
	if it != nil {
		if _, dup := it.keys[values[0]]; dup {
			it = nil
		}
	}
	if it == nil {
		it = &writeItem{what: what, bulk: b, keys: map[any]struct{}{}}
		w.items = append(w.items, it)
		if w.open == nil {
			w.open = map[*bulkWrite]*writeItem{}
		}
		w.open[b] = it
	}
	it.rows = append(it.rows, values)
	it.keys[values[0]] = struct{}{}
	return values
}

func (w *writes) empty() bool { return w == nil || len(w.items) == 0 }

// queue adds the writes to b, one statement per plain write and per bulk
// statement, and returns what names each (for readWrites).
func (w *writes) queue(b *pgx.Batch) ([]string, error) {
	if w == nil {
		return nil, nil
	}
	what := make([]string, 0, len(w.items))
	for _, it := range w.items {
		if it.bulk == nil {
			b.Queue(it.sql, it.args...)
			what = append(what, it.what)
			continue
		}
		cols := make([]any, len(it.bulk.types))
		for c, typ := range it.bulk.types {
			col, err := column(typ, it.rows, c)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", it.what, err)
			}
			cols[c] = col
		}
		b.Queue(it.bulk.sql, cols...)
		if len(it.rows) == 1 {
			what = append(what, it.what)
		} else {
			what = append(what, fmt.Sprintf(it.bulk.what, len(it.rows))+" (the first: "+it.what+")")
		}
	}
	return what, nil
}

// column is column c of rows as a typed array of typ (a nil value is
// NULL): typed, not []any, so that pgx knows the array's type in any
// protocol (the plan test sends statements in the simple one).
func column(typ string, rows [][]any, c int) (any, error) {
	switch typ {
	case "bigint":
		return typedColumn[int64](rows, c)
	case "text", "jsonb":
		return typedColumn[string](rows, c)
	case "boolean":
		return typedColumn[bool](rows, c)
	case "timestamptz":
		return typedColumn[time.Time](rows, c)
	}
	return nil, fmt.Errorf("bulk column %d: type %q not handled", c+1, typ)
}

func typedColumn[T any](rows [][]any, c int) ([]*T, error) {
	out := make([]*T, len(rows))
	for r, row := range rows {
		switch v := row[c].(type) {
		case nil:
		case T:
			out[r] = &v
		case *T:
			out[r] = v
		default:
			return nil, fmt.Errorf("bulk column %d: a %T, not a %T", c+1, v, out[r])
		}
	}
	return out, nil
}

// updateByID is an UPDATE of table's rows by id from arrays: $1 the ids
// (bigint), then one array per column of set ("status text"), each row's
// value at its id's place; an entry with "=" is kept as it is
// ("reserved = false"). The rows are found by id = ANY($1): one index
// scan, whatever the table's size, and no join for the planner to choose
// (array_position is linear, over a group's few dozen rows at most).
func updateByID(what, table string, set ...string) *bulkWrite {
	b := &bulkWrite{what: what, types: []string{"bigint"}}
	var sb strings.Builder
	sb.WriteString("UPDATE " + table + " SET ")
	for i, s := range set {
		if i > 0 {
			sb.WriteString(", ")
		}
		if strings.Contains(s, "=") {
			sb.WriteString(s)
			continue
		}
		col, typ, _ := strings.Cut(s, " ")
		b.types = append(b.types, typ)
		fmt.Fprintf(&sb, "%s = ($%d::%s[])[array_position($1::bigint[], id)]", col, len(b.types), typ)
	}
	sb.WriteString(" WHERE id = ANY($1::bigint[])")
	b.sql = sb.String()
	return b
}

// insertRows is an INSERT of table's rows from arrays, one per column of
// cols ("sale_id bigint").
func insertRows(what, table string, cols ...string) *bulkWrite {
	b := &bulkWrite{what: what}
	names, params := make([]string, len(cols)), make([]string, len(cols))
	for i, c := range cols {
		col, typ, _ := strings.Cut(c, " ")
		b.types = append(b.types, typ)
		names[i], params[i] = col, fmt.Sprintf("$%d::%s[]", i+1, typ)
	}
	b.sql = "INSERT INTO " + table + " (" + strings.Join(names, ", ") + ") SELECT * FROM unnest(" + strings.Join(params, ", ") + ")"
	return b
}

// The ledger's bulk writes.
var (
	completeSales = updateByID("complete %d sales", "sales",
		"reserved = false", "customer_id bigint", "partner_id bigint", "customer_click_id text", "commission_state text")
	setSalesRefunded  = updateByID("record the refunded totals of %d sales", "sales", "refunded_cents bigint")
	updateCommissions = updateByID("update %d commissions", "commissions",
		"status text", "refunded_amount bigint", "credited boolean", "reason text", "approved_at timestamptz", "updated_at timestamptz")
	insertCommissions = insertRows("store %d commissions", "commissions",
		"id bigint", "sale_id bigint", "program_id bigint", "partner_id bigint", "customer_id bigint", "kind text", "status text",
		"amount bigint", "currency text", "credited boolean", "reason text", "hold_until timestamptz", "approved_at timestamptz",
		"created_at timestamptz", "updated_at timestamptz", "customer_click_id text")
	insertRefunds = insertRows("store %d refunds", "refunds",
		"id bigint", "sale_id bigint", "commission_id bigint", "refund_id text", "requested_cents bigint", "amount_cents bigint",
		"deduction bigint", "debited bigint", "currency text", "reason text", "pending_notifications jsonb", "created_at timestamptz")
	insertNotifications = insertRows("store %d notifications", "notifications",
		"id bigint", "recipient_kind text", "recipient_id bigint", "kind text", "payload jsonb", "created_at timestamptz")
)
