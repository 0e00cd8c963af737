package security_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// consoleKeys is a program A with its owner (tracking:read and write), a
// reader (tracking:read), a non-member, and a second tenant: program B of
// another advertiser with its own owner. Each person has a dashboard
// session; A has a partner's link (clicks), B an admin-issued key.
type consoleKeys struct {
	e                               *env
	a, b                            keyedProgram
	owner, reader, outsider, ownerB string
}

func (e *env) consoleKeys() consoleKeys {
	e.t.Helper()
	f := consoleKeys{e: e, a: e.keyedProgram("KeysA", nil), b: e.keyedProgram("KeysB", nil)}
	person := func(email string, prog int64, permissions ...string) string {
		uid := e.id("POST", "/admin/v1/users", map[string]any{"email": email})
		if prog > 0 {
			e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/members", prog), map[string]any{"user_id": uid, "active": true, "permissions": permissions})
		}
		tok, _ := e.admin("POST", "/admin/v1/sessions", map[string]any{"user_id": uid})["token"].(string)
		if tok == "" {
			e.t.Fatal("no session token")
		}
		return tok
	}
	f.owner = person("owner@keysa.example", f.a.id, "tracking:read", "tracking:write")
	f.reader = person("reader@keysa.example", f.a.id, "tracking:read")
	f.outsider = person("outsider@elsewhere.example", 0)
	f.ownerB = person("owner@keysb.example", f.b.id, "tracking:read", "tracking:write")
	partner := e.id("POST", "/admin/v1/partners", map[string]any{"name": "P", "email": "p@keysa-partners.example"})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", f.a.id), map[string]any{"partner_id": partner, "approved": true})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/links", f.a.id), map[string]any{"partner_id": partner, "code": "KEYSA", "active": true})
	e.sync()
	return f
}

// console calls a key route of program prog with a session token and
// notes the catalog sequence of a change for e.sync.
func (f consoleKeys) console(token, method string, prog int64, suffix string, body any) reply {
	f.e.t.Helper()
	r := f.e.client("203.0.113.70").withKey(token).do(method, fmt.Sprintf("/api/v1/programs/%d/keys%s", prog, suffix), body)
	if n, err := strconv.ParseInt(r.Header.Get("X-Catalog-Seq"), 10, 64); err == nil {
		for cur := f.e.seq.Load(); n > cur && !f.e.seq.CompareAndSwap(cur, n); cur = f.e.seq.Load() {
		}
	}
	return r
}

// keyRow is accounts' stored row of a key.
type keyRow struct {
	hash                 []byte
	prefix, last4        string
	revoked, marked, use bool
}

func (f consoleKeys) row(id int64) keyRow {
	f.e.t.Helper()
	var r keyRow
	if err := f.e.Stack.Instance("accounts").Platform().Pool.QueryRow(context.Background(), `SELECT key_hash, prefix, coalesce(last4, ''),
		revoked_at IS NOT NULL, rotation_marked_at IS NOT NULL, last_used_at IS NOT NULL FROM accounts.api_keys WHERE id = $1`, id).
		Scan(&r.hash, &r.prefix, &r.last4, &r.revoked, &r.marked, &r.use); err != nil {
		f.e.t.Fatalf("key %d: %v", id, err)
	}
	return r
}

func (f consoleKeys) keyCount(prog int64) int {
	return f.e.countRows("accounts", "SELECT count(*) FROM accounts.api_keys WHERE program_id = $1", prog)
}

func (f consoleKeys) events() int {
	return f.e.countRows("accounts", "SELECT count(*) FROM accounts.outbox")
}

func wantRefusal(t *testing.T, r reply, status int, message string) {
	t.Helper()
	if r.Status != status || r.str("error", "message") != message || r.Body["data"] != nil {
		t.Fatalf("got %d %s, want %d %q", r.Status, r.Raw, status, message)
	}
}

// listed is the program's keys as the console lists them, by id.
func listed(t *testing.T, r reply) map[int64]map[string]any {
	t.Helper()
	items, ok := r.get("data").([]any)
	if !ok {
		t.Fatalf("no list: %s", r.Raw)
	}
	out := map[int64]map[string]any{}
	for _, it := range items {
		m := it.(map[string]any)
		if _, shown := m["key"]; shown {
			t.Fatalf("a listed key shows its value: %s", r.Raw)
		}
		out[int64(m["id"].(float64))] = m
	}
	return out
}

func TestConsoleKeys(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{"KEY_USE_REPORT_INTERVAL": "100ms", "SETTINGS_RATE_LIMIT": "500"}, "accounts", "tracking", "commissions", "analytics")
	f := e.consoleKeys()

	// Issue: the whole key once, stored only as its hash, prefix and last 4.
	before, events := f.keyCount(f.a.id), f.events()
	r := f.console(f.owner, "POST", f.a.id, "", map[string]any{"mode": "live"}).want(t, 201)
	live := r.str("data", "key")
	liveID := int64(r.get("data", "id").(float64))
	if !strings.HasPrefix(live, "svc_live_") || len(live) != 52 || r.str("data", "mode") != "live" ||
		r.str("data", "masked") != live[:13]+"…"+live[48:] || r.get("data", "last_used_at") != nil || r.get("data", "rotation") != nil ||
		r.Header.Get("X-RateLimit-Limit") != "500" {
		t.Fatalf("issued: %s %v", r.Raw, r.Header)
	}
	sum := sha256.Sum256([]byte(live))
	if row := f.row(liveID); string(row.hash) != string(sum[:]) || row.prefix != live[:13] || row.last4 != live[48:] {
		t.Fatalf("stored %+v", row)
	}
	if f.keyCount(f.a.id) != before+1 || f.events() != events+1 {
		t.Fatal("the issue wrote no key or no catalog event")
	}
	r = f.console(f.owner, "POST", f.a.id, "", map[string]any{"mode": "test"}).want(t, 201)
	test := r.str("data", "key")
	testID := int64(r.get("data", "id").(float64))
	if !strings.HasPrefix(test, "svc_test_") || r.str("data", "mode") != "test" {
		t.Fatalf("test key: %s", r.Raw)
	}
	e.sync()

	t.Run("the list is masked, for members only", func(t *testing.T) {
		// A key issued before the last 4 characters were kept shows its
		// prefix alone.
		if _, err := e.Stack.Instance("accounts").Platform().Pool.Exec(context.Background(),
			`UPDATE accounts.api_keys SET last4 = NULL WHERE program_id = $1 AND id NOT IN ($2, $3)`, f.a.id, liveID, testID); err != nil {
			t.Fatal(err)
		}
		for _, who := range []string{f.owner, f.reader} {
			keys := listed(t, f.console(who, "GET", f.a.id, "", nil).want(t, 200))
			if len(keys) != 3 || keys[liveID]["masked"] != live[:13]+"…"+live[48:] || keys[testID]["mode"] != "test" {
				t.Fatalf("listed %v", keys)
			}
			for id, k := range keys {
				if id != liveID && id != testID && (k["masked"] != f.a.key[:13]+"…" || k["mode"] != "live") {
					t.Fatalf("older key listed as %v", k)
				}
				if strings.Contains(fmt.Sprint(k), live[13:48]) {
					t.Fatal("the list shows the key's middle")
				}
			}
		}
		wantRefusal(t, f.console(f.outsider, "GET", f.a.id, "", nil), 403, "You do not have access to this program")
		wantRefusal(t, f.console(f.ownerB, "GET", f.a.id, "", nil), 403, "You do not have access to this program")
		wantRefusal(t, f.console(f.owner, "GET", 999999999, "", nil), 403, "You do not have access to this program")
	})

	t.Run("an API key or no session is refused", func(t *testing.T) {
		for _, tok := range []string{live, f.a.key} {
			wantRefusal(t, f.console(tok, "GET", f.a.id, "", nil), 401, "Invalid session token. Sign in again.")
			wantRefusal(t, f.console(tok, "POST", f.a.id, "", map[string]any{"mode": "live"}), 401, "Invalid session token. Sign in again.")
			wantRefusal(t, f.console(tok, "DELETE", f.a.id, fmt.Sprintf("/%d", testID), nil), 401, "Invalid session token. Sign in again.")
		}
		wantRefusal(t, e.client("203.0.113.71").do("GET", fmt.Sprintf("/api/v1/programs/%d/keys", f.a.id), nil), 401,
			"Missing or malformed Authorization header. Expected: Bearer <session_token>")
	})

	t.Run("readers and non-members change nothing", func(t *testing.T) {
		before, events := f.keyCount(f.a.id), f.events()
		deadline := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		for _, c := range []struct {
			who, message string
		}{
			{f.reader, "You do not have permission to change this program's API keys"},
			{f.outsider, "You do not have access to this program"},
			{f.ownerB, "You do not have access to this program"},
		} {
			wantRefusal(t, f.console(c.who, "POST", f.a.id, "", map[string]any{"mode": "live"}), 403, c.message)
			// Permission first: a bad body says nothing to them.
			wantRefusal(t, f.console(c.who, "POST", f.a.id, "", map[string]any{"mode": "prod"}), 403, c.message)
			wantRefusal(t, f.console(c.who, "POST", f.a.id, fmt.Sprintf("/%d/rotation", liveID), map[string]any{"deadline": deadline}), 403, c.message)
			wantRefusal(t, f.console(c.who, "DELETE", f.a.id, fmt.Sprintf("/%d", liveID), nil), 403, c.message)
		}
		if f.keyCount(f.a.id) != before || f.events() != events {
			t.Fatal("a refused change wrote something")
		}
		if row := f.row(liveID); row.revoked || row.marked {
			t.Fatalf("a refused change changed the key: %+v", row)
		}
	})

	t.Run("another program's key is not found and changes nothing", func(t *testing.T) {
		events := f.events()
		bKeys := listed(t, f.console(f.ownerB, "GET", f.b.id, "", nil).want(t, 200))
		if len(bKeys) != 1 {
			t.Fatalf("B lists %v", bKeys)
		}
		if _, seesA := bKeys[liveID]; seesA {
			t.Fatal("B lists A's key")
		}
		deadline := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		for _, suffix := range []string{fmt.Sprintf("/%d", liveID), "/0", "/abc", "/99999999"} {
			wantRefusal(t, f.console(f.ownerB, "DELETE", f.b.id, suffix, nil), 404, "API key not found")
			wantRefusal(t, f.console(f.ownerB, "POST", f.b.id, suffix+"/rotation", map[string]any{"deadline": deadline}), 404, "API key not found")
		}
		if row := f.row(liveID); row.revoked || row.marked || f.events() != events {
			t.Fatalf("B changed A's key: %+v", row)
		}
	})

	t.Run("bad input is a 400 and writes nothing", func(t *testing.T) {
		before, events := f.keyCount(f.a.id), f.events()
		past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
		cases := []struct {
			name, suffix string
			body         any
			message      string
		}{
			{"unknown mode", "", map[string]any{"mode": "prod"}, "mode must be one of: test, live"},
			{"mode not a string", "", map[string]any{"mode": true}, "mode must be one of: test, live"},
			{"no mode", "", map[string]any{}, "mode must be one of: test, live"},
			{"NUL in the mode", "", `{"mode":"live\u0000"}`, "mode must not contain the NUL character"},
			{"invalid UTF-8", "", []byte("{\"mode\":\"li\xffve\"}"), ""},
			{"another field", "", map[string]any{"mode": "live", "test": true}, "Unknown field: test. Send mode"},
			{"not JSON", "", `{"mode":`, "Request body is not valid JSON"},
			{"deadline in the past", fmt.Sprintf("/%d/rotation", liveID), map[string]any{"deadline": past}, "deadline must be in the future"},
			{"deadline not a time", fmt.Sprintf("/%d/rotation", liveID), map[string]any{"deadline": "tomorrow"}, "deadline is required and must be an ISO 8601 time with offset"},
			{"no deadline", fmt.Sprintf("/%d/rotation", liveID), map[string]any{}, "deadline is required and must be an ISO 8601 time with offset"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := f.console(f.owner, "POST", f.a.id, c.suffix, c.body)
				if c.message == "" {
					if r.Status != 400 || r.str("error", "name") != "BadRequestError" {
						t.Fatalf("%d %s", r.Status, r.Raw)
					}
					return
				}
				wantRefusal(t, r, 400, c.message)
			})
		}
		if f.keyCount(f.a.id) != before || f.events() != events {
			t.Fatal("refused input wrote something")
		}
		if row := f.row(liveID); row.marked {
			t.Fatal("a refused rotation marked the key")
		}
	})

	// A click for the lead and the sale.
	click := func() string {
		t.Helper()
		id := e.client("203.0.113.72").do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://keysa.example/?via=KEYSA"}).want(t, 200).str("click_id")
		if id == "" {
			t.Fatal("no click id")
		}
		return id
	}
	lead := func(key, clickID string) reply {
		return e.client("203.0.113.73").withKey(key).do("POST", "/api/v1/track/lead", map[string]any{"click_id": clickID, "customer_key": uniqueID("cust")})
	}
	sale := func(key, clickID string) reply {
		return e.client("203.0.113.74").withKey(key).do("POST", "/api/v1/track/sale",
			map[string]any{"transaction_id": uniqueID("txn"), "amount_cents": 1000, "currency": "USD", "click_id": clickID})
	}

	t.Run("last use is reported by tracking, commissions and analytics", func(t *testing.T) {
		r := f.console(f.owner, "POST", f.a.id, "", map[string]any{"mode": "live"}).want(t, 201)
		reader, readerID := r.str("data", "key"), int64(r.get("data", "id").(float64))
		e.sync()
		lead(test, click()).want(t, 200)                                                                      // tracking only
		sale(live, click()).want(t, 200)                                                                      // commissions only
		e.client("203.0.113.77").withKey(reader).do("GET", "/api/v1/programs/me/readiness", nil).want(t, 200) // analytics only
		waitFor(t, "the keys' last use", func() bool { return f.row(liveID).use && f.row(testID).use && f.row(readerID).use })
		keys := listed(t, f.console(f.reader, "GET", f.a.id, "", nil).want(t, 200))
		for _, id := range []int64{liveID, testID, readerID} {
			used, err := time.Parse(time.RFC3339, fmt.Sprint(keys[id]["last_used_at"]))
			if err != nil || time.Since(used) > time.Minute || time.Until(used) > time.Second {
				t.Fatalf("key %d last used %v (%v)", id, keys[id]["last_used_at"], err)
			}
		}
		if used := e.countRows("accounts", "SELECT count(*) FROM accounts.api_keys WHERE program_id = $1 AND last_used_at IS NOT NULL", f.b.id); used != 0 {
			t.Fatalf("%d unused keys of B have a last use", used)
		}
	})

	t.Run("a key marked for rotation carries the signals", func(t *testing.T) {
		deadline := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
		r := f.console(f.owner, "POST", f.a.id, fmt.Sprintf("/%d/rotation", liveID), map[string]any{"deadline": deadline.Format(time.RFC3339)}).want(t, 200)
		if r.str("data", "rotation", "deadline") != deadline.Format(time.RFC3339) || r.str("data", "rotation", "marked_at") == "" || r.Header.Get("X-Catalog-Seq") == "" {
			t.Fatalf("marked: %s", r.Raw)
		}
		e.sync()
		s := sale(live, click()).want(t, 200)
		if s.Header.Get("Deprecation") == "" || s.Header.Get("Sunset") == "" || !strings.Contains(s.Header.Get("Link"), "rotation") || s.get("warnings") == nil {
			t.Fatalf("no rotation signals: %v %s", s.Header, s.Raw)
		}
		keys := listed(t, f.console(f.owner, "GET", f.a.id, "", nil).want(t, 200))
		if rot, _ := keys[liveID]["rotation"].(map[string]any); rot["deadline"] != deadline.Format(time.RFC3339) {
			t.Fatalf("listed rotation %v", keys[liveID])
		}
	})

	t.Run("a revoked key is refused at once everywhere", func(t *testing.T) {
		clickID := click()
		lead(live, clickID).want(t, 200)
		for _, id := range []int64{liveID, testID} {
			r := f.console(f.owner, "DELETE", f.a.id, fmt.Sprintf("/%d", id), nil).want(t, 200)
			if int64(r.get("data", "id").(float64)) != id || r.str("data", "revoked_at") == "" || r.Header.Get("X-Catalog-Seq") == "" {
				t.Fatalf("revoked: %s", r.Raw)
			}
		}
		if !f.row(liveID).revoked || !f.row(testID).revoked {
			t.Fatal("not stored as revoked")
		}
		// The answer waited for the replicas; the barrier only confirms.
		e.sync()
		for name, r := range map[string]reply{
			"lead":                   lead(live, click()),
			"lead with the test key": lead(test, click()),
			"sale":                   sale(live, clickID),
			"refund":                 e.client("203.0.113.75").withKey(live).do("POST", "/api/v1/track/refund", map[string]any{"transaction_id": "t1", "refund_amount_cents": 100, "currency": "USD"}),
			"CLI status":             e.client("203.0.113.76").withKey(live).do("GET", "/api/v1/cli/status", nil),
			"readiness":              e.client("203.0.113.78").withKey(live).do("GET", "/api/v1/programs/me/readiness", nil),
		} {
			if r.Status != 401 {
				t.Errorf("%s with a revoked key: %d %s", name, r.Status, r.Raw)
			}
		}
		keys := listed(t, f.console(f.owner, "GET", f.a.id, "", nil).want(t, 200))
		if _, still := keys[liveID]; still || len(keys) != 2 {
			t.Fatalf("revoked keys listed: %v", keys)
		}
		wantRefusal(t, f.console(f.owner, "DELETE", f.a.id, fmt.Sprintf("/%d", liveID), nil), 404, "API key not found")
		wantRefusal(t, f.console(f.owner, "POST", f.a.id, fmt.Sprintf("/%d/rotation", liveID), map[string]any{"deadline": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}), 404, "API key not found")
		// B's key still works.
		if n := e.countRows("accounts", "SELECT count(*) FROM accounts.api_keys WHERE program_id = $1 AND revoked_at IS NOT NULL", f.b.id); n != 0 {
			t.Fatal("B's key was revoked")
		}
	})
}
