package pgstore

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestWritesMergeRowsOfAKind(t *testing.T) {
	a := &bulkWrite{sql: "A", what: "a %d rows", types: []string{"bigint", "text"}}
	b := &bulkWrite{sql: "B", what: "b %d rows", types: []string{"bigint"}}
	w := &writes{}
	w.row(a, "a 1", int64(1), "x")
	w.row(b, "b 1", int64(1))
	w.exec("plain", "P", 7)
	row := w.row(a, "a 2", int64(2), nil)
	w.row(b, "b 2", int64(2))
	// A second write of row 1 keeps its place after the first.
	w.row(a, "a 1 again", int64(1), "y")
	w.row(a, "a 3", int64(3), "z")
	row[1] = "changed before sending"

	batch := &pgx.Batch{}
	what, err := w.queue(batch)
	if err != nil {
		t.Fatal(err)
	}
	wantWhat := []string{"a 2 rows (the first: a 1)", "b 2 rows (the first: b 1)", "plain", "a 2 rows (the first: a 1 again)"}
	if !reflect.DeepEqual(what, wantWhat) {
		t.Fatalf("what = %q, want %q", what, wantWhat)
	}
	if batch.Len() != 4 {
		t.Fatalf("%d statements, want 4", batch.Len())
	}
	sqls := []string{}
	for _, q := range batch.QueuedQueries {
		sqls = append(sqls, q.SQL)
	}
	if got := strings.Join(sqls, ","); got != "A,B,P,A" {
		t.Fatalf("statements %s, want A,B,P,A", got)
	}
	ids := func(q *pgx.QueuedQuery) []int64 {
		var out []int64
		for _, p := range q.Arguments[0].([]*int64) {
			out = append(out, *p)
		}
		return out
	}
	if got := ids(batch.QueuedQueries[0]); !reflect.DeepEqual(got, []int64{1, 2}) {
		t.Errorf("first A rows %v, want [1 2]", got)
	}
	if got := ids(batch.QueuedQueries[3]); !reflect.DeepEqual(got, []int64{1, 3}) {
		t.Errorf("second A rows %v, want [1 3]", got)
	}
	texts := batch.QueuedQueries[0].Arguments[1].([]*string)
	if *texts[0] != "x" || *texts[1] != "changed before sending" {
		t.Errorf("first A texts %q %q", *texts[0], *texts[1])
	}
}

func TestWritesOneRowIsNamedAfterIt(t *testing.T) {
	w := &writes{}
	w.row(setSalesRefunded, "record refunded total of sale 9", int64(9), int64(100))
	what, err := w.queue(&pgx.Batch{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(what, []string{"record refunded total of sale 9"}) {
		t.Errorf("what = %q", what)
	}
}

func TestColumnTypes(t *testing.T) {
	s, at := "s", time.Unix(5, 0)
	// Each column: a value, a pointer to one and a NULL.
	rows := [][]any{{int64(1), "a", true, at, "{}"}, {ptr(int64(2)), &s, ptr(false), &at, &s}, {nil, nil, nil, nil, nil}}
	for c, typ := range []string{"bigint", "text", "boolean", "timestamptz", "jsonb"} {
		col, err := column(typ, rows, c)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		v := reflect.ValueOf(col)
		if v.Len() != 3 {
			t.Fatalf("%s: %d values", typ, v.Len())
		}
		if v.Index(0).IsNil() || v.Index(1).IsNil() || !v.Index(2).IsNil() {
			t.Errorf("%s: NULLs %v %v %v, want the last only", typ, v.Index(0).IsNil(), v.Index(1).IsNil(), v.Index(2).IsNil())
		}
	}
	if _, err := column("bigint", [][]any{{"1"}}, 0); err == nil {
		t.Error("a string in a bigint column was taken")
	}
	if _, err := column("numeric", [][]any{{int64(1)}}, 0); err == nil {
		t.Error("an unknown type was taken")
	}
}

func TestBulkStatements(t *testing.T) {
	if got, want := setSalesRefunded.sql, "UPDATE sales SET refunded_cents = ($2::bigint[])[array_position($1::bigint[], id)] WHERE id = ANY($1::bigint[])"; got != want {
		t.Errorf("update:\n%s\nwant\n%s", got, want)
	}
	if got := completeSales.types; !reflect.DeepEqual(got, []string{"bigint", "bigint", "bigint", "text", "text"}) {
		t.Errorf("completion types %v", got)
	}
	if !strings.HasPrefix(completeSales.sql, "UPDATE sales SET reserved = false, customer_id = ($2::bigint[])") {
		t.Errorf("completion: %s", completeSales.sql)
	}
	if got, want := insertNotifications.sql, "INSERT INTO notifications (id, recipient_kind, recipient_id, kind, payload, created_at) SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::jsonb[], $6::timestamptz[])"; got != want {
		t.Errorf("insert:\n%s\nwant\n%s", got, want)
	}
}

func ptr[T any](v T) *T { return &v }
