package security_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// consoleWebhooks is the console's webhook endpoints fixture (issue 22):
// program A with its owner and a reader (tracking:read only), a second
// tenant's program B with its owner.
type consoleWebhooks struct {
	e                     *env
	a, b                  int64
	owner, reader, owner2 string
}

func (e *env) consoleWebhooks() consoleWebhooks {
	e.t.Helper()
	f := consoleWebhooks{e: e, a: e.keyedProgram("HooksA", nil).id, b: e.keyedProgram("HooksB", nil).id}
	person := func(email string, prog int64, permissions ...string) string {
		uid := e.id("POST", "/admin/v1/users", map[string]any{"email": email})
		e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/members", prog), map[string]any{"user_id": uid, "active": true, "permissions": permissions})
		tok, _ := e.admin("POST", "/admin/v1/sessions", map[string]any{"user_id": uid})["token"].(string)
		if tok == "" {
			e.t.Fatal("no session token")
		}
		return tok
	}
	f.owner = person("owner@hooksa.example", f.a, "tracking:read", "tracking:write")
	f.reader = person("reader@hooksa.example", f.a, "tracking:read")
	f.owner2 = person("owner@hooksb.example", f.b, "tracking:read", "tracking:write")
	e.sync()
	return f
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
