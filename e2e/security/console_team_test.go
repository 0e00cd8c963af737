package security_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// consoleTeam is program A with its owner (tracking:read and write) and a
// reader, an outsider, and a second tenant (program B with its owner), on
// accounts and analytics behind the gateway with a test OpenID provider,
// so an invited person can sign in.
type consoleTeam struct {
	e                           *signInEnv
	a, b                        keyedProgram
	owner, reader, outsider, bo int64
}

func (e *signInEnv) consoleTeam() consoleTeam {
	e.t.Helper()
	f := consoleTeam{e: e, a: e.keyedProgram("TeamA", nil), b: e.keyedProgram("TeamB", nil)}
	person := func(email string, prog int64, permissions ...string) int64 {
		uid := e.id("POST", "/admin/v1/users", map[string]any{"email": email, "name": "N " + email})
		if prog > 0 {
			e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/members", prog), map[string]any{"user_id": uid, "active": true, "permissions": permissions})
		}
		return uid
	}
	f.owner = person("owner@teama.example", f.a.id, "tracking:read", "tracking:write")
	f.reader = person("reader@teama.example", f.a.id, "tracking:read")
	f.outsider = person("outsider@elsewhere.example", 0)
	f.bo = person("owner@teamb.example", f.b.id, "tracking:read", "tracking:write")
	e.sync()
	return f
}

// session is a fresh dashboard session of uid: each has its own bucket of
// the routes' 30 a minute.
func (f consoleTeam) session(uid int64) string {
	f.e.t.Helper()
	tok, _ := f.e.admin("POST", "/admin/v1/sessions", map[string]any{"user_id": uid})["token"].(string)
	if tok == "" {
		f.e.t.Fatal("no session token")
	}
	return tok
}

// team calls a team route of program prog.
func (f consoleTeam) team(token, method string, prog int64, suffix string, body any) reply {
	f.e.t.Helper()
	return f.e.client("203.0.113.90").withKey(token).do(method, fmt.Sprintf("/api/v1/programs/%d/members%s", prog, suffix), body)
}

// membership is accounts' stored row: "<active> [<permissions>]".
func (f consoleTeam) membership(prog, uid int64) string {
	f.e.t.Helper()
	var active bool
	var perms []string
	err := f.e.Stack.Instance("accounts").Platform().Pool.QueryRow(context.Background(), `SELECT active, permissions FROM accounts.memberships
		WHERE program_id = $1 AND user_id = $2`, prog, uid).Scan(&active, &perms)
	if err != nil {
		f.e.t.Fatalf("membership %d/%d: %v", prog, uid, err)
	}
	return fmt.Sprintf("%v %v", active, perms)
}

// written counts what a refused change must not write: users,
// memberships, catalog events.
func (f consoleTeam) written() [3]int {
	return [3]int{f.e.count("accounts", "SELECT count(*) FROM accounts.users"),
		f.e.count("accounts", "SELECT count(*) FROM accounts.memberships WHERE active"),
		f.e.count("accounts", "SELECT count(*) FROM accounts.outbox")}
}

func memberIDs(t *testing.T, r reply) []int64 {
	t.Helper()
	items, ok := r.get("data").([]any)
	if !ok {
		t.Fatalf("no list: %s", r.Raw)
	}
	var out []int64
	for _, it := range items {
		out = append(out, int64(it.(map[string]any)["user_id"].(float64)))
	}
	return out
}

func TestConsoleTeam(t *testing.T) {
	t.Parallel()
	e := startSignIn(t, "accounts", "analytics")
	f := e.consoleTeam()
	owner, reader, outsider, ownerB := f.session(f.owner), f.session(f.reader), f.session(f.outsider), f.session(f.bo)
	readOnly := "You do not have permission to change this program's team"
	noAccess := "You do not have access to this program"

	t.Run("members list by user id, a page at a time", func(t *testing.T) {
		r := f.team(reader, "GET", f.a.id, "", nil).want(t, 200)
		if ids := memberIDs(t, r); !slices.Equal(ids, []int64{f.owner, f.reader}) || r.get("next_cursor") != nil ||
			r.Header.Get("X-RateLimit-Limit") != "30" {
			t.Fatalf("list: %s %v", r.Raw, r.Header)
		}
		first := r.get("data").([]any)[0].(map[string]any)
		if first["email"] != "owner@teama.example" || first["name"] != "N owner@teama.example" || first["active"] != true ||
			fmt.Sprint(first["permissions"]) != "[tracking:read tracking:write]" {
			t.Fatalf("owner as listed: %v", first)
		}
		r = f.team(reader, "GET", f.a.id, "?limit=1", nil).want(t, 200)
		if ids := memberIDs(t, r); !slices.Equal(ids, []int64{f.owner}) || r.str("next_cursor") != strconv.FormatInt(f.owner, 10) {
			t.Fatalf("page 1: %s", r.Raw)
		}
		r = f.team(reader, "GET", f.a.id, "?limit=1&cursor="+r.str("next_cursor"), nil).want(t, 200)
		if ids := memberIDs(t, r); !slices.Equal(ids, []int64{f.reader}) || r.get("next_cursor") != nil {
			t.Fatalf("page 2: %s", r.Raw)
		}
		wantRefusal(t, f.team(reader, "GET", f.a.id, "?limit=0", nil), 400, "limit must be a whole number from 1 to 100")
		wantRefusal(t, f.team(reader, "GET", f.a.id, "?cursor=x", nil), 400, "cursor must be the next_cursor of a previous page")
		// Membership before the query: a non-member learns nothing.
		wantRefusal(t, f.team(outsider, "GET", f.a.id, "?limit=0", nil), 403, noAccess)
	})

	t.Run("non-members, the second tenant, readers and API keys are refused, nothing written", func(t *testing.T) {
		before := f.written()
		// What the settings routes give a non-member.
		settings := e.client("203.0.113.91").withKey(outsider).do("GET", fmt.Sprintf("/api/v1/programs/%d/settings", f.a.id), nil)
		wantRefusal(t, settings, 403, noAccess)
		for _, who := range []string{outsider, ownerB} {
			wantRefusal(t, f.team(who, "GET", f.a.id, "", nil), 403, noAccess)
			wantRefusal(t, f.team(who, "POST", f.a.id, "", map[string]any{"email": "x@teama.example", "permissions": []string{"tracking:read"}}), 403, noAccess)
			wantRefusal(t, f.team(who, "POST", f.a.id, "", map[string]any{"email": 1}), 403, noAccess)
			wantRefusal(t, f.team(who, "DELETE", f.a.id, fmt.Sprintf("/%d", f.reader), nil), 403, noAccess)
		}
		wantRefusal(t, f.team(owner, "GET", 999999999, "", nil), 403, noAccess)
		wantRefusal(t, f.team(reader, "POST", f.a.id, "", map[string]any{"email": "x@teama.example", "permissions": []string{"tracking:write"}}), 403, readOnly)
		wantRefusal(t, f.team(reader, "POST", f.a.id, "", map[string]any{"permissions": "all"}), 403, readOnly)
		wantRefusal(t, f.team(reader, "DELETE", f.a.id, fmt.Sprintf("/%d", f.owner), nil), 403, readOnly)
		for _, tok := range []string{f.a.key, "not-a-token"} {
			wantRefusal(t, f.team(tok, "GET", f.a.id, "", nil), 401, "Invalid session token. Sign in again.")
			wantRefusal(t, f.team(tok, "POST", f.a.id, "", map[string]any{"email": "x@teama.example", "permissions": []string{"tracking:read"}}), 401, "Invalid session token. Sign in again.")
			wantRefusal(t, f.team(tok, "DELETE", f.a.id, fmt.Sprintf("/%d", f.reader), nil), 401, "Invalid session token. Sign in again.")
		}
		if after := f.written(); after != before {
			t.Fatalf("refusals wrote: %v -> %v", before, after)
		}
		if f.membership(f.a.id, f.reader) != "true [tracking:read]" || f.membership(f.a.id, f.owner) != "true [tracking:read tracking:write]" {
			t.Fatal("a refusal changed a membership")
		}
	})

	t.Run("bad bodies get a 400 and write nothing", func(t *testing.T) {
		tok := f.session(f.owner)
		before := f.written()
		for _, c := range []struct {
			body    any
			message string
		}{
			{map[string]any{"email": "x@teama.example", "permissions": []string{"tracking:read"}, "role": "admin"}, "Unknown field: role. Send email and permissions"},
			{map[string]any{"permissions": []string{"tracking:read"}}, "email is required and must be a valid email address"},
			{map[string]any{"email": 7, "permissions": []string{"tracking:read"}}, "email is required and must be a valid email address"},
			{map[string]any{"email": "not an email", "permissions": []string{"tracking:read"}}, "email must be a valid email address"},
			{map[string]any{"email": "x@teama.example"}, "permissions must be a non-empty list of: tracking:read, tracking:write"},
			{map[string]any{"email": "x@teama.example", "permissions": []string{}}, "permissions must be a non-empty list of: tracking:read, tracking:write"},
			{map[string]any{"email": "x@teama.example", "permissions": "tracking:read"}, "permissions must be a non-empty list of: tracking:read, tracking:write"},
			{map[string]any{"email": "x@teama.example", "permissions": []string{"tracking:read", "admin"}}, "permissions must be a non-empty list of: tracking:read, tracking:write"},
			{`{"email":"x\u0000@teama.example","permissions":["tracking:read"]}`, "email must not contain the NUL character"},
			{"{\"email\":\"x\xff@teama.example\",\"permissions\":[\"tracking:read\"]}", "Request body is not valid UTF-8"},
			{`{"email":"x\ufffd@teama.example","permissions":["tracking:read"]}`, "email must be a valid email address"},
			{`{"email":`, "Request body is not valid JSON"},
		} {
			wantRefusal(t, f.team(tok, "POST", f.a.id, "", c.body), 400, c.message)
		}
		if after := f.written(); after != before {
			t.Fatalf("bad bodies wrote: %v -> %v", before, after)
		}
	})

	var invited int64
	t.Run("an unknown email becomes a user whose first sign-in binds it", func(t *testing.T) {
		users := f.written()[0]
		r := f.team(owner, "POST", f.a.id, "", map[string]any{"email": "New.Person@TeamA.example", "permissions": []string{"tracking:write"}}).want(t, 201)
		invited = int64(r.get("data", "user_id").(float64))
		if r.str("data", "email") != "new.person@teama.example" || r.str("data", "name") != "" || r.get("data", "active") != true ||
			fmt.Sprint(r.get("data", "permissions")) != "[tracking:read tracking:write]" || r.Header.Get("X-Catalog-Seq") == "" {
			t.Fatalf("added: %s %v", r.Raw, r.Header)
		}
		if f.written()[0] != users+1 || f.membership(f.a.id, invited) != "true [tracking:read tracking:write]" ||
			e.count("accounts", "SELECT count(*) FROM accounts.users WHERE id = $1 AND oidc_subject IS NULL", invited) != 1 {
			t.Fatal("no user without identity, or no membership")
		}
		// Re-adding updates the permissions; no second user.
		r = f.team(owner, "POST", f.a.id, "", map[string]any{"email": "new.person@teama.example", "permissions": []string{"tracking:read"}}).want(t, 201)
		if int64(r.get("data", "user_id").(float64)) != invited || fmt.Sprint(r.get("data", "permissions")) != "[tracking:read]" ||
			f.written()[0] != users+1 || f.membership(f.a.id, invited) != "true [tracking:read]" {
			t.Fatalf("re-added: %s", r.Raw)
		}
		e.sync()
		tok := e.dashboardSession(person{subject: "team-new-person", email: "new.person@teama.example"})
		if e.count("accounts", "SELECT count(*) FROM accounts.users WHERE id = $1 AND oidc_subject = 'team-new-person'", invited) != 1 {
			t.Fatal("the sign-in did not bind the invited user")
		}
		e.access(tok, f.a.id).wantOpen(t)
		// A reader now: refused a change.
		wantRefusal(t, f.team(tok, "DELETE", f.a.id, fmt.Sprintf("/%d", f.reader), nil), 403, readOnly)
	})

	t.Run("another program's member is not found and nothing changes", func(t *testing.T) {
		before := f.written()
		tok := f.session(f.owner)
		wantRefusal(t, f.team(tok, "DELETE", f.a.id, fmt.Sprintf("/%d", f.bo), nil), 404, "Member not found")
		wantRefusal(t, f.team(tok, "DELETE", f.a.id, fmt.Sprintf("/%d", f.outsider), nil), 404, "Member not found")
		wantRefusal(t, f.team(tok, "DELETE", f.a.id, "/abc", nil), 404, "Member not found")
		wantRefusal(t, f.team(ownerB, "DELETE", f.b.id, fmt.Sprintf("/%d", f.reader), nil), 404, "Member not found")
		if after := f.written(); after != before || f.membership(f.b.id, f.bo) != "true [tracking:read tracking:write]" {
			t.Fatalf("wrote: %v -> %v", before, after)
		}
	})

	t.Run("the last writer cannot be removed or made a reader", func(t *testing.T) {
		before := f.written()
		tok := f.session(f.owner)
		last := "This is the program's last member with tracking:write. Give another member tracking:write first."
		r := f.team(tok, "DELETE", f.a.id, fmt.Sprintf("/%d", f.owner), nil)
		wantRefusal(t, r, 409, last)
		if r.str("error", "details", "code") != "LAST_WRITER" {
			t.Fatalf("code: %s", r.Raw)
		}
		wantRefusal(t, f.team(tok, "POST", f.a.id, "", map[string]any{"email": "owner@teama.example", "permissions": []string{"tracking:read"}}), 409, last)
		if after := f.written(); after != before || f.membership(f.a.id, f.owner) != "true [tracking:read tracking:write]" {
			t.Fatalf("wrote: %v -> %v", before, after)
		}
	})

	t.Run("a removed member is refused everywhere on the program", func(t *testing.T) {
		tok := e.dashboardSession(person{subject: "team-new-person", email: "new.person@teama.example"})
		r := f.team(f.session(f.owner), "DELETE", f.a.id, fmt.Sprintf("/%d", invited), nil).want(t, 200)
		if int64(r.get("data", "user_id").(float64)) != invited || r.get("data", "active") != false ||
			fmt.Sprint(r.get("data", "permissions")) != "[]" || r.Header.Get("X-Catalog-Seq") == "" {
			t.Fatalf("removed: %s", r.Raw)
		}
		if f.membership(f.a.id, invited) != "false []" {
			t.Fatal("the membership is still active")
		}
		e.sync()
		a := e.access(tok, f.a.id)
		wantMessage(t, "settings", a.settings, 403, noAccess)
		wantMessage(t, "performance", a.performance, 403, noAccess)
		wantRefusal(t, f.team(tok, "GET", f.a.id, "", nil), 403, noAccess)
		// Listed as removed; removing again is not found.
		l := f.team(f.session(f.owner), "GET", f.a.id, "", nil).want(t, 200)
		if got := l.get("data").([]any)[2].(map[string]any); got["active"] != false || int64(got["user_id"].(float64)) != invited {
			t.Fatalf("listed: %s", l.Raw)
		}
		wantRefusal(t, f.team(f.session(f.owner), "DELETE", f.a.id, fmt.Sprintf("/%d", invited), nil), 404, "Member not found")
	})

	t.Run("two writers removing each other at once leave one writer", func(t *testing.T) {
		w1, w2 := f.owner, f.reader
		pool := e.Stack.Instance("accounts").Platform().Pool
		for round := range 3 {
			f.team(f.session(w1), "POST", f.a.id, "", map[string]any{"email": map[int64]string{f.owner: "owner@teama.example", f.reader: "reader@teama.example"}[w2],
				"permissions": []string{"tracking:write"}}).want(t, 201)
			t1, t2 := f.session(w1), f.session(w2)
			// The test holds the team's lock until both removals wait on
			// it, so both have passed the permission check: the lock alone
			// decides.
			tx, err := pool.Begin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(context.Background()) }() // a no-op once committed
			if _, err := tx.Exec(context.Background(), "SELECT 1 FROM accounts.memberships WHERE program_id = $1 FOR UPDATE", f.a.id); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var r1, r2 reply
			wg.Add(2)
			go func() { defer wg.Done(); r1 = f.team(t1, "DELETE", f.a.id, fmt.Sprintf("/%d", w2), nil) }()
			go func() { defer wg.Done(); r2 = f.team(t2, "DELETE", f.a.id, fmt.Sprintf("/%d", w1), nil) }()
			for deadline := time.Now().Add(10 * time.Second); e.count("accounts", `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'SELECT user_id, active, permissions FROM memberships%'`) < 2; {
				if time.Now().After(deadline) {
					t.Fatal("the removals never waited on the team's lock")
				}
				time.Sleep(10 * time.Millisecond) // polling, within the deadline
			}
			if err := tx.Commit(context.Background()); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			// One removal wins; the other, checked under the lock, finds
			// the last writer.
			statuses := []int{r1.Status, r2.Status}
			slices.Sort(statuses)
			if !slices.Equal(statuses, []int{http.StatusOK, http.StatusConflict}) {
				t.Fatalf("round %d: %d %s / %d %s", round, r1.Status, r1.Raw, r2.Status, r2.Raw)
			}
			writers := e.count("accounts", "SELECT count(*) FROM accounts.memberships WHERE program_id = $1 AND active AND 'tracking:write' = ANY(permissions)", f.a.id)
			if writers != 1 {
				t.Fatalf("round %d: %d writers", round, writers)
			}
			if r1.Status != http.StatusOK { // w2 won: it re-adds w1 next round
				w1, w2 = w2, w1
			}
		}
		// A writer may remove themselves while another writer remains.
		f.team(f.session(w1), "POST", f.a.id, "", map[string]any{"email": map[int64]string{f.owner: "owner@teama.example", f.reader: "reader@teama.example"}[w2],
			"permissions": []string{"tracking:read", "tracking:write"}}).want(t, 201)
		r := f.team(f.session(w2), "DELETE", f.a.id, fmt.Sprintf("/%d", w2), nil).want(t, 200)
		if r.get("data", "active") != false || f.membership(f.a.id, w2) != "false []" || f.membership(f.a.id, w1) != "true [tracking:read tracking:write]" {
			t.Fatalf("self-removal: %s", r.Raw)
		}
	})
}
