package enrich

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

func TestUACacheStaysBounded(t *testing.T) {
	tests := []struct {
		name string
		size int
		want int
	}{
		{"explicit size", 16, 16},
		{"default size", 0, DefaultUACacheSize},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(Config{UACacheSize: tc.size})
			if err != nil {
				t.Fatal(err)
			}
			long := strings.Repeat("x", 4*maxUALen)
			for i := range tc.want * 3 {
				// Distinct, over-long UAs: what a bot rotating agents sends.
				e.Enrich(netip.Addr{}, "Mozilla/5.0 bot-"+strconv.Itoa(i)+" "+long)
			}
			if n := e.uaCache.Len(); n != tc.want {
				t.Errorf("cache holds %d entries, want %d", n, tc.want)
			}
			for _, k := range e.uaCache.Keys() {
				if len(k) > maxUALen {
					t.Fatalf("cache key of %d bytes, want at most %d", len(k), maxUALen)
				}
			}
		})
	}
}

func TestUACacheDisabled(t *testing.T) {
	e, err := New(Config{UACacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	if e.uaCache != nil {
		t.Fatal("negative UACacheSize: want no cache")
	}
}
