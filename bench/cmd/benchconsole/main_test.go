package main

import (
	"io"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	env := func(string) string { return "" }
	o, err := parseFlags(nil, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.partners != 10000 || o.commissions != 1000000 || o.clients != 8 || o.duration != 10*time.Second {
		t.Fatalf("defaults: %+v", o)
	}
	for _, bad := range [][]string{{"-clients=0"}, {"-partners=0"}, {"-commissions=-1"}, {"-duration=0s"}, {"-depth=0"}, {"-db-max-conns=0"}} {
		if _, err := parseFlags(bad, env, io.Discard); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}
