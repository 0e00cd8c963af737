package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
)

// A NUL in the test-event body is refused at the edge (libs/httpkit) with a
// 400 naming the field, before any fixture or tracking call is made; the
// invalid event_type message would otherwise echo the NUL.
func TestCLITestEventNULIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	s := startStack(t, true, nil)
	prog, key := s.program(nil)
	for _, tc := range []struct{ name, body, want string }{
		{"event_type", `{"event_type":"click\u0000"}`,
			`{"data":null,"error":{"status":400,"name":"BadRequestError","message":"event_type must not contain the NUL character","details":{}}}`},
		{"type", `{"type":"chain\u0000","event_type":"click"}`,
			`{"data":null,"error":{"status":400,"name":"BadRequestError","message":"type must not contain the NUL character","details":{}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.testEvent(key, tc.body)
			if r.status != http.StatusBadRequest || r.raw != tc.want {
				t.Fatalf("%d %s\nwant %s", r.status, r.raw, tc.want)
			}
		})
	}
	if n := s.count(s.accPool, `SELECT count(*) FROM partners WHERE email = $1`, fmt.Sprintf("test-partner+%d@svc.invalid", prog)); n != 0 {
		t.Fatal("a refused test event created fixtures")
	}
	if n := s.count(s.accPool, `SELECT count(*) FROM integration_chain_runs WHERE program_id = $1`, prog); n != 0 {
		t.Fatal("a refused test event counted a chain run")
	}
	if n := s.count(s.trkPool, `SELECT (SELECT count(*) FROM affiliate_click_events WHERE program_id = $1) + (SELECT count(*) FROM lead_events WHERE program_id = $1)`, prog); n != 0 {
		t.Fatal("a refused test event reached tracking")
	}
}
