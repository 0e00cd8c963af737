package pg

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Writes are a transaction's writes whose answers nothing reads, kept to
// be sent together (Queue) in the order they were made: plain statements
// (Exec), and rows of bulk writes (Row).
//
// A bulk write sends all its rows as one statement, at the place of its
// first row. A group commit (Group) writes the same few rows for each of
// its calls, and Postgres pays per statement what it could pay once per
// row set: the executor's start, and for a table with CHECK constraints
// the parsing and planning of every constraint (ExecRelCheck rebuilds
// them for each statement). Measured in commissions' refund run (perf
// record -a): those two were 14 % of the machine's samples with one
// statement per row.
//
// Moving a row to its kind's first place is the caller's promise that
// the writes it keeps commute: each targets a row the transaction locked
// or created before the write was made, and none needs a row a later
// write creates. A row whose key (its first value) the open statement of
// its kind has already is not merged: it starts a new statement in its
// own place, so two writes of one row keep their order.
type Writes struct {
	items []*writeItem
	// open is each bulk write's statement still taking rows.
	open map[*BulkWrite]*writeItem
}

type writeItem struct {
	what string
	sql  string
	args []any
	// bulk rows, and the keys among them
	bulk *BulkWrite
	rows [][]any
	keys map[any]struct{}
}

// BulkWrite is a write whose rows go as one statement: SQL takes one array
// parameter per column ($1 … $n, of Types: "bigint", "text", "jsonb",
// "boolean" or "timestamptz"), the rows' values; What names n rows in an
// error ("update %d commissions"). UpdateByID and InsertRows make them.
type BulkWrite struct {
	SQL   string
	What  string
	Types []string
}

// Exec keeps a plain statement; what names it in an error.
func (w *Writes) Exec(what, sql string, args ...any) {
	w.items = append(w.items, &writeItem{what: what, sql: sql, args: args})
}

// Row keeps one row of b (one value per column; nil is NULL, a pointer is
// its value; a jsonb value that is not a string is encoded as JSON) and returns its values: until the writes are queued, the
// caller may still change them. what names the row in an error.
func (w *Writes) Row(b *BulkWrite, what string, values ...any) []any {
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
			w.open = map[*BulkWrite]*writeItem{}
		}
		w.open[b] = it
	}
	it.rows = append(it.rows, values)
	it.keys[values[0]] = struct{}{}
	return values
}

// Empty reports whether nothing is kept (a nil Writes keeps nothing).
func (w *Writes) Empty() bool { return w == nil || len(w.items) == 0 }

// Queue adds the writes to b, one statement per plain write and per bulk
// statement, and returns what names each, in order (a statement of
// several rows is named after its count and its first row).
func (w *Writes) Queue(b *pgx.Batch) ([]string, error) {
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
		for _, row := range it.rows {
			if len(row) != len(it.bulk.Types) {
				return nil, fmt.Errorf("%s: %d values for %d columns", it.what, len(row), len(it.bulk.Types))
			}
		}
		cols := make([]any, len(it.bulk.Types))
		for c, typ := range it.bulk.Types {
			col, err := column(typ, it.rows, c)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", it.what, err)
			}
			cols[c] = col
		}
		b.Queue(it.bulk.SQL, cols...)
		if len(it.rows) == 1 {
			what = append(what, it.what)
		} else {
			what = append(what, fmt.Sprintf(it.bulk.What, len(it.rows))+" (the first: "+it.what+")")
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
		return typedColumn(rows, c, refuse[int64])
	case "text":
		return typedColumn(rows, c, refuse[string])
	case "jsonb":
		// A string is JSON text already; any other value is encoded
		// now, when the writes are queued (a row whose value is
		// replaced before then is never encoded).
		return typedColumn(rows, c, encodeJSON)
	case "boolean":
		return typedColumn(rows, c, refuse[bool])
	case "timestamptz":
		return typedColumn(rows, c, refuse[time.Time])
	}
	return nil, fmt.Errorf("bulk column %d: type %q not handled", c+1, typ)
}

// typedColumn is column c of rows as []*T: a T or *T is taken as it is,
// nil is NULL, and other makes anything else a value or an error.
func typedColumn[T any](rows [][]any, c int, other func(any) (*T, error)) ([]*T, error) {
	out := make([]*T, len(rows))
	for r, row := range rows {
		switch v := row[c].(type) {
		case nil:
		case T:
			out[r] = &v
		case *T:
			out[r] = v
		default:
			p, err := other(v)
			if err != nil {
				return nil, fmt.Errorf("bulk column %d: %w", c+1, err)
			}
			out[r] = p
		}
	}
	return out, nil
}

// refuse is typedColumn's other for a column that takes only its type.
func refuse[T any](v any) (*T, error) { return nil, fmt.Errorf("a %T, not a %T", v, (*T)(nil)) }

// encodeJSON is a jsonb column's other: the value encoded.
func encodeJSON(v any) (*string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	text := string(raw)
	return &text, nil
}

// UpdateByID is a bulk UPDATE of table's rows by id: $1 the ids (bigint),
// then one array per column of set, each row's value at its id's place.
// An entry of set is "status text" (the column takes the value), an
// expression with ? for the value and the type last
// ("sale_recorded_at = COALESCE(sale_recorded_at, ?) timestamptz"), or,
// without ?, kept as it is ("reserved = false"). The rows are found by
// id = ANY($1): one index scan, whatever the table's size, and no join
// for the planner to choose (array_position is linear, over a group's
// few dozen rows at most).
func UpdateByID(what, table string, set ...string) *BulkWrite {
	b := &BulkWrite{What: what, Types: []string{"bigint"}}
	var sb strings.Builder
	sb.WriteString("UPDATE " + table + " SET ")
	for i, s := range set {
		if i > 0 {
			sb.WriteString(", ")
		}
		switch {
		case strings.Contains(s, "?"):
			i := strings.LastIndex(s, " ")
			expr, typ := s[:i], s[i+1:]
			b.Types = append(b.Types, typ)
			sb.WriteString(strings.Replace(expr, "?", fmt.Sprintf("($%d::%s[])[array_position($1::bigint[], id)]", len(b.Types), typ), 1))
		case strings.Contains(s, "="):
			sb.WriteString(s)
		default:
			col, typ, _ := strings.Cut(s, " ")
			b.Types = append(b.Types, typ)
			fmt.Fprintf(&sb, "%s = ($%d::%s[])[array_position($1::bigint[], id)]", col, len(b.Types), typ)
		}
	}
	sb.WriteString(" WHERE id = ANY($1::bigint[])")
	b.SQL = sb.String()
	return b
}

// InsertRows is a bulk INSERT of table's rows, one array per column of
// cols ("sale_id bigint").
func InsertRows(what, table string, cols ...string) *BulkWrite {
	b := &BulkWrite{What: what}
	names, params := make([]string, len(cols)), make([]string, len(cols))
	for i, c := range cols {
		col, typ, _ := strings.Cut(c, " ")
		b.Types = append(b.Types, typ)
		names[i], params[i] = col, fmt.Sprintf("$%d::%s[]", i+1, typ)
	}
	b.SQL = "INSERT INTO " + table + " (" + strings.Join(names, ", ") + ") SELECT * FROM unnest(" + strings.Join(params, ", ") + ")"
	return b
}
