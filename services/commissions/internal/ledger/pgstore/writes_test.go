package pgstore

import (
	"reflect"
	"strings"
	"testing"
)

func TestBulkStatements(t *testing.T) {
	if got, want := setSalesRefunded.SQL, "UPDATE sales SET refunded_cents = ($2::bigint[])[array_position($1::bigint[], id)] WHERE id = ANY($1::bigint[])"; got != want {
		t.Errorf("update:\n%s\nwant\n%s", got, want)
	}
	if got := completeSales.Types; !reflect.DeepEqual(got, []string{"bigint", "bigint", "bigint", "text", "text"}) {
		t.Errorf("completion types %v", got)
	}
	if !strings.HasPrefix(completeSales.SQL, "UPDATE sales SET reserved = false, customer_id = ($2::bigint[])") {
		t.Errorf("completion: %s", completeSales.SQL)
	}
	if got, want := insertNotifications.SQL, "INSERT INTO notifications (id, recipient_kind, recipient_id, kind, payload, created_at) SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::jsonb[], $6::timestamptz[])"; got != want {
		t.Errorf("insert:\n%s\nwant\n%s", got, want)
	}
}
