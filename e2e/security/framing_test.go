package security_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/auth/oidctest"
)

// Issue 23, "Bad input is never a 5xx": "A request body whose chunked
// framing is broken (an invalid chunk size) → 500 on lead, sale, visit and
// the CLI callback. A body that cannot be read is the client's fault: 400,
// nothing written."
//
// The 500s came from the client closing its side of the connection, which
// net/http turns into a cancelled request context: the route's queries then
// failed. A body cut short before the client closes is a 400 in the
// route's own envelope and writes nothing; a whole request followed by the
// close is answered as if the client had stayed (httpkit.OutliveHangup,
// applied by the platform to every route).
func TestBrokenBodyFraming(t *testing.T) {
	vars := oidctest.Start(t).Env()
	e := start(t, vars, "accounts", "tracking", "commissions")
	fx := newFuzzFixture(e)
	addr := strings.TrimPrefix(e.Gateway, "http://")
	key := [2]string{"Authorization", "Bearer " + fx.key}
	session := [2]string{"Authorization", "Bearer " + fx.session}
	clickID := e.client("198.51.100.7").do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://brand.example/?via=FUZZ"}).want(t, 200).str("click_id")
	if clickID == "" {
		t.Fatal("no click_id")
	}
	type route struct {
		name, path string
		method     string
		auth       [2]string
		body       func(id string) string // a valid body marked with id
		written    string                 // counts rows marked with $1 (none: the route writes nothing to check)
		code       string                 // error.code of the route's 400s, if it has codes
	}
	routes := []route{
		{name: "lead", method: "POST", path: "/api/v1/track/lead", auth: key,
			body: func(id string) string { // a click becomes a lead once: a new click each
				c := e.client("198.51.100.8").do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://brand.example/?via=FUZZ"}).want(t, 200)
				return fmt.Sprintf(`{"click_id":%q,"customer_key":%q}`, c.str("click_id"), id)
			},
			written: "SELECT count(*) FROM tracking.lead_events WHERE customer_key = $1"},
		{name: "sale", method: "POST", path: "/api/v1/track/sale", auth: key, code: "invalid_request",
			body: func(id string) string {
				return fmt.Sprintf(`{"transaction_id":%q,"amount_cents":1000,"currency":"USD","click_id":%q}`, id, clickID)
			},
			written: "SELECT count(*) FROM commissions.sales WHERE transaction_id = $1"},
		{name: "visit", method: "POST", path: "/api/v1/track/visit",
			body: func(id string) string {
				return fmt.Sprintf(`{"program_id":%s,"page_url":"https://brand.example/","session_id":%q}`, fx.params["program"], id)
			},
			written: "SELECT count(*) FROM tracking.visits WHERE session_id = $1"},
		{name: "CLI callback", method: "POST", path: "/api/v1/cli/auth/callback",
			body: func(id string) string { return fmt.Sprintf(`{"state":%q,"id_token":"a.b.c"}`, id) }},
		{name: "settings", method: "PATCH", path: "/api/v1/programs/" + fx.params["spare_program"] + "/settings", auth: session,
			body: func(id string) string {
				return fmt.Sprintf(`{"allowed_origins":["https://%s.example"]}`, strings.ToLower(id))
			},
			written: "SELECT count(*) FROM accounts.programs WHERE $1 = ANY(allowed_origins)"},
	}
	count := func(query, id string) int {
		t.Helper()
		if query == "" {
			return 0
		}
		arg := id
		if strings.Contains(query, "allowed_origins") {
			arg = "https://" + strings.ToLower(id) + ".example"
		}
		var pool = e.Stack.Instance("tracking").Platform().Pool
		switch {
		case strings.Contains(query, "commissions."):
			pool = e.Stack.Instance("commissions").Platform().Pool
		case strings.Contains(query, "accounts."):
			pool = e.Stack.Instance("accounts").Platform().Pool
		}
		var n int
		if err := pool.QueryRow(context.Background(), query, arg).Scan(&n); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return n
	}
	seq := 0
	for _, rt := range routes {
		request := func(headers [][2]string, body string, halfClose bool) (int, map[string]any, string) {
			t.Helper()
			seq++
			h := [][2]string{{"Host", "gateway.test"}, {"X-Forwarded-For", "198.51.100." + strconv.Itoa(10+seq)}, {"Content-Type", "application/json"}}
			if rt.auth[0] != "" {
				h = append(h, rt.auth)
			}
			status, raw, err := send(addr, fuzzRequest{raw: append(wire(rt.method, rt.path, append(h, headers...), nil), body...), halfClose: halfClose})
			if err != nil {
				t.Fatalf("%s: %v", rt.name, err)
			}
			var env map[string]any
			_ = json.Unmarshal([]byte(raw), &env)
			return status, env, raw
		}
		t.Run(rt.name+": a body cut short is a 400 and writes nothing", func(t *testing.T) {
			for _, c := range []struct {
				name    string
				headers [][2]string
				body    func(b string) string
			}{
				{"invalid chunk size", [][2]string{{"Transfer-Encoding", "chunked"}}, func(b string) string {
					return fmt.Sprintf("%x\r\n%s\r\nzz\r\n}\r\n0\r\n\r\n", len(b)-1, b[:len(b)-1])
				}},
				{"chunked body ending with the connection", [][2]string{{"Transfer-Encoding", "chunked"}}, func(b string) string {
					return fmt.Sprintf("%x\r\n%s\r\n", len(b), b)
				}},
				{"Content-Length beyond the body", nil, func(b string) string { return b }},
			} {
				id := uniqueID("CUT")
				body := rt.body(id)
				headers := c.headers
				if headers == nil {
					headers = [][2]string{{"Content-Length", strconv.Itoa(len(body) + 10)}}
				}
				status, env, raw := request(headers, c.body(body), true)
				errObj, _ := env["error"].(map[string]any)
				if status != 400 || errObj["message"] != "Request body could not be read" {
					t.Errorf("%s: %d %s, want 400 Request body could not be read", c.name, status, raw)
				}
				if rt.code != "" && errObj["code"] != rt.code {
					t.Errorf("%s: error.code %v, want %s", c.name, errObj["code"], rt.code)
				}
				if n := count(rt.written, id); n != 0 {
					t.Errorf("%s: %d rows written", c.name, n)
				}
			}
		})
		t.Run(rt.name+": a whole request, then the client's side closed, is answered as usual", func(t *testing.T) {
			stayID, goneID := uniqueID("STAY"), uniqueID("GONE")
			stay := rt.body(stayID)
			want, _, wantRaw := request([][2]string{{"Content-Length", strconv.Itoa(len(stay))}}, stay, false)
			if want >= 500 {
				t.Fatalf("a plain request: %d %s", want, wantRaw)
			}
			gone := rt.body(goneID)
			status, _, raw := request([][2]string{{"Content-Length", strconv.Itoa(len(gone))}}, gone, true)
			if status != want {
				t.Errorf("%d %s, want %d as for the same request from a client that stayed", status, raw, want)
			}
			if rt.written != "" && want < 300 {
				if n := count(rt.written, goneID); n != 1 {
					t.Errorf("%d rows written, want 1", n)
				}
			}
		})
	}
}
