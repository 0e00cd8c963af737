package security_test

import (
	"fmt"
	"testing"
)

// listedPartner is one row of GET /api/v1/programs/{id}/partners.
type listedPartner struct {
	id                         int64
	name, email, status        string
	codes                      []string
	clicks, leads, conversions any // float64, or nil when the figures are unavailable
	money                      []any
}

func partnersPage(t *testing.T, r reply) ([]listedPartner, string) {
	t.Helper()
	items, ok := r.get("data").([]any)
	if !ok {
		t.Fatalf("no data list: %s", r.Raw)
	}
	out := make([]listedPartner, 0, len(items))
	for _, it := range items {
		m := it.(map[string]any)
		p := listedPartner{id: int64(m["id"].(float64)), name: m["name"].(string), email: m["email"].(string), status: m["status"].(string),
			clicks: m["clicks"], leads: m["leads"], conversions: m["conversions"]}
		for _, l := range m["links"].([]any) {
			p.codes = append(p.codes, l.(map[string]any)["code"].(string))
		}
		p.money, _ = m["money"].([]any)
		out = append(out, p)
	}
	next, _ := r.get("next_cursor").(string)
	return out, next
}

// The console's partners list (issue 21): a member reads the program's
// partners with their links and figures (analytics' rollups, asked on
// its internal port), page by page; nobody else reads them, another
// program's partners never appear, and the list still answers when
// analytics cannot.
func TestConsolePartnersList(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{"SETTINGS_RATE_LIMIT": "1000"}, "tracking", "commissions", "analytics", "accounts")
	f := consolePartners{e.consoleKeys()}
	a, b := f.a.id, f.b.id
	list := func(token string, prog int64, query string) reply {
		return f.call(token, "GET", prog, "/partners"+query, nil)
	}
	// A's partners: P (from the fixture, link KEYSA), then Ana and Bob
	// invited from the console, and the svc test fixture partner, which
	// is no partner of the brand's. B has Cy.
	ana := num(f.call(f.owner, "POST", a, "/partners", map[string]any{"email": "ana@list.example", "name": "Ana", "code": "ana-a"}).want(t, 201), "data", "partner", "id")
	bob := num(f.call(f.owner, "POST", a, "/partners", map[string]any{"email": "bob@list.example", "name": "Bob"}).want(t, 201), "data", "partner", "id")
	f.call(f.owner, "POST", a, fmt.Sprintf("/partners/%d/reject", bob), nil).want(t, 200)
	f.call(f.ownerB, "POST", b, "/partners", map[string]any{"email": "cy@list.example", "name": "Cy", "code": "cy-b"}).want(t, 201)
	fixture := e.id("POST", "/admin/v1/partners", map[string]any{"name": "svc test partner", "email": fmt.Sprintf("test-partner+%d@svc.invalid", a)})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", a), map[string]any{"partner_id": fixture, "approved": true})
	e.sync()

	// Activity: three clicks on KEYSA, one of them a lead and a sale of
	// 25.00 USD (10 %: 2.50 commission); one click on Ana's link; one on
	// Cy's in B.
	click := func(code string) string {
		t.Helper()
		id := e.client("203.0.113.90").do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://keysa.example/?via=" + code}).want(t, 200).str("click_id")
		if id == "" {
			t.Fatal("no click id")
		}
		return id
	}
	buyer := click("KEYSA")
	click("KEYSA")
	click("KEYSA")
	click("ana-a")
	click("cy-b")
	e.client("203.0.113.91").withKey(f.a.key).do("POST", "/api/v1/track/lead", map[string]any{"click_id": buyer, "customer_key": uniqueID("cust")}).want(t, 200)
	e.client("203.0.113.92").withKey(f.a.key).do("POST", "/api/v1/track/sale",
		map[string]any{"transaction_id": uniqueID("txn"), "amount_cents": 2500, "currency": "USD", "click_id": buyer}).want(t, 200)

	var rows []listedPartner
	var r reply
	waitFor(t, "the figures of A's partners", func() bool {
		r = list(f.reader, a, "").want(t, 200)
		rows, _ = partnersPage(t, r)
		return len(rows) == 3 && rows[0].clicks == float64(3) && rows[0].conversions == float64(1) && len(rows[0].money) == 1 && rows[1].clicks == float64(1)
	})
	if r.get("figures", "available") != true || r.str("figures", "from") == "" || r.str("figures", "to") == "" || r.get("next_cursor") != nil {
		t.Fatalf("page meta: %s", r.Raw)
	}
	p := rows[0]
	if p.id == ana || p.name != "P" || p.status != "approved" || len(p.codes) != 1 || p.codes[0] != "KEYSA" || p.leads != float64(1) {
		t.Fatalf("P: %+v", p)
	}
	if m := p.money[0].(map[string]any); m["currency"] != "USD" || m["revenue"] != float64(2500) || m["commission"] != float64(250) {
		t.Fatalf("P's money: %v", p.money)
	}
	if rows[1].id != ana || rows[1].codes[0] != "ana-a" || rows[1].leads != float64(0) || len(rows[1].money) != 0 {
		t.Fatalf("Ana: %+v", rows[1])
	}
	if rows[2].id != bob || rows[2].status != "rejected" || rows[2].clicks != float64(0) {
		t.Fatalf("Bob: %+v", rows[2])
	}
	for _, row := range rows {
		if row.id == fixture || row.name == "Cy" {
			t.Fatalf("listed %+v in A", row)
		}
	}
	if r.Header.Get("X-RateLimit-Limit") != "1000" || r.Header.Get("X-RateLimit-Remaining") == "" {
		t.Fatalf("rate headers: %v", r.Header)
	}

	t.Run("pages walk every partner once", func(t *testing.T) {
		var seen []int64
		cursor := ""
		for page := 0; ; page++ {
			q := "?limit=1"
			if cursor != "" {
				q += "&cursor=" + cursor
			}
			rows, next := partnersPage(t, list(f.owner, a, q).want(t, 200))
			for _, row := range rows {
				seen = append(seen, row.id)
			}
			if next == "" {
				break
			}
			if page > 5 {
				t.Fatal("the pages do not end")
			}
			cursor = next
		}
		if len(seen) != 3 || seen[0] >= seen[1] || seen[1] >= seen[2] {
			t.Fatalf("pages listed %v", seen)
		}
	})

	t.Run("B sees only its own partner", func(t *testing.T) {
		rows, _ := partnersPage(t, list(f.ownerB, b, "").want(t, 200))
		if len(rows) != 1 || rows[0].name != "Cy" || rows[0].codes[0] != "cy-b" {
			t.Fatalf("B's list: %+v", rows)
		}
	})

	t.Run("no one else reads A's partners", func(t *testing.T) {
		wantRefusal(t, list(f.outsider, a, ""), 403, "You do not have access to this program")
		wantRefusal(t, list(f.ownerB, a, ""), 403, "You do not have access to this program")
		wantRefusal(t, list(f.ownerB, a, "?limit=0"), 403, "You do not have access to this program")
		wantRefusal(t, list(f.owner, 999999, ""), 403, "You do not have access to this program")
		if r := list(f.a.key, a, ""); r.Status != 401 || r.get("data") != nil {
			t.Fatalf("an API key: %d %s", r.Status, r.Raw)
		}
	})

	t.Run("bad pages are 400", func(t *testing.T) {
		for _, q := range []string{"?limit=0", "?limit=101", "?limit=x", "?limit=1&limit=2"} {
			wantRefusal(t, list(f.owner, a, q), 400, "limit must be a whole number from 1 to 100")
		}
		for _, q := range []string{"?cursor=0", "?cursor=-4", "?cursor=abc", "?cursor=%00"} {
			wantRefusal(t, list(f.owner, a, q), 400, "cursor must be the next_cursor of a previous page")
		}
	})

	t.Run("without analytics the list still answers, figures null", func(t *testing.T) {
		if err := e.Stack.Instance("analytics").Stop(); err != nil {
			t.Fatal(err)
		}
		r := list(f.owner, a, "").want(t, 200)
		rows, _ := partnersPage(t, r)
		if r.get("figures", "available") != false || r.get("figures", "from") != nil || len(rows) != 3 || rows[0].clicks != nil || rows[0].money != nil || rows[0].codes[0] != "KEYSA" {
			t.Fatalf("without analytics: %s", r.Raw)
		}
	})
}
