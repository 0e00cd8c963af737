package security_test

import (
	"encoding/csv"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// consoleMoney is the console's commissions and payouts fixture (issue 21):
// program A (hold 0: commissions are approved at once by approve-due) with
// its owner, a reader and a non-member; a second tenant's program B with
// its owner. Partner P is in A and B, R only in A, Q only in B.
type consoleMoney struct {
	e                               *env
	a, b                            keyedProgram
	owner, reader, outsider, ownerB string
	p, q, r                         int64
}

func (e *env) consoleMoney() consoleMoney {
	e.t.Helper()
	hold := map[string]any{"hold_days": 0}
	f := consoleMoney{e: e, a: e.keyedProgram("MoneyA", hold), b: e.keyedProgram("MoneyB", hold)}
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
	f.owner = person("owner@moneya.example", f.a.id, "tracking:read", "tracking:write")
	f.reader = person("reader@moneya.example", f.a.id, "tracking:read")
	f.outsider = person("outsider@elsewhere.example", 0)
	f.ownerB = person("owner@moneyb.example", f.b.id, "tracking:read", "tracking:write")
	enrol := func(name string, progs map[int64]string) int64 {
		id := e.id("POST", "/admin/v1/partners", map[string]any{"name": name, "email": strings.ToLower(name) + "@money-partners.example"})
		for prog, code := range progs {
			e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", prog), map[string]any{"partner_id": id, "approved": true})
			e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/links", prog), map[string]any{"partner_id": id, "code": code, "active": true})
		}
		return id
	}
	f.p = enrol("P", map[int64]string{f.a.id: "MONEYPA", f.b.id: "MONEYPB"})
	f.r = enrol("R", map[int64]string{f.a.id: "MONEYRA"})
	f.q = enrol("Q", map[int64]string{f.b.id: "MONEYQB"})
	e.sync()
	return f
}

// sale records a live sale of amount cents on prog's key through a click of
// code; the commission is 10%.
func (f consoleMoney) sale(prog keyedProgram, code, txn string, amount int) {
	f.e.t.Helper()
	click := f.e.client("203.0.113.90").do("POST", "/api/v1/track/click",
		map[string]any{"affiliate_url": "https://" + strings.ToLower(code) + ".example/?via=" + code}).want(f.e.t, 200)
	f.e.client("203.0.113.91").withKey(prog.key).do("POST", "/api/v1/track/sale",
		map[string]any{"transaction_id": txn, "amount_cents": amount, "currency": "USD", "click_id": click.str("click_id")}).want(f.e.t, 200)
}

func (f consoleMoney) call(token, method string, prog int64, suffix string, body any, headers ...string) reply {
	f.e.t.Helper()
	return f.e.client("203.0.113.92").withKey(token).do(method, fmt.Sprintf("/api/v1/programs/%d%s", prog, suffix), body, headers...)
}

// written is what the payout routes write in commissions: withdrawals,
// their paid and cancelled ones, balance entries, outbox events.
func (f consoleMoney) written() [4]int {
	c := func(q string) int { return f.e.countRows("commissions", q) }
	return [4]int{c("SELECT count(*) FROM commissions.withdrawals"), c("SELECT count(*) FROM commissions.withdrawals WHERE status <> 'open'"),
		c("SELECT count(*) FROM commissions.balance_entries"), c("SELECT count(*) FROM commissions.outbox")}
}

func (f consoleMoney) unchanged(t *testing.T, before [4]int) {
	t.Helper()
	if now := f.written(); now != before {
		t.Fatalf("a refused change wrote something: %v, was %v", now, before)
	}
}

// commissionIDs walks every page of the list with limit and answers the
// ids in order.
func (f consoleMoney) commissionIDs(t *testing.T, token string, prog int64, query string, limit int) []int64 {
	t.Helper()
	var ids []int64
	cursor := ""
	for page := 0; ; page++ {
		q := query + "&limit=" + strconv.Itoa(limit)
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := f.call(token, "GET", prog, "/commissions?"+q, nil).want(t, 200)
		items, _ := r.get("data").([]any)
		if len(items) > limit {
			t.Fatalf("page of %d rows, limit %d", len(items), limit)
		}
		for _, it := range items {
			ids = append(ids, int64(it.(map[string]any)["id"].(float64)))
		}
		next, _ := r.get("next_cursor").(string)
		if next == "" {
			return ids
		}
		if page > 100 {
			t.Fatal("the cursor walk does not end")
		}
		cursor = next
	}
}

func TestConsoleMoney(t *testing.T) {
	t.Parallel()
	// Published outbox rows are kept: written() counts them to show that a
	// refused change wrote no event.
	e := start(t, map[string]string{"SETTINGS_RATE_LIMIT": "1000", "OUTBOX_DELETE_SENT": "false"}, "accounts", "tracking", "commissions")
	f := e.consoleMoney()
	a, b := f.a.id, f.b.id

	// Seven sales of P in A (one with a comma and quotes in its id, one
	// that a spreadsheet would run as a formula), one of R in A, one of P
	// and one of Q in B; then one of P's A sales is refunded in full.
	odd, formula := `ord,"7"`, "=HYPERLINK(1)"
	txns := []string{"ord_1", "ord_2", "ord_3", "ord_4", "ord_5", odd, formula}
	for _, txn := range txns {
		f.sale(f.a, "MONEYPA", txn+uniqueID(""), 10000)
	}
	// The ids the CSV must show, as sent.
	txns[5], txns[6] = odd+"_x", formula+"_x"
	f.sale(f.a, "MONEYPA", txns[5], 10000)
	f.sale(f.a, "MONEYPA", txns[6], 10000)
	f.sale(f.a, "MONEYRA", "r_1"+uniqueID(""), 20000)
	f.sale(f.b, "MONEYPB", "pb_1"+uniqueID(""), 50000)
	f.sale(f.b, "MONEYQB", "qb_1"+uniqueID(""), 30000)
	e.admin("POST", "/admin/v1/commissions/approve-due", nil)
	e.client("203.0.113.93").withKey(f.a.key).do("POST", "/api/v1/track/refund", map[string]any{"transaction_id": txns[5]}).want(t, 200)
	const inA = 10 // 9 of P, 1 of R

	t.Run("the list is the program's, newest first, every row once across pages", func(t *testing.T) {
		all := f.commissionIDs(t, f.owner, a, "", 100)
		if len(all) != inA {
			t.Fatalf("%d commissions of A, want %d: %v", len(all), inA, all)
		}
		for _, limit := range []int{1, 3, 4} {
			if got := f.commissionIDs(t, f.owner, a, "", limit); fmt.Sprint(got) != fmt.Sprint(all) {
				t.Fatalf("limit %d walk %v, want %v", limit, got, all)
			}
		}
		seen := map[int64]bool{}
		for _, id := range all {
			if seen[id] {
				t.Fatalf("commission %d twice", id)
			}
			seen[id] = true
		}
		r := f.call(f.owner, "GET", a, "/commissions?limit=100", nil).want(t, 200)
		if r.Header.Get("X-RateLimit-Limit") != "1000" || r.get("next_cursor") != nil {
			t.Fatalf("headers or cursor: %v %s", r.Header, r.Raw)
		}
		items := r.get("data").([]any)
		var prev time.Time
		for i, it := range items {
			c := it.(map[string]any)
			at, _ := time.Parse(time.RFC3339Nano, c["created_at"].(string))
			if i > 0 && at.After(prev) {
				t.Fatalf("not newest first at %d: %s", i, r.Raw)
			}
			prev = at
			if c["kind"] != "sale" || c["currency"] != "USD" || c["transaction_id"] == nil || c["sale_id"] == nil || c["customer_click_id"] == "" {
				t.Fatalf("row %v", c)
			}
		}
		// The refunded one is reversed; the others approved.
		statuses := map[string]int{}
		for _, it := range items {
			c := it.(map[string]any)
			statuses[c["status"].(string)]++
			if c["status"] == "reversed" && (c["transaction_id"] != txns[5] || c["refunded_amount"] != float64(1000)) {
				t.Fatalf("reversed row %v", c)
			}
			if c["status"] == "approved" && c["approved_at"] == nil {
				t.Fatalf("approved row without approved_at: %v", c)
			}
		}
		if statuses["approved"] != inA-1 || statuses["reversed"] != 1 {
			t.Fatalf("statuses %v", statuses)
		}
	})

	t.Run("filters", func(t *testing.T) {
		if n := len(f.commissionIDs(t, f.owner, a, "status=reversed", 50)); n != 1 {
			t.Fatalf("reversed: %d", n)
		}
		if n := len(f.commissionIDs(t, f.owner, a, "status=approved&partner_id="+strconv.FormatInt(f.p, 10), 2)); n != inA-2 {
			t.Fatalf("P approved: %d", n)
		}
		if n := len(f.commissionIDs(t, f.owner, a, "partner_id="+strconv.FormatInt(f.r, 10), 50)); n != 1 {
			t.Fatalf("R: %d", n)
		}
		today := time.Now().UTC().Format(time.DateOnly)
		tomorrow := time.Now().UTC().Add(24 * time.Hour).Format(time.DateOnly)
		if n := len(f.commissionIDs(t, f.owner, a, "from="+today+"&to="+tomorrow, 50)); n != inA {
			t.Fatalf("today: %d", n)
		}
		if n := len(f.commissionIDs(t, f.owner, a, "from="+tomorrow, 50)); n != 0 {
			t.Fatalf("from tomorrow: %d", n)
		}
		if n := len(f.commissionIDs(t, f.owner, a, "to="+url.QueryEscape(time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)), 50)); n != 0 {
			t.Fatalf("to an hour ago: %d", n)
		}
		// B's partner is not A's: 404, as in every console route.
		wantRefusal(t, f.call(f.owner, "GET", a, "/commissions?partner_id="+strconv.FormatInt(f.q, 10), nil), 404, "Partner not found in this program")
	})

	t.Run("bad parameters are 400 with the field", func(t *testing.T) {
		for _, c := range []struct{ query, field, message string }{
			{"status=paid", "status", "status must be one of pending, approved, refunded, reversed"},
			{"partner_id=-1", "partner_id", "partner_id must be a positive whole number"},
			{"partner_id=x", "partner_id", "partner_id must be a positive whole number"},
			{"from=yesterday", "from", "from must be a date (YYYY-MM-DD) or an RFC 3339 time"},
			{"to=2026-13-01", "to", "to must be a date (YYYY-MM-DD) or an RFC 3339 time"},
			{"from=2026-11-02&to=2026-11-01", "to", "to must be after from"},
			{"cursor=nope", "cursor", "cursor must be the next_cursor of a previous page"},
			{"limit=0", "limit", "limit must be a whole number from 1 to 100"},
			{"limit=101", "limit", "limit must be a whole number from 1 to 100"},
			{"status=approved&status=pending", "status", "status must be sent once"},
			{"sort=asc", "sort", "Unknown parameter: sort. Send status, partner_id, from, to, cursor, limit"},
			{"status=appr%00oved", "status", "status must not contain the NUL character"},
		} {
			r := f.call(f.owner, "GET", a, "/commissions?"+c.query, nil)
			wantRefusal(t, r, 400, c.message)
			if r.get("error", "details", "field") != c.field {
				t.Fatalf("%s: details %s", c.query, r.Raw)
			}
		}
		wantRefusal(t, f.call(f.owner, "GET", a, "/commissions?status=%C0%AF", nil), 400, "Request URL must be valid UTF-8")
		wantRefusal(t, f.call(f.owner, "GET", a, "/payouts?cursor=abc", nil), 400, "cursor must be the next_cursor of a previous page")
		// A reader or non-member learns nothing from validation.
		wantRefusal(t, f.call(f.outsider, "GET", a, "/commissions?status=paid", nil), 403, "You do not have access to this program")
	})

	t.Run("CSV streams every row with a header, escaped", func(t *testing.T) {
		r := f.call(f.reader, "GET", a, "/commissions", nil, "Accept", "text/csv").want(t, 200)
		if ct := r.Header.Get("Content-Type"); ct != "text/csv; charset=utf-8" || !strings.Contains(r.Header.Get("Content-Disposition"), "commissions.csv") {
			t.Fatalf("headers %v", r.Header)
		}
		rows, err := csv.NewReader(strings.NewReader(r.Raw)).ReadAll()
		if err != nil {
			t.Fatalf("csv: %v\n%s", err, r.Raw)
		}
		if strings.Join(rows[0], ",") != "id,sale_id,transaction_id,partner_id,customer_click_id,kind,status,amount,currency,refunded_amount,test,hold_until,created_at,approved_at" {
			t.Fatalf("header %v", rows[0])
		}
		if len(rows) != inA+1 {
			t.Fatalf("%d rows, want %d", len(rows)-1, inA)
		}
		got := map[string]bool{}
		for _, row := range rows[1:] {
			got[row[2]] = true
		}
		if !got[txns[5]] || !got["'"+txns[6]] || got[txns[6]] {
			t.Fatalf("escaping: %v\n%s", got, r.Raw)
		}
		if !strings.Contains(r.Raw, `"ord,""7""_x"`) {
			t.Fatalf("a comma and quotes are not quoted: %s", r.Raw)
		}
		// The same filters and the same refusals as JSON.
		r = f.call(f.owner, "GET", a, "/commissions?status=reversed", nil, "Accept", "text/csv").want(t, 200)
		if n := strings.Count(strings.TrimSpace(r.Raw), "\n"); n != 1 {
			t.Fatalf("reversed CSV: %s", r.Raw)
		}
		wantRefusal(t, f.call(f.owner, "GET", a, "/commissions?status=paid", nil, "Accept", "text/csv"), 400,
			"status must be one of pending, approved, refunded, reversed")
		wantRefusal(t, f.call(f.outsider, "GET", a, "/commissions", nil, "Accept", "text/csv"), 403, "You do not have access to this program")
	})

	money := func(t *testing.T, token string, prog, partner int64) map[string]any {
		t.Helper()
		r := f.call(token, "GET", prog, "/payouts", nil).want(t, 200)
		for _, it := range r.get("data", "balances").([]any) {
			m := it.(map[string]any)
			if m["partner_id"] == float64(partner) && m["currency"] == "USD" {
				return m
			}
		}
		return nil
	}

	var paidID int64
	t.Run("payouts: a program's money only, opened, paid with a reference, cancelled", func(t *testing.T) {
		// P earned 8 × 10 USD in A (one reversed), 50 USD in B.
		m := money(t, f.reader, a, f.p)
		if m["earned"] != float64(8000) || m["paid"] != float64(0) || m["open_payouts"] != float64(0) || m["balance"] != float64(8000) || m["available"] != float64(8000) {
			t.Fatalf("P in A: %v", m)
		}
		if m := money(t, f.ownerB, b, f.p); m["earned"] != float64(5000) || m["available"] != float64(5000) {
			t.Fatalf("P in B: %v", m)
		}
		if m := money(t, f.ownerB, b, f.r); m != nil {
			t.Fatalf("R has no money in B: %v", m)
		}
		before := f.written()
		wantRefusal(t, f.call(f.owner, "POST", a, "/payouts", map[string]any{"partner_id": f.p, "currency": "USD", "amount": 8001}), 400,
			"invalid amount: 80.01 USD requested, 80.00 USD available")
		f.unchanged(t, before)

		r := f.call(f.owner, "POST", a, "/payouts", map[string]any{"partner_id": f.p, "currency": "USD"}).want(t, 201)
		paidID = num(r, "data", "id")
		if r.get("data", "amount") != float64(8000) || r.get("data", "status") != "open" || r.get("data", "partner_id") != float64(f.p) || r.get("data", "reference") != nil {
			t.Fatalf("opened: %s", r.Raw)
		}
		if now := f.written(); now[0] != before[0]+1 || now[2] != before[2] || now[3] != before[3]+1 {
			t.Fatalf("open wrote %v, was %v", now, before)
		}
		if e.countRows("commissions", "SELECT count(*) FROM commissions.withdrawals WHERE id = $1 AND program_id = $2", paidID, a) != 1 {
			t.Fatal("the payout is not A's")
		}
		if m := money(t, f.owner, a, f.p); m["open_payouts"] != float64(8000) || m["available"] != float64(0) {
			t.Fatalf("P in A after opening: %v", m)
		}
		// B's money is untouched by A's payout.
		if m := money(t, f.ownerB, b, f.p); m["available"] != float64(5000) {
			t.Fatalf("P in B after A's payout: %v", m)
		}
		wantRefusal(t, f.call(f.owner, "POST", a, "/payouts", map[string]any{"partner_id": f.p, "currency": "USD"}), 400,
			"invalid amount: 0.00 USD requested, 0.00 USD available")

		r = f.call(f.owner, "POST", a, fmt.Sprintf("/payouts/%d/pay", paidID), map[string]any{"reference": " tr_123 "}).want(t, 200)
		if r.get("data", "status") != "paid" || r.get("data", "reference") != "tr_123" {
			t.Fatalf("paid: %s", r.Raw)
		}
		if e.countRows("commissions", "SELECT count(*) FROM commissions.withdrawals WHERE id = $1 AND status = 'paid' AND reference = 'tr_123'", paidID) != 1 {
			t.Fatal("reference not stored")
		}
		if m := money(t, f.owner, a, f.p); m["paid"] != float64(8000) || m["balance"] != float64(0) || m["available"] != float64(0) {
			t.Fatalf("P in A after paying: %v", m)
		}
		before = f.written()
		wantRefusal(t, f.call(f.owner, "POST", a, fmt.Sprintf("/payouts/%d/pay", paidID), nil), 409, "Payout is not open")
		wantRefusal(t, f.call(f.owner, "POST", a, fmt.Sprintf("/payouts/%d/cancel", paidID), nil), 409, "Payout is not open")
		f.unchanged(t, before)

		r = f.call(f.owner, "POST", a, "/payouts", map[string]any{"partner_id": f.r, "currency": "USD", "amount": 500}).want(t, 201)
		open := num(r, "data", "id")
		r = f.call(f.owner, "POST", a, fmt.Sprintf("/payouts/%d/cancel", open), map[string]any{}).want(t, 200)
		if r.get("data", "status") != "cancelled" || r.get("data", "amount") != float64(500) {
			t.Fatalf("cancelled: %s", r.Raw)
		}
		if m := money(t, f.owner, a, f.r); m["available"] != float64(2000) || m["open_payouts"] != float64(0) {
			t.Fatalf("R after the cancel: %v", m)
		}

		// The payouts, newest first, paged; and as CSV.
		r = f.call(f.reader, "GET", a, "/payouts?limit=1", nil).want(t, 200)
		ps := r.get("data", "payouts").([]any)
		if len(ps) != 1 || ps[0].(map[string]any)["id"] != float64(open) || r.str("next_cursor") == "" {
			t.Fatalf("first page: %s", r.Raw)
		}
		r = f.call(f.reader, "GET", a, "/payouts?limit=1&cursor="+url.QueryEscape(r.str("next_cursor")), nil).want(t, 200)
		ps = r.get("data", "payouts").([]any)
		if len(ps) != 1 || ps[0].(map[string]any)["id"] != float64(paidID) || r.get("next_cursor") != nil {
			t.Fatalf("second page: %s", r.Raw)
		}
		// The balances page the same way, by partner id then currency,
		// with their own cursor; the payouts' cursor does not move them.
		first, second := min(f.p, f.r), max(f.p, f.r)
		r = f.call(f.reader, "GET", a, "/payouts?limit=1", nil).want(t, 200)
		bs := r.get("data", "balances").([]any)
		if len(bs) != 1 || bs[0].(map[string]any)["partner_id"] != float64(first) || r.str("balances_next_cursor") == "" {
			t.Fatalf("first page of balances: %s", r.Raw)
		}
		r = f.call(f.reader, "GET", a, "/payouts?limit=1&balances_cursor="+url.QueryEscape(r.str("balances_next_cursor")), nil).want(t, 200)
		bs = r.get("data", "balances").([]any)
		if len(bs) != 1 || bs[0].(map[string]any)["partner_id"] != float64(second) || r.get("balances_next_cursor") != nil {
			t.Fatalf("second page of balances: %s", r.Raw)
		}
		for _, bad := range []string{"abc", "MTIz", "MC5VU0Q", "MS51c2Q", "MS5VU0RY"} { // 123, 0.USD, 1.usd, 1.USDX
			wantRefusal(t, f.call(f.reader, "GET", a, "/payouts?balances_cursor="+bad, nil), 400, "balances_cursor must be the balances_next_cursor of a previous page")
		}

		r = f.call(f.reader, "GET", a, "/payouts", nil, "Accept", "text/csv").want(t, 200)
		rows, err := csv.NewReader(strings.NewReader(r.Raw)).ReadAll()
		if err != nil || len(rows) != 3 || strings.Join(rows[0], ",") != "id,partner_id,currency,amount,requested_amount,status,reference,created_at,updated_at" ||
			rows[2][0] != strconv.FormatInt(paidID, 10) || rows[2][6] != "tr_123" || rows[1][5] != "cancelled" {
			t.Fatalf("payouts CSV (%v): %q", err, rows)
		}
		// B sees none of A's payouts.
		r = f.call(f.ownerB, "GET", b, "/payouts", nil).want(t, 200)
		if n := len(r.get("data", "payouts").([]any)); n != 0 {
			t.Fatalf("B lists %d payouts", n)
		}
	})

	t.Run("bad bodies are 400 and write nothing", func(t *testing.T) {
		before := f.written()
		for _, c := range []struct {
			body    any
			message string
		}{
			{map[string]any{"partner_id": f.r, "currency": "USD", "amount": 0}, "amount must be a positive integer (minor units)"},
			{map[string]any{"partner_id": f.r, "currency": "USD", "amount": "5"}, "amount must be a positive integer (minor units)"},
			{map[string]any{"partner_id": f.r, "currency": "USD", "amount": 1.5}, "amount must be a positive integer (minor units)"},
			{map[string]any{"currency": "USD"}, "partner_id is required and must be a positive integer"},
			{map[string]any{"partner_id": f.r}, "currency is required"},
			{map[string]any{"partner_id": f.r, "currency": "US\u0000D"}, "currency must not contain the NUL character"},
			{map[string]any{"partner_id": f.r, "currency": "USD", "note": "x"}, "Unknown field: note. Send partner_id, currency, amount"},
			{[]byte("{\"partner_id\": 1, \"currency\": \"US\xffD\"}"), "the body is not valid UTF-8"},
		} {
			wantRefusal(t, f.call(f.owner, "POST", a, "/payouts", c.body), 400, c.message)
		}
		wantRefusal(t, f.call(f.owner, "POST", a, "/payouts", map[string]any{"partner_id": f.r, "currency": "GBP"}), 422,
			`unsupported currency: "GBP" (supported: USD, EUR, VND)`)
		open := num(f.call(f.owner, "POST", a, "/payouts", map[string]any{"partner_id": f.r, "currency": "USD", "amount": 1}).want(t, 201), "data", "id")
		before = f.written()
		wantRefusal(t, f.call(f.owner, "POST", a, fmt.Sprintf("/payouts/%d/pay", open), map[string]any{"reference": strings.Repeat("x", 201)}), 400,
			"reference must be at most 200 characters")
		wantRefusal(t, f.call(f.owner, "POST", a, fmt.Sprintf("/payouts/%d/pay", open), map[string]any{"ref": "x"}), 400,
			"Unknown field: ref. Send reference")
		wantRefusal(t, f.call(f.owner, "POST", a, fmt.Sprintf("/payouts/%d/cancel", open), map[string]any{"why": "x"}), 400,
			"Unknown field: why. Send no fields")
		f.unchanged(t, before)
		f.call(f.owner, "POST", a, fmt.Sprintf("/payouts/%d/cancel", open), nil).want(t, 200)
	})

	t.Run("readers, non-members, the second tenant and API keys change nothing", func(t *testing.T) {
		open := num(f.call(f.owner, "POST", a, "/payouts", map[string]any{"partner_id": f.r, "currency": "USD", "amount": 100}).want(t, 201), "data", "id")
		before := f.written()
		for _, c := range []struct {
			token, method string
			prog          int64
			suffix        string
			body          any
			status        int
			message       string
		}{
			{f.reader, "POST", a, "/payouts", map[string]any{"partner_id": f.r, "currency": "USD"}, 403, "You do not have permission to change this program's payouts"},
			{f.reader, "POST", a, "/payouts", map[string]any{"bad": true}, 403, "You do not have permission to change this program's payouts"},
			{f.reader, "POST", a, fmt.Sprintf("/payouts/%d/pay", open), nil, 403, "You do not have permission to change this program's payouts"},
			{f.reader, "POST", a, fmt.Sprintf("/payouts/%d/cancel", open), nil, 403, "You do not have permission to change this program's payouts"},
			{f.outsider, "GET", a, "/commissions", nil, 403, "You do not have access to this program"},
			{f.outsider, "GET", a, "/payouts", nil, 403, "You do not have access to this program"},
			{f.outsider, "POST", a, "/payouts", map[string]any{"partner_id": f.r, "currency": "USD"}, 403, "You do not have access to this program"},
			{f.outsider, "POST", a, fmt.Sprintf("/payouts/%d/pay", open), nil, 403, "You do not have access to this program"},
			{f.ownerB, "GET", a, "/commissions", nil, 403, "You do not have access to this program"},
			{f.ownerB, "POST", a, fmt.Sprintf("/payouts/%d/cancel", open), nil, 403, "You do not have access to this program"},
			// B's owner naming A's payout or A's partner in B: 404.
			{f.ownerB, "POST", b, fmt.Sprintf("/payouts/%d/pay", open), nil, 404, "Payout not found in this program"},
			{f.ownerB, "POST", b, fmt.Sprintf("/payouts/%d/cancel", open), nil, 404, "Payout not found in this program"},
			{f.ownerB, "POST", b, fmt.Sprintf("/payouts/%d/pay", paidID), nil, 404, "Payout not found in this program"},
			{f.ownerB, "POST", b, "/payouts", map[string]any{"partner_id": f.r, "currency": "USD"}, 404, "Partner not found in this program"},
			{f.owner, "POST", a, "/payouts", map[string]any{"partner_id": f.q, "currency": "USD"}, 404, "Partner not found in this program"},
			{f.owner, "POST", a, "/payouts/999999999/pay", nil, 404, "Payout not found in this program"},
			{f.owner, "GET", 999999999, "/commissions", nil, 403, "You do not have access to this program"},
			// A program API key is not a session.
			{f.a.key, "GET", a, "/commissions", nil, 401, "Invalid session token. Sign in again."},
			{f.a.key, "GET", a, "/payouts", nil, 401, "Invalid session token. Sign in again."},
			{f.a.key, "POST", a, "/payouts", map[string]any{"partner_id": f.r, "currency": "USD"}, 401, "Invalid session token. Sign in again."},
			{f.a.key, "POST", a, fmt.Sprintf("/payouts/%d/pay", open), nil, 401, "Invalid session token. Sign in again."},
		} {
			wantRefusal(t, f.call(c.token, c.method, c.prog, c.suffix, c.body), c.status, c.message)
		}
		wantRefusal(t, e.client("203.0.113.94").do("GET", fmt.Sprintf("/api/v1/programs/%d/commissions", a), nil), 401,
			"Missing or malformed Authorization header. Expected: Bearer <session_token>")
		f.unchanged(t, before)
		if e.countRows("commissions", "SELECT count(*) FROM commissions.withdrawals WHERE id = $1 AND status = 'open' AND reference = ''", open) != 1 {
			t.Fatal("the open payout changed")
		}
	})

	t.Run("a signed-out session and a suspended user are refused", func(t *testing.T) {
		uid := e.id("POST", "/admin/v1/users", map[string]any{"email": "leaving@moneya.example"})
		e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/members", a), map[string]any{"user_id": uid, "active": true, "permissions": []string{"tracking:read"}})
		session := func() string {
			tok, _ := e.admin("POST", "/admin/v1/sessions", map[string]any{"user_id": uid})["token"].(string)
			return tok
		}
		out, kept := session(), session()
		e.sync()
		f.call(out, "GET", a, "/commissions", nil).want(t, 200)
		// The sign-out answers once every replica has it.
		e.client("198.51.100.9").do("POST", "/api/v1/dashboard/auth/signout", nil, "Authorization", "Bearer "+out).want(t, 204)
		wantRefusal(t, f.call(out, "GET", a, "/commissions", nil), 401, "Invalid session token. Sign in again.")
		f.call(kept, "GET", a, "/payouts", nil).want(t, 200)

		e.admin("PATCH", fmt.Sprintf("/admin/v1/users/%d", uid), map[string]any{"blocked": true})
		began := time.Now()
		for f.call(kept, "GET", a, "/commissions", nil).Status != 401 {
			if time.Since(began) > replicaWait {
				t.Fatalf("a suspended user's session still works after %s", replicaWait)
			}
			time.Sleep(50 * time.Millisecond)
		}
		wantRefusal(t, f.call(kept, "GET", a, "/payouts", nil), 401, "Invalid session token. Sign in again.")
	})
}
