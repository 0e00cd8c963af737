package pg

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestWritesMergeRowsOfAKind(t *testing.T) {
	a := &BulkWrite{SQL: "A", What: "a %d rows", Types: []string{"bigint", "text"}}
	b := &BulkWrite{SQL: "B", What: "b %d rows", Types: []string{"bigint"}}
	w := &Writes{}
	w.Row(a, "a 1", int64(1), "x")
	w.Row(b, "b 1", int64(1))
	w.Exec("plain", "P", 7)
	row := w.Row(a, "a 2", int64(2), nil)
	w.Row(b, "b 2", int64(2))
	// A second write of row 1 keeps its place after the first.
	w.Row(a, "a 1 again", int64(1), "y")
	w.Row(a, "a 3", int64(3), "z")
	row[1] = "changed before sending"

	batch := &pgx.Batch{}
	what, err := w.Queue(batch)
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
	w := &Writes{}
	w.Row(UpdateByID("record the refunded totals of %d sales", "sales", "refunded_cents bigint"), "record refunded total of sale 9", int64(9), int64(100))
	what, err := w.Queue(&pgx.Batch{})
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
	col, err := column("jsonb", [][]any{{map[string]int{"a": 1}}}, 0)
	if js := col.([]*string); err != nil || *js[0] != `{"a":1}` {
		t.Errorf("a jsonb value that is not a string: %v %v, want it encoded", col, err)
	}
	if _, err := column("jsonb", [][]any{{func() {}}}, 0); err == nil {
		t.Error("a value JSON cannot encode was taken")
	}
	w := &Writes{}
	w.Row(InsertRows("store %d", "notes", "id bigint", "body jsonb"), "note 1", int64(1))
	if _, err := w.Queue(&pgx.Batch{}); err == nil || !strings.Contains(err.Error(), "note 1: 1 values for 2 columns") {
		t.Errorf("a row short of a value: %v", err)
	}
	if _, err := column("bigint", [][]any{{"1"}}, 0); err == nil {
		t.Error("a string in a bigint column was taken")
	}
	if _, err := column("numeric", [][]any{{int64(1)}}, 0); err == nil {
		t.Error("an unknown type was taken")
	}
}

func ptr[T any](v T) *T { return &v }

func TestBulkStatements(t *testing.T) {
	u := UpdateByID("update %d", "customers", "status = 'conversion'", "first_purchase_date timestamptz",
		"sale_recorded_at = COALESCE(sale_recorded_at, ?) timestamptz", "note text")
	want := "UPDATE customers SET status = 'conversion', first_purchase_date = ($2::timestamptz[])[array_position($1::bigint[], id)], " +
		"sale_recorded_at = COALESCE(sale_recorded_at, ($3::timestamptz[])[array_position($1::bigint[], id)]), " +
		"note = ($4::text[])[array_position($1::bigint[], id)] WHERE id = ANY($1::bigint[])"
	if u.SQL != want {
		t.Errorf("update:\n%s\nwant\n%s", u.SQL, want)
	}
	if !reflect.DeepEqual(u.Types, []string{"bigint", "timestamptz", "timestamptz", "text"}) {
		t.Errorf("update types %v", u.Types)
	}
	in := InsertRows("store %d", "notes", "id bigint", "body jsonb")
	if want := "INSERT INTO notes (id, body) SELECT * FROM unnest($1::bigint[], $2::jsonb[])"; in.SQL != want {
		t.Errorf("insert:\n%s\nwant\n%s", in.SQL, want)
	}
}
