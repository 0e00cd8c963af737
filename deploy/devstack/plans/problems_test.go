package plans_test

import (
	"strings"
	"testing"
)

// The check on plans of known shapes, without a database.
func TestProblems(t *testing.T) {
	t.Parallel()
	c := catalog{
		rows: map[string]float64{"sales": 100_000, "programs": 10, "visits": 0},
		indexes: map[string]index{
			"sales_pkey":                       {table: "sales", leading: "id"},
			"sales_is_test_transaction_id_key": {table: "sales", leading: "is_test"},
			"sales_reserved":                   {table: "sales", leading: "created_at", partial: true},
			"disputes_open":                    {table: "sales", leading: "sale_id", partial: true},
			"processor_events_awaiting":        {table: "sales", leading: "received_at", partial: true},
			"sales_lower":                      {table: "sales"}, // an expression index
		},
	}
	tests := []struct {
		name string
		plan planNode
		sql  string
		want string // a fragment of the problem; "" for none
	}{
		{"a primary key lookup", planNode{NodeType: "Index Scan", Index: "sales_pkey", IndexCond: "(id = '1'::bigint)"}, "", ""},
		{"a sequential scan of a large table", planNode{NodeType: "Seq Scan", Relation: "sales"}, "", "sequential scan of sales"},
		{"a sequential scan of a bounded table", planNode{NodeType: "Seq Scan", Relation: "programs"}, "", ""},
		{"the leading column left free (no skip scan)",
			planNode{NodeType: "Index Scan", Index: "sales_is_test_transaction_id_key", IndexCond: "(transaction_id = 'x'::text)"}, "",
			"leaves its leading column is_test free"},
		{"an index read whole", planNode{NodeType: "Index Only Scan", Index: "sales_pkey"}, "", "no index condition"},
		{"a partial index read whole", planNode{NodeType: "Index Scan", Index: "sales_reserved"}, "", "full scan of partial index sales_reserved"},
		{"a partial index read by its leading column", planNode{NodeType: "Index Scan", Index: "sales_reserved", IndexCond: "(created_at < now())"}, "", ""},
		{"a small partial index read whole", planNode{NodeType: "Index Scan", Index: "disputes_open"}, "", ""},
		{"a partial index read whole by a listed statement", planNode{NodeType: "Index Only Scan", Index: "processor_events_awaiting"},
			"SELECT count(*), min(received_at) FROM processor_events WHERE outcome = 'awaiting_payment'", ""},
		{"a partial index read whole by another statement", planNode{NodeType: "Index Only Scan", Index: "processor_events_awaiting"},
			"SELECT id FROM processor_events WHERE outcome = 'awaiting_payment'", "full scan of partial index processor_events_awaiting"},
		{"an expression index", planNode{NodeType: "Bitmap Index Scan", Index: "sales_lower", IndexCond: "(lower(x) = 'y')"}, "", ""},
		{"a scan nested under a join",
			planNode{NodeType: "Nested Loop", Plans: []planNode{{NodeType: "Index Scan", Index: "sales_pkey", IndexCond: "(id = 1)"}, {NodeType: "Seq Scan", Relation: "sales"}}}, "",
			"sequential scan of sales"},
		{"a read of a table the test leaves empty", planNode{NodeType: "Seq Scan", Relation: "visits"}, "", "leaves nearly empty"},
		{"an insert into a table the test leaves empty", planNode{NodeType: "ModifyTable", Relation: "visits"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(c.problems(tt.plan, tt.sql), "; ")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("problems %q, want %q", got, tt.want)
			}
		})
	}
}
