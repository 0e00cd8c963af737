package httpapi

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svc-dev/svc/services/commissions/internal/console"
)

func TestCursorsRoundTrip(t *testing.T) {
	c := console.Cursor{CreatedAt: time.Date(2026, 11, 28, 10, 0, 0, 123456000, time.UTC), ID: 42}
	got, ok := decodeCursor(*encodeCursor(&c))
	if !ok || !got.CreatedAt.Equal(c.CreatedAt) || got.ID != 42 {
		t.Fatalf("%+v %v", got, ok)
	}
	if encodeCursor(nil) != nil || encodeID(0) != nil {
		t.Fatal("the last page has a cursor")
	}
	if id, ok := decodeIDCursor(*encodeID(7)); !ok || id != 7 {
		t.Fatalf("%d %v", id, ok)
	}
	for _, bad := range []string{"", "nope", "MTIz", "MS4w", "eC55", "!!"} {
		if _, ok := decodeCursor(bad); ok {
			t.Errorf("decodeCursor(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"", "LTE", "eA", "%%"} {
		if _, ok := decodeIDCursor(bad); ok {
			t.Errorf("decodeIDCursor(%q) accepted", bad)
		}
	}
}

func TestWantsCSV(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                                 false,
		"text/csv":                         true,
		"text/csv; charset=utf-8":          true,
		"application/json, text/csv":       false,
		"text/csv;q=0.9, application/json": true,
		"*/*":                              false,
		"text/html":                        false,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Accept", accept)
		if got := wantsCSV(r); got != want {
			t.Errorf("Accept %q: %v, want %v", accept, got, want)
		}
	}
}

func TestCellGuardsFormulas(t *testing.T) {
	for in, want := range map[string]string{"ord_1": "ord_1", "=1+1": "'=1+1", "+x": "'+x", "-2": "'-2", "@a": "'@a", "\tx": "'\tx", "": ""} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
}
