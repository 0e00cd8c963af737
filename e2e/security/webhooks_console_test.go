package security_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// consoleWebhooks is the console's webhook endpoints fixture (issue 22):
// program A with its owner and a reader (tracking:read only), a second
// tenant's program B with its owner.
type consoleWebhooks struct {
	e                     *env
	a, b                  int64
	owner, reader, owner2 string
	// The users' ids, to sign them in again (signIn) once a test's clock
	// has moved past their sessions' 12 hours.
	ownerID, readerID, owner2ID int64
}

func (e *env) consoleWebhooks() *consoleWebhooks {
	e.t.Helper()
	f := &consoleWebhooks{e: e, a: e.keyedProgram("HooksA", nil).id, b: e.keyedProgram("HooksB", nil).id}
	person := func(email string, prog int64, permissions ...string) int64 {
		uid := e.id("POST", "/admin/v1/users", map[string]any{"email": email})
		e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/members", prog), map[string]any{"user_id": uid, "active": true, "permissions": permissions})
		return uid
	}
	f.ownerID = person("owner@hooksa.example", f.a, "tracking:read", "tracking:write")
	f.readerID = person("reader@hooksa.example", f.a, "tracking:read")
	f.owner2ID = person("owner@hooksb.example", f.b, "tracking:read", "tracking:write")
	f.signIn()
	e.sync()
	return f
}

// signIn gives each user of the fixture a new session.
func (f *consoleWebhooks) signIn() {
	f.e.t.Helper()
	f.owner, f.reader, f.owner2 = f.e.session(f.ownerID), f.e.session(f.readerID), f.e.session(f.owner2ID)
}

// session is a new dashboard session of the user (the admin route).
func (e *env) session(uid int64) string {
	e.t.Helper()
	tok, _ := e.admin("POST", "/admin/v1/sessions", map[string]any{"user_id": uid})["token"].(string)
	if tok == "" {
		e.t.Fatal("no session token")
	}
	return tok
}

// call sends one request to a program's webhook route (suffix after
// /api/v1/programs/{prog}/webhooks) as the session token's user.
func (f consoleWebhooks) call(token, method string, prog int64, suffix string, body any) reply {
	f.e.t.Helper()
	return f.e.client("203.0.113.120").withKey(token).do(method, fmt.Sprintf("/api/v1/programs/%d/webhooks%s", prog, suffix), body)
}

func (f consoleWebhooks) rows(query string, args ...any) int {
	f.e.t.Helper()
	return f.e.countRows("webhooks", query, args...)
}

func TestWebhooksConsole(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{"SETTINGS_RATE_LIMIT": "1000"}, "accounts", "webhooks")
	f := e.consoleWebhooks()
	a, b := f.a, f.b

	// The receiver is never called here (the dispatcher is not this
	// test's); a loopback http:// URL is allowed in the stack
	// (WEBHOOKS_ALLOW_PRIVATE).
	created := f.call(f.owner, "POST", a, "", map[string]any{"url": "http://127.0.0.1:9/hooks", "events": []string{"sale.created", "commission.reversed"},
		"description": "CRM", "include_test": true}).want(t, 201)
	id := int64(created.get("data", "id").(float64))
	sec := created.str("data", "secret")
	if !strings.HasPrefix(sec, "whsec_") || created.get("data", "enabled") != true || created.get("data", "include_test") != true {
		t.Fatalf("create: %s", created.Raw)
	}
	if created.Header.Get("X-RateLimit-Limit") != "1000" {
		t.Fatalf("rate headers: %v", created.Header)
	}
	one := fmt.Sprintf("/%d", id)
	secrets := []string{sec}

	t.Run("the owner and a reader list it, never with its secret", func(t *testing.T) {
		for _, tok := range []string{f.owner, f.reader} {
			l := f.call(tok, "GET", a, "", nil).want(t, 200)
			items, _ := l.get("data").([]any)
			if len(items) != 1 || items[0].(map[string]any)["id"] != float64(id) || strings.Contains(l.Raw, "whsec_") || strings.Contains(l.Raw, `"secret"`) {
				t.Fatalf("list: %s", l.Raw)
			}
		}
	})

	t.Run("patch", func(t *testing.T) {
		p := f.call(f.owner, "PATCH", a, one, map[string]any{"enabled": false, "events": []string{"payout.paid"}}).want(t, 200)
		if p.get("data", "enabled") != false || p.str("data", "disabled_reason") != "manual" || strings.Contains(p.Raw, "whsec_") {
			t.Fatalf("patch: %s", p.Raw)
		}
		p = f.call(f.owner, "PATCH", a, one, map[string]any{"enabled": true, "description": "CRM (prod)"}).want(t, 200)
		if p.get("data", "enabled") != true || p.get("data", "disabled_reason") != nil || p.str("data", "description") != "CRM (prod)" {
			t.Fatalf("patch: %s", p.Raw)
		}
	})

	t.Run("rotate: a new secret, the previous one keeps signing", func(t *testing.T) {
		r := f.call(f.owner, "POST", a, one+"/secret", nil).want(t, 200)
		s := r.str("data", "secret")
		if !strings.HasPrefix(s, "whsec_") || s == sec {
			t.Fatalf("rotate: %s", r.Raw)
		}
		secrets = append(secrets, s)
		if n := f.rows(`SELECT count(*) FROM webhooks.endpoint_secrets WHERE endpoint_id = $1 AND expires_at IS NULL`, id); n != 1 {
			t.Fatalf("%d current secrets", n)
		}
		if n := f.rows(`SELECT count(*) FROM webhooks.endpoint_secrets WHERE endpoint_id = $1 AND expires_at IS NOT NULL`, id); n != 1 {
			t.Fatalf("%d rotated-out secrets", n)
		}
	})

	var deliveryID int64
	t.Run("test writes a ping and its delivery", func(t *testing.T) {
		r := f.call(f.owner, "POST", a, one+"/test", nil).want(t, 202)
		eventID := r.str("data", "event_id")
		deliveryID = int64(r.get("data", "delivery_id").(float64))
		if n := f.rows(`SELECT count(*) FROM webhooks.events WHERE id = $1 AND type = 'ping' AND program_id = $2`, eventID, a); n != 1 {
			t.Fatal("no ping event")
		}
		if n := f.rows(`SELECT count(*) FROM webhooks.deliveries WHERE id = $1 AND endpoint_id = $2 AND event_id = $3`, deliveryID, id, eventID); n != 1 {
			t.Fatal("no ping delivery to this endpoint")
		}
	})

	t.Run("the delivery log lists it; a reader reads it", func(t *testing.T) {
		for _, tok := range []string{f.owner, f.reader} {
			l := f.call(tok, "GET", a, one+"/deliveries?limit=10", nil).want(t, 200)
			items, _ := l.get("data").([]any)
			if len(items) != 1 || items[0].(map[string]any)["id"] != float64(deliveryID) || items[0].(map[string]any)["event_type"] != "ping" {
				t.Fatalf("deliveries: %s", l.Raw)
			}
		}
		// Filtered by a status it does not have: empty, no next page.
		l := f.call(f.owner, "GET", a, one+"/deliveries?status=failed", nil).want(t, 200)
		if items, _ := l.get("data").([]any); len(items) != 0 || l.get("next_cursor") != nil {
			t.Fatalf("failed deliveries: %s", l.Raw)
		}
	})

	t.Run("retry", func(t *testing.T) {
		r := f.call(f.owner, "POST", a, fmt.Sprintf("%s/deliveries/%d/retry", one, deliveryID), nil).want(t, 202)
		if r.str("data", "status") != "pending" || r.get("data", "id") != float64(deliveryID) {
			t.Fatalf("retry: %s", r.Raw)
		}
	})

	t.Run("a reader can read but not change", func(t *testing.T) {
		for _, c := range []struct {
			method, suffix string
			body           any
		}{
			{"POST", "", map[string]any{"url": "http://127.0.0.1:9/x", "events": []string{"sale.created"}}},
			{"PATCH", one, map[string]any{"enabled": false}},
			{"DELETE", one, nil},
			{"POST", one + "/secret", nil},
			{"POST", one + "/test", nil},
			{"POST", fmt.Sprintf("%s/deliveries/%d/retry", one, deliveryID), nil},
		} {
			r := f.call(f.reader, c.method, a, c.suffix, c.body).want(t, 403)
			if strings.Contains(r.Raw, "whsec_") {
				t.Fatal(r.Raw)
			}
		}
	})

	t.Run("another tenant gets 403 on every route of program A", func(t *testing.T) {
		before := f.rows(`SELECT count(*) FROM webhooks.endpoints`) + f.rows(`SELECT count(*) FROM webhooks.endpoint_secrets`) + f.rows(`SELECT count(*) FROM webhooks.deliveries`)
		for _, c := range []struct {
			method, suffix string
			body           any
		}{
			{"GET", "", nil},
			{"POST", "", map[string]any{"url": "http://127.0.0.1:9/x", "events": []string{"sale.created"}}},
			{"PATCH", one, map[string]any{"enabled": false}},
			{"DELETE", one, nil},
			{"POST", one + "/secret", nil},
			{"POST", one + "/test", nil},
			{"GET", one + "/deliveries", nil},
			{"POST", fmt.Sprintf("%s/deliveries/%d/retry", one, deliveryID), nil},
		} {
			r := f.call(f.owner2, c.method, a, c.suffix, c.body).want(t, 403)
			if r.str("error", "message") != "You do not have access to this program" {
				t.Fatalf("%s %s: %s", c.method, c.suffix, r.Raw)
			}
		}
		// Through its own program id, A's endpoint does not exist.
		for _, c := range []struct {
			method, suffix string
			body           any
		}{
			{"PATCH", one, map[string]any{"enabled": false}},
			{"DELETE", one, nil},
			{"POST", one + "/secret", nil},
			{"POST", one + "/test", nil},
			{"GET", one + "/deliveries", nil},
			{"POST", fmt.Sprintf("%s/deliveries/%d/retry", one, deliveryID), nil},
		} {
			f.call(f.owner2, c.method, b, c.suffix, c.body).want(t, 404)
		}
		l := f.call(f.owner2, "GET", b, "", nil).want(t, 200)
		if items, _ := l.get("data").([]any); len(items) != 0 {
			t.Fatalf("B lists A's endpoint: %s", l.Raw)
		}
		after := f.rows(`SELECT count(*) FROM webhooks.endpoints`) + f.rows(`SELECT count(*) FROM webhooks.endpoint_secrets`) + f.rows(`SELECT count(*) FROM webhooks.deliveries`)
		if after != before {
			t.Fatalf("refused requests wrote rows: %d, was %d", after, before)
		}
		if n := f.rows(`SELECT count(*) FROM webhooks.endpoints WHERE id = $1 AND enabled`, id); n != 1 {
			t.Fatal("another tenant changed A's endpoint")
		}
	})

	t.Run("an unknown program is 404, no session 401", func(t *testing.T) {
		f.call(f.owner, "GET", 999999, "", nil).want(t, 404)
		e.client("203.0.113.121").do("GET", fmt.Sprintf("/api/v1/programs/%d/webhooks", a), nil).want(t, 401)
	})

	t.Run("bad input is 400 with the field", func(t *testing.T) {
		for _, c := range []struct {
			name, method, suffix string
			body                 any
			field                string
		}{
			{"url missing", "POST", "", map[string]any{"events": []string{"sale.created"}}, "url"},
			{"url relative", "POST", "", map[string]any{"url": "/hooks", "events": []string{"sale.created"}}, "url"},
			{"url of another scheme", "POST", "", map[string]any{"url": "ftp://x.example/h", "events": []string{"sale.created"}}, "url"},
			{"url too long", "POST", "", map[string]any{"url": "https://x.example/" + strings.Repeat("a", 2100), "events": []string{"sale.created"}}, "url"},
			{"url with credentials", "POST", "", map[string]any{"url": "https://user:pw@x.example/h", "events": []string{"sale.created"}}, "url"},
			{"url with a user name", "PATCH", one, map[string]any{"url": "https://user@x.example/h"}, "url"},
			{"no events", "POST", "", map[string]any{"url": "https://x.example/h", "events": []string{}}, "events"},
			{"an unknown event", "POST", "", map[string]any{"url": "https://x.example/h", "events": []string{"sale.exploded"}}, "events"},
			{"ping is not subscribable", "POST", "", map[string]any{"url": "https://x.example/h", "events": []string{"ping"}}, "events"},
			{"a duplicate event", "POST", "", map[string]any{"url": "https://x.example/h", "events": []string{"sale.created", "sale.created"}}, "events"},
			{"a long description", "POST", "", map[string]any{"url": "https://x.example/h", "events": []string{"sale.created"}, "description": strings.Repeat("d", 501)}, "description"},
			{"an unknown field", "POST", "", map[string]any{"url": "https://x.example/h", "events": []string{"sale.created"}, "secret": "whsec_mine"}, "secret"},
			{"a NUL", "POST", "", `{"url":"https://x.example/h","events":["sale.created"],"description":"a\u0000b"}`, "description"},
			{"not UTF-8", "POST", "", []byte("{\"url\":\"https://x.example/\xff\",\"events\":[\"sale.created\"]}"), "body"},
			{"an empty patch", "PATCH", one, map[string]any{}, "body"},
			{"enabled not a boolean", "PATCH", one, map[string]any{"enabled": "yes"}, "enabled"},
			{"a status of no delivery", "GET", one + "/deliveries?status=lost", nil, "status"},
			{"a forged cursor", "GET", one + "/deliveries?cursor=" + url.QueryEscape("not a cursor"), nil, "cursor"},
		} {
			r := f.call(f.owner, c.method, a, c.suffix, c.body)
			if r.Status != 400 || r.str("error", "name") != "BadRequestError" {
				t.Fatalf("%s: %d %s", c.name, r.Status, r.Raw)
			}
			if got, _ := r.get("error", "details", "field").(string); got != c.field {
				t.Fatalf("%s: field %q, want %q: %s", c.name, got, c.field, r.Raw)
			}
		}
		// A URL that is not UTF-8 is refused in the route's envelope, with
		// the limiter's headers, before the route runs.
		r := f.call(f.owner, "GET", a, one+"/deliveries?cursor=%ff", nil)
		if r.Status != 400 || r.str("error", "name") != "BadRequestError" || r.Header.Get("X-RateLimit-Limit") == "" {
			t.Fatalf("a URL that is not UTF-8: %d %v %s", r.Status, r.Header, r.Raw)
		}
		if n := f.rows(`SELECT count(*) FROM webhooks.endpoints WHERE program_id = $1`, a); n != 1 {
			t.Fatalf("%d endpoints after refusals", n)
		}
	})

	t.Run("delete takes its secrets and deliveries with it", func(t *testing.T) {
		r := f.call(f.owner, "DELETE", a, one, nil).want(t, 204)
		if r.Raw != "" {
			t.Fatalf("204 with a body: %q", r.Raw)
		}
		for _, q := range []string{`SELECT count(*) FROM webhooks.endpoints WHERE id = $1`, `SELECT count(*) FROM webhooks.endpoint_secrets WHERE endpoint_id = $1`,
			`SELECT count(*) FROM webhooks.deliveries WHERE endpoint_id = $1`} {
			if n := f.rows(q, id); n != 0 {
				t.Fatalf("%s: %d left", q, n)
			}
		}
		f.call(f.owner, "GET", a, one+"/deliveries", nil).want(t, 404)
		l := f.call(f.owner, "GET", a, "", nil).want(t, 200)
		for _, s := range secrets {
			if strings.Contains(l.Raw, s) {
				t.Fatal("a secret in a GET answer")
			}
		}
	})
}

// Issue 22's "an endpoint failing everything for 5 days is disabled and the
// brand is told": the real dispatcher, a receiver answering 500 and the
// stack on an injected clock moved 5 days on; the notifications route then
// lists it, through the gateway and in the document's shape, to the
// program's readers and to no one else, and keeps it once the endpoint is
// deleted.
func TestWebhooksConsoleNotifications(t *testing.T) {
	t.Parallel()
	clock := platformtest.NewClock(time.Now().UTC())
	e := startOn(t, clock, map[string]string{"SETTINGS_RATE_LIMIT": "1000", "DELIVERY_POLL_INTERVAL": "50ms"}, "accounts", "webhooks")
	f := e.consoleWebhooks()
	a, b := f.a, f.b
	// A member of A whose permissions do not include tracking:read.
	stranger := e.id("POST", "/admin/v1/users", map[string]any{"email": "billing@hooksa.example"})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/members", a), map[string]any{"user_id": stranger, "active": true, "permissions": []string{"billing:read"}})
	e.sync()

	var hits atomic.Int64
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "down for maintenance", http.StatusInternalServerError)
	}))
	t.Cleanup(recv.Close)
	hookURL := recv.URL + "/hooks"
	id := int64(f.call(f.owner, "POST", a, "", map[string]any{"url": hookURL, "events": []string{"sale.created"}}).want(t, 201).get("data", "id").(float64))
	// Another tenant's endpoint, never failing: B has nothing to be told.
	f.call(f.owner2, "POST", b, "", map[string]any{"url": "http://127.0.0.1:9/b", "events": []string{"sale.created"}}).want(t, 201)

	empty := f.call(f.owner, "GET", a, "/notifications", nil).want(t, 200)
	if items, _ := empty.get("data").([]any); len(items) != 0 || empty.get("next_cursor") != nil {
		t.Fatalf("notifications before any failure: %s", empty.Raw)
	}

	// A ping, due now: its first attempt fails (the endpoint's failing run
	// starts), then 5 days pass and the next attempt disables it.
	f.call(f.owner, "POST", a, fmt.Sprintf("/%d/test", id), nil).want(t, 202)
	waitFor(t, "the ping's first failed attempt recorded", func() bool {
		l := f.call(f.owner, "GET", a, fmt.Sprintf("/%d/deliveries", id), nil).want(t, 200)
		items, _ := l.get("data").([]any)
		return len(items) == 1 && items[0].(map[string]any)["last_status"] == float64(500)
	})
	clock.Advance(5*24*time.Hour + time.Hour)
	f.signIn()
	var disabled map[string]any
	waitFor(t, "the endpoint disabled as failing", func() bool {
		items, _ := f.call(f.owner, "GET", a, "", nil).want(t, 200).get("data").([]any)
		disabled, _ = items[0].(map[string]any)
		return disabled["disabled_reason"] == "failing"
	})
	if disabled["enabled"] != false || hits.Load() < 2 {
		t.Fatalf("disabled endpoint %v after %d attempts", disabled, hits.Load())
	}

	t.Run("the owner and a reader are told, newest first", func(t *testing.T) {
		for _, tok := range []string{f.owner, f.reader} {
			l := f.call(tok, "GET", a, "/notifications", nil).want(t, 200)
			items, _ := l.get("data").([]any)
			if len(items) != 1 || l.get("next_cursor") != nil {
				t.Fatalf("notifications: %s", l.Raw)
			}
			n := items[0].(map[string]any)
			if n["kind"] != "endpoint_disabled" || n["endpoint_id"] != float64(id) || n["url"] != hookURL || n["created_at"] != disabled["disabled_at"] {
				t.Fatalf("notification %v, endpoint %v", n, disabled)
			}
		}
	})

	t.Run("another tenant gets 403 and sees none of it", func(t *testing.T) {
		for _, suffix := range []string{"/notifications", "/notifications?cursor=" + url.QueryEscape("not a cursor")} {
			r := f.call(f.owner2, "GET", a, suffix, nil).want(t, 403)
			if r.str("error", "message") != "You do not have access to this program" || strings.Contains(r.Raw, recv.URL) {
				t.Fatalf("%s: %s", suffix, r.Raw)
			}
		}
		l := f.call(f.owner2, "GET", b, "/notifications", nil).want(t, 200)
		if items, _ := l.get("data").([]any); len(items) != 0 || strings.Contains(l.Raw, recv.URL) {
			t.Fatalf("B's notifications: %s", l.Raw)
		}
	})

	t.Run("a member without tracking:read 403, no session 401, an unknown program 404", func(t *testing.T) {
		r := f.call(e.session(stranger), "GET", a, "/notifications", nil).want(t, 403)
		if r.str("error", "message") != "You do not have access to this program" {
			t.Fatal(r.Raw)
		}
		e.client("203.0.113.122").do("GET", fmt.Sprintf("/api/v1/programs/%d/webhooks/notifications", a), nil).want(t, 401)
		f.call(f.owner, "GET", 999999, "/notifications", nil).want(t, 404)
	})

	t.Run("a bad cursor or limit is 400 with the field", func(t *testing.T) {
		for _, c := range []struct{ query, field, message string }{
			{"?cursor=" + url.QueryEscape("not a cursor"), "cursor", "cursor must be the next_cursor of a previous page"},
			{"?limit=0", "limit", "limit must be a whole number from 1 to 100"},
			{"?status=failed", "status", ""},
		} {
			r := f.call(f.owner, "GET", a, "/notifications"+c.query, nil).want(t, 400)
			if r.str("error", "name") != "BadRequestError" || r.str("error", "details", "field") != c.field || (c.message != "" && r.str("error", "message") != c.message) {
				t.Fatalf("%s: %s", c.query, r.Raw)
			}
		}
	})

	t.Run("deleting the endpoint keeps what the brand was told", func(t *testing.T) {
		f.call(f.owner, "DELETE", a, fmt.Sprintf("/%d", id), nil).want(t, 204)
		l := f.call(f.reader, "GET", a, "/notifications", nil).want(t, 200)
		items, _ := l.get("data").([]any)
		if len(items) != 1 {
			t.Fatalf("after the delete: %s", l.Raw)
		}
		n := items[0].(map[string]any)
		if u, present := n["url"]; !present || u != nil || n["endpoint_id"] != float64(id) {
			t.Fatalf("after the delete: %s", l.Raw)
		}
	})
}
