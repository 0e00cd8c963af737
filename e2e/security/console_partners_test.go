package security_test

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
)

// consolePartners drives the console's partner and link changes on the
// consoleKeys fixture: program A (its owner, a reader, a non-member) and a
// second tenant's program B with its owner; A has partner P with link
// KEYSA.
type consolePartners struct{ consoleKeys }

// call sends a partner route of program prog with a session token and
// notes the catalog sequence of a change for e.sync.
func (f consolePartners) call(token, method string, prog int64, suffix string, body any) reply {
	f.e.t.Helper()
	r := f.e.client("203.0.113.80").withKey(token).do(method, fmt.Sprintf("/api/v1/programs/%d%s", prog, suffix), body)
	if n, err := strconv.ParseInt(r.Header.Get("X-Catalog-Seq"), 10, 64); err == nil {
		for cur := f.e.seq.Load(); n > cur && !f.e.seq.CompareAndSwap(cur, n); cur = f.e.seq.Load() {
		}
	}
	return r
}

// written counts what these routes write in accounts: partners, partner
// records, links (and how many are active), catalog events.
func (f consolePartners) written() [5]int {
	c := func(q string) int { return f.e.countRows("accounts", q) }
	return [5]int{c("SELECT count(*) FROM accounts.partners"), c("SELECT count(*) FROM accounts.partner_programs"),
		c("SELECT count(*) FROM accounts.links"), c("SELECT count(*) FROM accounts.links WHERE active"), c("SELECT count(*) FROM accounts.outbox")}
}

func (f consolePartners) unchanged(t *testing.T, before [5]int) {
	t.Helper()
	if now := f.written(); now != before {
		t.Fatalf("a refused change wrote something: %v, was %v", now, before)
	}
}

func num(r reply, keys ...string) int64 { v, _ := r.get(keys...).(float64); return int64(v) }

var generatedCode = regexp.MustCompile(`^[23456789abcdefghjkmnpqrstuvwxyz]{8}$`)

func TestConsolePartners(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{"SETTINGS_RATE_LIMIT": "500"}, "accounts", "tracking")
	f := consolePartners{e.consoleKeys()}
	a, b := f.a.id, f.b.id
	click := func(code string) reply {
		return e.client("203.0.113.81").do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://keysa.example/?via=" + code})
	}

	// Invite: the partner, its approved record and a generated first link,
	// one transaction with three events.
	before := f.written()
	r := f.call(f.owner, "POST", a, "/partners", map[string]any{"email": "ana@partners.example", "name": " Ana "}).want(t, 201)
	ana, code := num(r, "data", "partner", "id"), r.str("data", "link", "code")
	firstLink := num(r, "data", "link", "id")
	if r.str("data", "partner", "name") != "Ana" || r.str("data", "partner", "email") != "ana@partners.example" ||
		num(r, "data", "partner_program", "partner_id") != ana || num(r, "data", "partner_program", "program_id") != a ||
		r.get("data", "partner_program", "approved") != true || r.str("data", "partner_program", "status") != "approved" ||
		num(r, "data", "link", "partner_id") != ana || num(r, "data", "link", "program_id") != a || r.get("data", "link", "active") != true ||
		!generatedCode.MatchString(code) || r.Header.Get("X-Catalog-Seq") == "" || r.Header.Get("X-RateLimit-Limit") != "500" {
		t.Fatalf("invited: %s %v", r.Raw, r.Header)
	}
	if now := f.written(); now != [5]int{before[0] + 1, before[1] + 1, before[2] + 1, before[3] + 1, before[4] + 3} {
		t.Fatalf("invite wrote %v, was %v", now, before)
	}
	if e.countRows("accounts", "SELECT count(*) FROM accounts.partner_programs WHERE partner_id = $1 AND program_id = $2 AND approved", ana, a) != 1 {
		t.Fatal("no approved record")
	}
	e.sync()
	click(code).want(t, 200)

	t.Run("an existing partner is reused; a second invite or a used code writes nothing", func(t *testing.T) {
		// Partners are global: B's owner inviting the same email enrolls
		// the same partner, with its stored name.
		r := f.call(f.ownerB, "POST", b, "/partners", map[string]any{"email": "ANA@partners.example", "name": "Someone else", "code": "ana-b"}).want(t, 201)
		if num(r, "data", "partner", "id") != ana || r.str("data", "partner", "name") != "Ana" || r.str("data", "link", "code") != "ana-b" {
			t.Fatalf("reinvite: %s", r.Raw)
		}
		before := f.written()
		wantRefusal(t, f.call(f.owner, "POST", a, "/partners", map[string]any{"email": "ana@partners.example", "name": "Ana"}), 409,
			"this partner is already in this program")
		// A new person with a code A uses: neither the partner nor its
		// record is left behind.
		wantRefusal(t, f.call(f.owner, "POST", a, "/partners", map[string]any{"email": "new@partners.example", "name": "New", "code": "KEYSA"}), 409,
			"a link with this code already exists in this program")
		f.unchanged(t, before)
	})

	t.Run("bad bodies are 400 and write nothing", func(t *testing.T) {
		before := f.written()
		for _, c := range []struct {
			body    any
			message string
		}{
			{map[string]any{"email": "not-an-email", "name": "X"}, "email must be a valid email address"},
			{map[string]any{"email": "x@partners.example"}, "name is required"},
			{map[string]any{"email": "x@partners.example", "name": "X", "code": "no spaces"}, "code must be 1 to 64 letters, digits, '-' or '_'"},
			{map[string]any{"email": "x@partners.example", "name": "X", "approved": true}, "Unknown field: approved. Send email, name, code"},
			{map[string]any{"email": "x@partners.example", "name": "X\u0000"}, "name must not contain the NUL character"},
		} {
			wantRefusal(t, f.call(f.owner, "POST", a, "/partners", c.body), 400, c.message)
		}
		wantRefusal(t, f.call(f.owner, "POST", a, fmt.Sprintf("/partners/%d/links", ana), map[string]any{"code": "a/b"}), 400,
			"code must be 1 to 64 letters, digits, '-' or '_'")
		wantRefusal(t, f.call(f.owner, "PATCH", a, fmt.Sprintf("/links/%d", firstLink), map[string]any{"active": "no"}), 400,
			"active is required and must be true or false")
		wantRefusal(t, f.call(f.owner, "PATCH", a, fmt.Sprintf("/links/%d", firstLink), map[string]any{}), 400,
			"active is required and must be true or false")
		f.unchanged(t, before)
	})

	t.Run("readers, non-members, the second tenant and API keys change nothing", func(t *testing.T) {
		before := f.written()
		for _, c := range []struct{ who, message string }{
			{f.reader, "You do not have permission to change this program's partners"},
			{f.outsider, "You do not have access to this program"},
			{f.ownerB, "You do not have access to this program"},
		} {
			wantRefusal(t, f.call(c.who, "POST", a, "/partners", map[string]any{"email": "z@partners.example", "name": "Z"}), 403, c.message)
			// Permission first: a bad body tells them nothing.
			wantRefusal(t, f.call(c.who, "POST", a, "/partners", map[string]any{"email": 1}), 403, c.message)
			wantRefusal(t, f.call(c.who, "POST", a, fmt.Sprintf("/partners/%d/reject", ana), nil), 403, c.message)
			wantRefusal(t, f.call(c.who, "POST", a, fmt.Sprintf("/partners/%d/approve", ana), nil), 403, c.message)
			wantRefusal(t, f.call(c.who, "POST", a, fmt.Sprintf("/partners/%d/links", ana), map[string]any{}), 403, c.message)
			wantRefusal(t, f.call(c.who, "PATCH", a, fmt.Sprintf("/links/%d", firstLink), map[string]any{"active": false}), 403, c.message)
		}
		for _, tok := range []string{f.a.key, f.b.key} {
			wantRefusal(t, f.call(tok, "POST", a, "/partners", map[string]any{"email": "z@partners.example", "name": "Z"}), 401, "Invalid session token. Sign in again.")
			wantRefusal(t, f.call(tok, "PATCH", a, fmt.Sprintf("/links/%d", firstLink), map[string]any{"active": false}), 401, "Invalid session token. Sign in again.")
		}
		// B's owner naming A's link or partner under B's own program: 404.
		wantRefusal(t, f.call(f.ownerB, "PATCH", b, fmt.Sprintf("/links/%d", firstLink), map[string]any{"active": false}), 404, "Link not found in this program")
		f.unchanged(t, before)
		click(code).want(t, 200)
	})

	// Bob is only in B.
	bob := num(f.call(f.ownerB, "POST", b, "/partners", map[string]any{"email": "bob@partners.example", "name": "Bob"}).want(t, 201), "data", "partner", "id")

	t.Run("links: another for an enrolled partner, generated or given", func(t *testing.T) {
		r := f.call(f.owner, "POST", a, fmt.Sprintf("/partners/%d/links", ana), map[string]any{"code": "ana-winter"}).want(t, 201)
		if r.str("data", "code") != "ana-winter" || num(r, "data", "partner_id") != ana || r.get("data", "active") != true {
			t.Fatalf("link: %s", r.Raw)
		}
		r = f.call(f.owner, "POST", a, fmt.Sprintf("/partners/%d/links", ana), nil).want(t, 201)
		if !generatedCode.MatchString(r.str("data", "code")) {
			t.Fatalf("generated link: %s", r.Raw)
		}
		before := f.written()
		wantRefusal(t, f.call(f.owner, "POST", a, fmt.Sprintf("/partners/%d/links", ana), map[string]any{"code": "ana-winter"}), 409,
			"a link with this code already exists in this program")
		// Brand B cannot take A's code for its own link (a click without
		// program_id is resolved by the code alone: B's link would take
		// A's clicks once A's is switched off, or if B's were older), by
		// a link or by an invitation.
		wantRefusal(t, f.call(f.ownerB, "POST", b, fmt.Sprintf("/partners/%d/links", ana), map[string]any{"code": "ana-winter"}), 409,
			"a link with this code already exists in another program")
		wantRefusal(t, f.call(f.ownerB, "POST", b, "/partners", map[string]any{"email": "squat@partners.example", "name": "Squat", "code": "ana-winter"}), 409,
			"a link with this code already exists in another program")
		// Nor the code of another program's test link, before its chain
		// makes it.
		wantRefusal(t, f.call(f.ownerB, "POST", b, fmt.Sprintf("/partners/%d/links", ana), map[string]any{"code": fmt.Sprintf("svc-test-%d", a)}), 400,
			"code must not start with svc-test- (reserved for the test link)")
		for _, p := range []int64{bob, 999999999} {
			wantRefusal(t, f.call(f.owner, "POST", a, fmt.Sprintf("/partners/%d/links", p), map[string]any{}), 404, "Partner not found in this program")
			wantRefusal(t, f.call(f.owner, "POST", a, fmt.Sprintf("/partners/%d/approve", p), nil), 404, "Partner not found in this program")
			wantRefusal(t, f.call(f.owner, "POST", a, fmt.Sprintf("/partners/%d/reject", p), nil), 404, "Partner not found in this program")
		}
		f.unchanged(t, before)
	})

	t.Run("a disabled link answers 410 through the gateway, and 200 again once enabled", func(t *testing.T) {
		r := f.call(f.owner, "PATCH", a, fmt.Sprintf("/links/%d", firstLink), map[string]any{"active": false}).want(t, 200)
		if r.get("data", "active") != false || r.str("data", "code") != code {
			t.Fatalf("disabled: %s", r.Raw)
		}
		e.sync()
		clicks := e.countRows("tracking", "SELECT count(*) FROM tracking.affiliate_click_events")
		r = click(code).want(t, 410)
		if r.str("error", "code") != "link_disabled" || e.countRows("tracking", "SELECT count(*) FROM tracking.affiliate_click_events") != clicks {
			t.Fatalf("disabled click: %s", r.Raw)
		}
		f.call(f.owner, "PATCH", a, fmt.Sprintf("/links/%d", firstLink), map[string]any{"active": true}).want(t, 200)
		e.sync()
		click(code).want(t, 200)
	})

	t.Run("reject turns the partner's links off; approve lets them be turned on", func(t *testing.T) {
		active := e.countRows("accounts", "SELECT count(*) FROM accounts.links WHERE partner_id = $1 AND program_id = $2 AND active", ana, a)
		r := f.call(f.owner, "POST", a, fmt.Sprintf("/partners/%d/reject", ana), nil).want(t, 200)
		off, _ := r.get("data", "links_turned_off").([]any)
		if r.get("data", "partner_program", "approved") != false || r.str("data", "partner_program", "status") != "rejected" || len(off) != active || active != 3 {
			t.Fatalf("reject: %s (%d active)", r.Raw, active)
		}
		if e.countRows("accounts", "SELECT count(*) FROM accounts.links WHERE partner_id = $1 AND program_id = $2 AND active", ana, a) != 0 ||
			e.countRows("accounts", "SELECT count(*) FROM accounts.links WHERE partner_id = $1 AND program_id = $2 AND active", ana, b) != 1 {
			t.Fatal("the rejection did not turn off exactly A's links")
		}
		e.sync()
		click(code).want(t, 410)
		before := f.written()
		msg := "this partner is not approved in this program; approve the partner first"
		wantRefusal(t, f.call(f.owner, "POST", a, fmt.Sprintf("/partners/%d/links", ana), map[string]any{}), 409, msg)
		wantRefusal(t, f.call(f.owner, "PATCH", a, fmt.Sprintf("/links/%d", firstLink), map[string]any{"active": true}), 409, msg)
		f.unchanged(t, before)

		r = f.call(f.owner, "POST", a, fmt.Sprintf("/partners/%d/approve", ana), nil).want(t, 200)
		if r.get("data", "partner_program", "approved") != true || r.str("data", "partner_program", "status") != "approved" {
			t.Fatalf("approve: %s", r.Raw)
		}
		if e.countRows("accounts", "SELECT count(*) FROM accounts.links WHERE partner_id = $1 AND program_id = $2 AND active", ana, a) != 0 {
			t.Fatal("approval turned links back on")
		}
		f.call(f.owner, "PATCH", a, fmt.Sprintf("/links/%d", firstLink), map[string]any{"active": true}).want(t, 200)
		e.sync()
		click(code).want(t, 200)
	})
}
