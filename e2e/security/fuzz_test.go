package security_test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/auth/oidctest"
)

// The black-box fuzz of issue 23 ("bad input is never a 5xx"): every route
// the gateway serves, public and admin, gets structure-aware mutations of
// its headers, query values, path parameters and JSON body, and raw
// HTTP/1.1 framing the standard client cannot send (broken chunk sizes,
// truncated bodies, mismatched Content-Length), all through the real
// services and database. No answer may be a 5xx, and every request must be
// answered (a handler panic closes the connection without one).
//
// It is deterministic (one seed, printed on failure with the request) and
// lean: about 1,700 requests, about a minute with -race on two busy cores.

// fuzzSeed fixes the mutations; change it to explore, keep it fixed in CI.
const fuzzSeed = 23

// fuzzRoute is one route as a template: {name} placeholders in the path are
// filled from the fixture (fuzzFixture.params), query lists the parameters
// the route reads, body is a valid JSON body (nil: none), auth the
// credential it needs.
type fuzzRoute struct {
	method, path string
	auth         string // "", "key", "session", "admin"
	query        map[string]string
	body         map[string]any
	form         bool // a form post (the sign-in callbacks)
}

func fuzzRoutes() []fuzzRoute {
	click := map[string]any{"affiliate_url": "https://brand.example/?via=FUZZ", "page_url": "https://brand.example/p", "page_title": "T",
		"referrer_url": "https://ref.example/", "session_id": "s1", "screen_resolution": "1x1", "viewport_size": "1x1", "language": "en",
		"timezone": "UTC", "user_agent": "ua", "existing_click_id": "c1", "visitor_ip": "203.0.113.1", "program_id": "{program}",
		"additional_data": map[string]any{"test_mode": false, "program_id": "{program}"}}
	lead := map[string]any{"click_id": "c1", "customer_key": "k1", "email": "a@b.example", "program_id": "{program}",
		"additional_data": map[string]any{"event_name": "signup"}}
	sale := map[string]any{"transaction_id": "t1", "amount_cents": 1000, "currency": "USD", "customer_key": "k1", "click_id": "c1",
		"provider": "stripe", "provider_payment_id": "pi_1", "occurred_at": "2025-05-01T10:00:00Z", "livemode": true,
		"additional_data": map[string]any{"product_id": "p"}}
	refund := map[string]any{"transaction_id": "t1", "refund_amount_cents": 100, "currency": "USD"}
	rng := map[string]string{"period": "30d", "dateFrom": "2025-01-01", "dateTo": "2025-01-31", "timezone": "Europe/Paris", "limit": "5"}
	program := map[string]any{"advertiser_id": "{advertiser}", "name": "P", "domain": "brand.example", "commission_type": "percent",
		"commission_rate": 10, "allowed_origins": []any{"https://shop.example"}, "lead_auth_policy": "server_required",
		"attribution_window_days": 30, "cookie_duration": 30, "hold_days": 0, "currency": "USD", "payment_tracking_mode": "processor",
		"processor_connection": map[string]any{"account_id": "acct_1", "charges_enabled": true, "connected_at": "2025-05-01T10:00:00Z"}}
	return []fuzzRoute{
		{method: "POST", path: "/api/v1/track/click", body: click},
		{method: "POST", path: "/api/v1/track/click", auth: "key", body: click},
		{method: "POST", path: "/api/v1/track/lead", auth: "key", body: lead},
		{method: "POST", path: "/api/v1/track/lead", body: lead},
		{method: "POST", path: "/api/v1/track/visit", body: map[string]any{"program_id": "{program}", "page_url": "https://brand.example/", "click_id": "c1", "referrer_url": "https://r.example/", "session_id": "s"}},
		{method: "GET", path: "/api/v1/track/config", query: map[string]string{"program_id": "{program}"}},
		{method: "OPTIONS", path: "/api/v1/track/click"},
		{method: "POST", path: "/api/v1/track/sale", auth: "key", body: sale},
		{method: "POST", path: "/api/v1/track/refund", auth: "key", body: refund},
		{method: "POST", path: "/api/v1/webhooks/processor", body: map[string]any{"id": "evt_1", "type": "charge.succeeded", "account": "acct_1", "data": map[string]any{"object": map[string]any{"id": "ch_1"}}}},
		{method: "GET", path: "/svc.js"},
		{method: "GET", path: "/api/openapi.json"},
		{method: "POST", path: "/api/v1/cli/auth/start"},
		{method: "POST", path: "/api/v1/cli/auth/callback", body: map[string]any{"state": "s", "id_token": "a.b.c"}},
		{method: "POST", path: "/api/v1/cli/auth/callback", form: true, body: map[string]any{"state": "s", "id_token": "a.b.c"}},
		{method: "GET", path: "/api/v1/cli/auth/poll", query: map[string]string{"state": "s"}},
		{method: "POST", path: "/api/v1/cli/init", auth: "session", body: map[string]any{"name": "N", "domain": "brand.example", "commission_type": "percent", "commission_rate": 10, "advertiser_id": "{advertiser}"}},
		{method: "GET", path: "/api/v1/cli/programs", auth: "session"},
		{method: "GET", path: "/api/v1/cli/status", auth: "key"},
		{method: "POST", path: "/api/v1/cli/test-event", auth: "key", body: map[string]any{"event_type": "click", "type": "single"}},
		{method: "POST", path: "/api/v1/cli/stripe-connect", auth: "key"},
		{method: "GET", path: "/api/v1/dashboard/auth/start", query: map[string]string{"return_to": "/dashboard/", "tab_nonce": "n"}},
		{method: "POST", path: "/api/v1/dashboard/auth/callback", form: true, body: map[string]any{"state": "s", "id_token": "a.b.c"}},
		{method: "POST", path: "/api/v1/dashboard/auth/signout", auth: "session"},
		{method: "GET", path: "/api/v1/dashboard/me", auth: "session"},
		{method: "POST", path: "/api/v1/programs", auth: "session", body: map[string]any{"name": "N", "domain": "brand.example", "commission_type": "percent", "commission_rate": 10, "advertiser_id": "{advertiser}", "allowed_origins": []any{"https://brand.example"}}},
		{method: "GET", path: "/api/v1/programs", auth: "session", query: map[string]string{"limit": "10", "cursor": "1"}},
		{method: "GET", path: "/api/v1/programs/me/readiness", auth: "key"},
		{method: "GET", path: "/api/v1/programs/me/analytics/sources", auth: "key", query: rng},
		{method: "GET", path: "/api/tracking/performance/{program}", auth: "session", query: rng},
		{method: "GET", path: "/api/tracking/sources/{program}", auth: "session", query: rng},
		{method: "GET", path: "/api/tracking/partners/{program}", auth: "session", query: rng},
		{method: "GET", path: "/api/tracking/status/{program}", auth: "session"},
		{method: "GET", path: "/api/v1/programs/{program}/settings", auth: "session"},
		{method: "PATCH", path: "/api/v1/programs/{spare_program}/settings", auth: "session", body: map[string]any{"allowed_origins": []any{"https://shop.example"}, "lead_auth_policy": "server_required", "payment_tracking_mode": "processor"}},
		{method: "GET", path: "/dashboard/"},
		// The brand console's lists (accounts, analytics' figures, commissions).
		{method: "GET", path: "/api/v1/programs/{program}/keys", auth: "session"},
		{method: "GET", path: "/api/v1/programs/{program}/members", auth: "session", query: map[string]string{"limit": "10", "cursor": "1"}},
		{method: "GET", path: "/api/v1/programs/{program}/partners", auth: "session", query: map[string]string{"limit": "10", "cursor": "1"}},
		{method: "GET", path: "/api/v1/programs/{program}/commissions", auth: "session", query: map[string]string{"status": "approved", "partner_id": "{partner}", "from": "2025-01-01", "to": "2025-01-31", "limit": "10"}},
		{method: "GET", path: "/api/v1/programs/{program}/payouts", auth: "session"},
		{method: "POST", path: "/api/v1/programs/{spare_program}/partners", auth: "session", body: map[string]any{"email": "f@partners.example", "name": "F"}},
		// Webhooks (issue 22): the console's endpoint routes and `svc
		// listen`'s. Deletion and creation go to the spare program.
		{method: "GET", path: "/api/v1/programs/{program}/webhooks", auth: "session"},
		{method: "POST", path: "/api/v1/programs/{spare_program}/webhooks", auth: "session", body: map[string]any{"url": "http://127.0.0.1:9/hooks",
			"events": []any{"sale.created", "commission.created"}, "description": "d", "include_test": true}},
		{method: "PATCH", path: "/api/v1/programs/{program}/webhooks/{webhook}", auth: "session", body: map[string]any{"description": "d", "enabled": true,
			"events": []any{"sale.created"}, "url": "http://127.0.0.1:9/hooks", "include_test": false}},
		{method: "POST", path: "/api/v1/programs/{program}/webhooks/{webhook}/secret", auth: "session"},
		{method: "POST", path: "/api/v1/programs/{program}/webhooks/{webhook}/test", auth: "session"},
		{method: "GET", path: "/api/v1/programs/{program}/webhooks/{webhook}/deliveries", auth: "session", query: map[string]string{"status": "pending", "limit": "10", "cursor": "1"}},
		{method: "POST", path: "/api/v1/programs/{program}/webhooks/{webhook}/deliveries/{delivery}/retry", auth: "session"},
		{method: "GET", path: "/api/v1/programs/{program}/webhooks/notifications", auth: "session", query: map[string]string{"limit": "10", "cursor": "MQ"}},
		{method: "DELETE", path: "/api/v1/programs/{spare_program}/webhooks/{spare_webhook}", auth: "session"},
		{method: "POST", path: "/api/v1/programs/{program}/webhooks/listen", auth: "key", body: map[string]any{"events": []any{"sale.created"}, "include_test": true}},
		{method: "GET", path: "/api/v1/programs/{program}/webhooks/listen/{listener}/events", auth: "key", query: map[string]string{"after": "0", "wait": "0"}},
		{method: "DELETE", path: "/api/v1/programs/{program}/webhooks/listen/{spare_listener}", auth: "key"},
		// The processor's redirect back: no session, the state is the
		// credential (an unknown one is a 400 page).
		{method: "GET", path: "/api/v1/processor/connect/callback", query: map[string]string{"code": "ac_fuzz", "state": "fuzz-state"}},
		// Admin: writes go to the spare program, link, key and user, so
		// the routes above keep working credentials.
		{method: "POST", path: "/admin/v1/advertisers", auth: "admin", body: map[string]any{"name": "A", "email": "a@brand.example"}},
		{method: "POST", path: "/admin/v1/users", auth: "admin", body: map[string]any{"email": "u@brand.example", "name": "U", "advertiser_id": "{advertiser}"}},
		{method: "GET", path: "/admin/v1/users", auth: "admin", query: map[string]string{"email": "u@brand.example"}},
		{method: "POST", path: "/admin/v1/programs", auth: "admin", body: program},
		{method: "GET", path: "/admin/v1/programs", auth: "admin", query: map[string]string{"advertiser_id": "{advertiser}"}},
		{method: "GET", path: "/admin/v1/programs/{program}", auth: "admin"},
		{method: "GET", path: "/admin/v1/programs/{program}/links", auth: "admin"},
		{method: "GET", path: "/admin/v1/programs/{program}/keys", auth: "admin"},
		{method: "GET", path: "/admin/v1/partners", auth: "admin", query: map[string]string{"email": "p@partners.example"}},
		{method: "PATCH", path: "/admin/v1/programs/{spare_program}", auth: "admin", body: program},
		{method: "POST", path: "/admin/v1/programs/{spare_program}/members", auth: "admin", body: map[string]any{"user_id": "{spare_user}", "active": true, "permissions": []any{"tracking:read"}}},
		{method: "POST", path: "/admin/v1/programs/{spare_program}/keys", auth: "admin", body: map[string]any{"test": true}},
		{method: "POST", path: "/admin/v1/keys/{spare_key}/rotation", auth: "admin", body: map[string]any{"deadline": "2099-01-01T00:00:00Z"}},
		{method: "POST", path: "/admin/v1/partners", auth: "admin", body: map[string]any{"name": "P", "email": "p2@partners.example"}},
		{method: "POST", path: "/admin/v1/programs/{spare_program}/partners", auth: "admin", body: map[string]any{"partner_id": "{partner}", "approved": true}},
		{method: "POST", path: "/admin/v1/programs/{spare_program}/links", auth: "admin", body: map[string]any{"partner_id": "{partner}", "code": "FUZZ2", "active": true}},
		{method: "PATCH", path: "/admin/v1/links/{spare_link}", auth: "admin", body: map[string]any{"active": true}},
		{method: "POST", path: "/admin/v1/sessions", auth: "admin", body: map[string]any{"user_id": "{spare_user}"}},
		{method: "GET", path: "/admin/v1/commissions/{n}", auth: "admin"},
		{method: "POST", path: "/admin/v1/commissions/approve-due", auth: "admin"},
		{method: "GET", path: "/admin/v1/sales/{txn}", auth: "admin", query: map[string]string{"program_id": "{program}"}},
		{method: "GET", path: "/admin/v1/partners/{partner}/balances", auth: "admin"},
		{method: "POST", path: "/admin/v1/partners/{partner}/withdrawals", auth: "admin", body: map[string]any{"amount": 100, "currency": "USD"}},
		{method: "GET", path: "/admin/v1/partners/{partner}/withdrawals", auth: "admin"},
		{method: "POST", path: "/admin/v1/withdrawals/{n}/pay", auth: "admin"},
		{method: "POST", path: "/admin/v1/withdrawals/{n}/cancel", auth: "admin"},
		{method: "GET", path: "/admin/v1/partners/{partner}/notifications", auth: "admin"},
		{method: "GET", path: "/admin/v1/advertisers/{advertiser}/notifications", auth: "admin"},
		// GET /admin/v1/catalog/sync is left out: it waits by design
		// (up to its timeout parameter) for a sequence number.
	}
}

// fuzzFixture is the catalog the routes' templates name.
type fuzzFixture struct {
	params  map[string]string // placeholder -> value
	key     string
	session string
}

func newFuzzFixture(e *env) fuzzFixture {
	e.t.Helper()
	// A stack of its own has no users yet; a running one may have this
	// run's before (SECURITY_FUZZ_GATEWAY), so the emails are made unique.
	sfx := ""
	if e.Stack == nil {
		sfx = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	adv := e.id("POST", "/admin/v1/advertisers", map[string]any{"name": "Brand", "email": "b" + sfx + "@brand.example"})
	prog := func(name string) int64 {
		return e.id("POST", "/admin/v1/programs", map[string]any{"advertiser_id": adv, "name": name, "domain": "brand.example",
			"commission_type": "percent", "commission_rate": 10, "allowed_origins": []string{"https://shop.example"}})
	}
	p, spare := prog("Fuzz"), prog("Spare")
	partner := e.id("POST", "/admin/v1/partners", map[string]any{"name": "P", "email": "p" + sfx + "@partners.example"})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", p), map[string]any{"partner_id": partner, "approved": true})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/links", p), map[string]any{"partner_id": partner, "code": "FUZZ", "active": true})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", spare), map[string]any{"partner_id": partner, "approved": true})
	link := e.id("POST", fmt.Sprintf("/admin/v1/programs/%d/links", spare), map[string]any{"partner_id": partner, "code": "SPARE", "active": true})
	key := e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/keys", p), map[string]any{"test": false})["key"].(string)
	spareKey := e.id("POST", fmt.Sprintf("/admin/v1/programs/%d/keys", spare), map[string]any{"test": false})
	user := e.id("POST", "/admin/v1/users", map[string]any{"email": "owner" + sfx + "@brand.example"})
	spareUser := e.id("POST", "/admin/v1/users", map[string]any{"email": "spare" + sfx + "@brand.example"})
	for _, prog := range []int64{p, spare} {
		e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/members", prog), map[string]any{"user_id": user, "active": true, "permissions": []string{"tracking:read", "tracking:write"}})
	}
	session := e.admin("POST", "/admin/v1/sessions", map[string]any{"user_id": user})["token"].(string)
	e.sync()
	// A webhook endpoint (with a delivery: its ping) and a listener of the
	// program, a spare endpoint and listener the deletions take.
	hook := func(prog int64) (int64, int64) {
		c := e.client("198.18.0.20").withKey(session)
		r := c.do("POST", fmt.Sprintf("/api/v1/programs/%d/webhooks", prog), map[string]any{"url": "http://127.0.0.1:9/hooks", "events": []string{"sale.created"}}).want(e.t, 201)
		id := int64(r.get("data", "id").(float64))
		d := c.do("POST", fmt.Sprintf("/api/v1/programs/%d/webhooks/%d/test", prog, id), nil).want(e.t, 202)
		return id, int64(d.get("data", "delivery_id").(float64))
	}
	listener := func() int64 {
		r := e.client("198.18.0.21").withKey(key).do("POST", fmt.Sprintf("/api/v1/programs/%d/webhooks/listen", p), map[string]any{}).want(e.t, 201)
		return int64(r.get("data", "id").(float64))
	}
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	fx := fuzzFixture{
		params: map[string]string{"program": i(p), "spare_program": i(spare), "advertiser": i(adv), "partner": i(partner),
			"spare_link": i(link), "spare_key": i(spareKey), "spare_user": i(spareUser), "n": "1", "txn": "t1"},
		key: key, session: session,
	}
	// Only a stack with webhooks (every one but the framing and UTF-8
	// tests', which drive other routes) has its fixtures.
	if e.Stack == nil || e.Stack.Instance("webhooks") != nil {
		webhook, delivery := hook(p)
		spareWebhook, _ := hook(spare)
		for k, v := range map[string]int64{"webhook": webhook, "delivery": delivery, "spare_webhook": spareWebhook,
			"listener": listener(), "spare_listener": listener()} {
			fx.params[k] = i(v)
		}
	}
	return fx
}

// fuzzRequest is one request as bytes on the wire, and what it was.
type fuzzRequest struct {
	what string // the route and the mutation, for the failure message
	raw  []byte
	// halfClose ends the client's side after raw (a truncated body).
	halfClose bool
}

// fuzzer builds requests for one route from one random stream.
type fuzzer struct {
	rnd *rand.Rand
	fx  fuzzFixture
	ip  int
}

// Hostile values for strings: invalid UTF-8, NUL, control and format
// characters, huge, numeric edges, paths and escapes.
var fuzzStrings = []string{
	"\xff", "x\xfe\xfd", "\xc0\xaf", "\xed\xa0\x80", "a\x00b", "\x00", "", " ", "\t\r\n", "\u202e\u200b", "😀",
	strings.Repeat("é", 3000), strings.Repeat("A", 70_000), "-1", "0", "1e999", "9223372036854775808",
	"-9223372036854775809", "NaN", "null", "true", "../../etc/passwd", "%00", "%ff", "<script>", "' OR 1=1--",
	"0001-01-01", "9999-12-31T23:59:59Z", "Etc/GMT+14", "Local", "../UTC", "2025-02-30", "all",
}

// Hostile JSON values for body fields (raw JSON text, a few not valid).
var fuzzJSON = []string{
	`"a\u0000b"`, `"\u0000"`, `"\ud800"`, "\"\xff\"", `1e400`, `-0`, `9223372036854775808`, `-9223372036854775809`,
	`1.5`, `0`, `-1`, `""`, `" "`, `{}`, `[]`, `null`, `true`, `false`, `[null]`, `[1,"a",{}]`, `{"a":"\u0000"}`,
	`"` + strings.Repeat("x", 5000) + `"`, strings.Repeat("[", 20000), `{"k":` + strings.Repeat(`{"k":`, 500) + `1` + strings.Repeat("}", 501),
	`"2025-02-30T10:00:00Z"`, `"https://\u0000.example"`, `"javascript:alert(1)"`,
}

// Header names every route may read, and a hostile value list.
var fuzzHeaders = []string{"User-Agent", "Origin", "Authorization", "Content-Type", "X-Forwarded-For", "Referer", "Cookie",
	"Idempotency-Key", "X-Request-ID", "Accept", "Accept-Language", "X-Forwarded-Proto", "Stripe-Signature", "X-Processor-Signature",
	"Access-Control-Request-Headers", "Access-Control-Request-Method", "If-None-Match"}

var fuzzHeaderValues = []string{
	"\xff", "x\xfe", "Bearer \xff\xfe", "Bearer ", "Bearer a\x00b", "a\x00b", strings.Repeat("A", 16<<10), "\x01\x7f",
	"application/json; charset=\xff", "application/json; charset=latin1", "text/plain", "multipart/form-data; boundary=x",
	"application/x-www-form-urlencoded", "null", "http://\xff.example", "https://shop.example", "203.0.113.1, \xff",
	"999.999.999.999", "::1, ::ffff:1.2.3.4", "svc_session=\xff; a=\x00", "t=abc,v1=\xff", "__proto__",
}

func (f *fuzzer) pick(list []string) string { return list[f.rnd.IntN(len(list))] }

// fill replaces {placeholders} with the fixture's values; numbers stay
// numbers in bodies (a placeholder that is a whole value).
func (f *fuzzer) fill(s string) string {
	for k, v := range f.fx.params {
		s = strings.ReplaceAll(s, "{"+k+"}", v)
	}
	return s
}

func (f *fuzzer) fillValue(v any) any {
	switch x := v.(type) {
	case string:
		s := f.fill(x)
		if s != x && strings.HasPrefix(x, "{") {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return n
			}
		}
		return s
	case map[string]any:
		out := map[string]any{}
		for k, vv := range x {
			out[k] = f.fillValue(vv)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, vv := range x {
			out[i] = f.fillValue(vv)
		}
		return out
	}
	return v
}

// request builds one mutated request for rt: each of headers, query, path
// and body is mutated with some probability, at least one of them always.
func (f *fuzzer) request(rt fuzzRoute) fuzzRequest {
	var what []string
	mutH, mutQ, mutP, mutB := f.rnd.IntN(3) == 0, f.rnd.IntN(3) == 0, f.rnd.IntN(3) == 0, f.rnd.IntN(2) == 0
	if !(mutH || mutQ || mutP || mutB) {
		mutH = true
	}
	// Path: a placeholder segment, or any segment, replaced.
	path := rt.path
	if mutP {
		segs := strings.Split(path, "/")
		i := 1 + f.rnd.IntN(len(segs)-1)
		for j, s := range segs {
			if strings.HasPrefix(s, "{") {
				i = j
			}
		}
		v := url.PathEscape(f.pick(fuzzStrings))
		if len(v) > 4096 {
			v = v[:4096]
		}
		segs[i] = v
		path = strings.Join(segs, "/")
		what = append(what, "path "+short(path))
	}
	path = f.fill(path)
	// Query: the route's own parameters, one of them (or a new one) hostile.
	q := url.Values{}
	for k, v := range rt.query {
		q.Set(k, f.fill(v))
	}
	rawQuery := q.Encode()
	if mutQ {
		names := append(sortedKeys(rt.query), "x", "program_id", "limit", "return_to", "state")
		name := f.pick(names)
		v := f.pick(fuzzStrings)
		q.Set(name, v)
		rawQuery = q.Encode()
		if f.rnd.IntN(3) == 0 { // raw bytes and broken escapes, unencoded
			rawQuery += "&" + name + "=" + f.pick([]string{"%FF", "%C0%AF", "%00", "%", "%zz", "%ED%A0%80", "a%00", "\xff"})
		}
		what = append(what, "query "+short(rawQuery))
	}
	target := path
	if rawQuery != "" {
		target += "?" + rawQuery
	}
	// Body.
	var body []byte
	ctype := ""
	if rt.body != nil {
		filled := f.fillValue(rt.body).(map[string]any)
		if rt.form {
			ctype = "application/x-www-form-urlencoded"
			v := url.Values{}
			for k, x := range filled {
				v.Set(k, fmt.Sprint(x))
			}
			if mutB {
				v.Set(f.pick(sortedKeys(filled)), f.pick(fuzzStrings))
				what = append(what, "form")
			}
			body = []byte(v.Encode())
		} else {
			ctype = "application/json"
			body, _ = json.Marshal(filled)
			if mutB {
				body = f.mutateJSON(filled)
				what = append(what, "body "+short(string(body)))
			}
		}
	} else if mutB {
		ctype = "application/json"
		body = []byte(`{"x":` + f.pick(fuzzJSON) + `}`)
		what = append(what, "body "+short(string(body)))
	}
	headers := [][2]string{{"Host", "gateway.test"}, {"X-Forwarded-For", f.nextIP()}, {"Connection", "close"}}
	if ctype != "" {
		headers = append(headers, [2]string{"Content-Type", ctype})
	}
	switch rt.auth {
	case "key":
		headers = append(headers, [2]string{"Authorization", "Bearer " + f.fx.key})
	case "session":
		headers = append(headers, [2]string{"Authorization", "Bearer " + f.fx.session})
	case "admin":
		headers = append(headers, [2]string{"Authorization", "Bearer " + stacktest.AdminToken})
	}
	if mutH {
		for n := 1 + f.rnd.IntN(2); n > 0; n-- {
			name, value := f.pick(fuzzHeaders), f.pick(fuzzHeaderValues)
			headers = setHeader(headers, name, value)
			what = append(what, "header "+name+": "+short(value))
		}
	}
	headers = append(headers, [2]string{"Content-Length", strconv.Itoa(len(body))})
	return fuzzRequest{what: rt.method + " " + rt.path + " [" + strings.Join(what, "; ") + "]", raw: wire(rt.method, target, headers, body)}
}

// mutateJSON replaces one field (at the top level or one level down) with
// a hostile value, or breaks the body as a whole.
func (f *fuzzer) mutateJSON(obj map[string]any) []byte {
	good, _ := json.Marshal(obj)
	switch f.rnd.IntN(8) {
	case 0:
		return good[:f.rnd.IntN(len(good))] // truncated
	case 1:
		return append(good, f.pick([]string{"{}", " x", "\x00", "\xff"})...) // trailing data
	case 2:
		return []byte(f.pick([]string{"[]", `"s"`, "1", "null", "\xef\xbb\xbf{}", "{\"a\":1,\"a\":\"\\u0000\"}", "\xff", ""}))
	}
	keys := sortedKeys(obj)
	key := f.pick(append(keys, "unknown_field"))
	if sub, ok := obj[key].(map[string]any); ok && f.rnd.IntN(2) == 0 && len(sub) > 0 {
		sk := f.pick(sortedKeys(sub))
		return []byte(replaceField(good, key, replaceField(mustJSON(sub), sk, []byte(f.pick(fuzzJSON)))))
	}
	return replaceField(good, key, []byte(f.pick(fuzzJSON)))
}

// replaceField re-encodes obj (JSON text) with key's value replaced by raw
// JSON text (valid or not).
func replaceField(obj []byte, key string, raw []byte) []byte {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(obj, &m)
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	keys := make([]string, 0, len(m)+1)
	for k := range m {
		keys = append(keys, k)
	}
	if _, ok := m[key]; !ok {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !first {
			b.WriteByte(',')
		}
		first = false
		kk, _ := json.Marshal(k)
		b.Write(kk)
		b.WriteByte(':')
		if k == key {
			b.Write(raw)
		} else {
			b.Write(m[k])
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// framing builds requests whose HTTP/1.1 framing is broken, on a route's
// valid request: what a client reading its body sees as an error.
func (f *fuzzer) framing(rt fuzzRoute) []fuzzRequest {
	target := f.fill(rt.path)
	var body []byte
	ctype := "application/json"
	if rt.body != nil {
		body = mustJSON(f.fillValue(rt.body))
	} else {
		body = []byte(`{}`)
	}
	if rt.form {
		ctype = "application/x-www-form-urlencoded"
		body = []byte("state=s&id_token=a.b.c")
	}
	head := func(extra ...[2]string) [][2]string {
		h := [][2]string{{"Host", "gateway.test"}, {"X-Forwarded-For", f.nextIP()}, {"Connection", "close"}, {"Content-Type", ctype}}
		switch rt.auth {
		case "key":
			h = append(h, [2]string{"Authorization", "Bearer " + f.fx.key})
		case "session":
			h = append(h, [2]string{"Authorization", "Bearer " + f.fx.session})
		case "admin":
			h = append(h, [2]string{"Authorization", "Bearer " + stacktest.AdminToken})
		}
		return append(h, extra...)
	}
	chunked := [2]string{"Transfer-Encoding", "chunked"}
	half := len(body) / 2
	cases := []struct {
		name      string
		headers   [][2]string
		body      string
		halfClose bool
	}{
		{"invalid chunk size", head(chunked), "zz\r\n" + string(body) + "\r\n0\r\n\r\n", false},
		{"invalid second chunk size", head(chunked), fmt.Sprintf("%x\r\n%s\r\n-1\r\n%s\r\n0\r\n\r\n", half, body[:half], body[half:]), false},
		{"chunk size overflow", head(chunked), "fffffffffffffffffffff\r\n" + string(body) + "\r\n0\r\n\r\n", false},
		{"chunk longer than its size", head(chunked), fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", half, body), false},
		{"chunked body cut before the last chunk", head(chunked), fmt.Sprintf("%x\r\n%s\r\n", len(body), body), true},
		{"whole body, then the client's side closed", head([2]string{"Content-Length", strconv.Itoa(len(body))}), string(body), true},
		{"Content-Length beyond the body", head([2]string{"Content-Length", strconv.Itoa(len(body) + 10)}), string(body), true},
		{"Content-Length short of the body", head([2]string{"Content-Length", strconv.Itoa(half)}), string(body), false},
		{"Content-Length and chunked", head([2]string{"Content-Length", "3"}, chunked), fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body), false},
		{"two Content-Lengths", head([2]string{"Content-Length", strconv.Itoa(len(body))}, [2]string{"Content-Length", "1"}), string(body), false},
		{"negative Content-Length", head([2]string{"Content-Length", "-1"}), string(body), false},
		{"bad chunk extension and trailer", head(chunked), fmt.Sprintf("%x;\xff=\x00\r\n%s\r\n0\r\nX-T\xff: \x00\r\n\r\n", len(body), body), false},
	}
	out := make([]fuzzRequest, 0, len(cases))
	for _, c := range cases {
		out = append(out, fuzzRequest{
			what:      rt.method + " " + rt.path + " [framing: " + c.name + "]",
			raw:       append(wire(rt.method, target, c.headers, nil), c.body...),
			halfClose: c.halfClose,
		})
	}
	return out
}

func (f *fuzzer) nextIP() string {
	f.ip++
	return fmt.Sprintf("198.18.%d.%d", f.ip/250%250, 1+f.ip%250)
}

// wire writes a request line, headers and body as HTTP/1.1 bytes, whatever
// they hold.
func wire(method, target string, headers [][2]string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", method, target)
	for _, h := range headers {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

func setHeader(h [][2]string, name, value string) [][2]string {
	for i := range h {
		if strings.EqualFold(h[i][0], name) {
			h[i][1] = value
			return h
		}
	}
	return append(h, [2]string{name, value})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func short(s string) string {
	if len(s) > 120 {
		return strconv.Quote(s[:120]) + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return strconv.Quote(s)
}

// send writes one request on a fresh connection and reads the answer.
func send(addr string, req fuzzRequest) (int, string, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write(req.raw); err != nil && !isReset(err) {
		return 0, "", err
	}
	if req.halfClose {
		_ = conn.(*net.TCPConn).CloseWrite()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "", fmt.Errorf("no answer: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, string(b), nil
}

// isReset: the server may answer and close before reading a large body.
func isReset(err error) bool {
	return strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "broken pipe")
}

// fuzzRequests is the whole deterministic request list.
func fuzzRequests(fx fuzzFixture, perRoute int) []fuzzRequest {
	f := &fuzzer{rnd: rand.New(rand.NewPCG(fuzzSeed, 0)), fx: fx}
	var out []fuzzRequest
	for _, rt := range fuzzRoutes() {
		for i := 0; i < perRoute; i++ {
			out = append(out, f.request(rt))
		}
		if rt.body != nil || rt.method == "POST" || rt.method == "PATCH" {
			out = append(out, f.framing(rt)...)
		}
	}
	// Interleave routes so that one route's limiter or slowness does not
	// decide the run's shape.
	f.rnd.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestFuzzNoServerErrors is the fuzz run: every answer below 500, every
// request answered.
func TestFuzzNoServerErrors(t *testing.T) {
	var e *env
	if gw := os.Getenv("SECURITY_FUZZ_GATEWAY"); gw != "" {
		// The issue's own setting: a stack started by make run (with
		// ADMIN_TOKEN set to stacktest.AdminToken), its real gateway and
		// processes, instead of one of the test's own.
		e = &env{t: t, Gateway: strings.TrimSuffix(gw, "/")}
	} else {
		vars := oidctest.Start(t).Env()
		vars["PROCESSOR_WEBHOOK_SECRET"] = "whsec_fuzz_0123456789abcdef0123456789"
		vars["PUBLIC_URL"] = "http://gateway.test" // turns the dashboard sign-in on
		e = start(t, vars)
	}
	fx := newFuzzFixture(e)
	perRoute := 22
	if v, err := strconv.Atoi(os.Getenv("SECURITY_FUZZ_PER_ROUTE")); err == nil && v > 0 {
		perRoute = v // the 40,000-request size is about 550
	}
	reqs := fuzzRequests(fx, perRoute)
	addr := strings.TrimPrefix(e.Gateway, "http://")
	type failure struct {
		req    fuzzRequest
		status int
		body   string
		err    error
		took   time.Duration
		at     time.Duration // since the run began
	}
	var (
		mu       sync.Mutex
		failures []failure
		slowest  []failure                    // the 10 slowest answers
		byRoute  = map[string]time.Duration{} // each route's slowest answer
	)
	runStart := time.Now()
	work := make(chan fuzzRequest)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for req := range work {
				began := time.Now()
				status, body, err := send(addr, req)
				took := time.Since(began)
				mu.Lock()
				if err != nil || status >= 500 {
					failures = append(failures, failure{req: req, status: status, body: body, err: err, took: took})
				}
				slowest = append(slowest, failure{req: req, status: status, took: took, at: began.Sub(runStart)})
				route, _, _ := strings.Cut(req.what, " [")
				byRoute[route] = max(byRoute[route], took)
				slices.SortFunc(slowest, func(a, b failure) int { return cmp.Compare(b.took, a.took) })
				slowest = slowest[:min(len(slowest), 10)]
				mu.Unlock()
			}
		}()
	}
	for _, r := range reqs {
		work <- r
	}
	close(work)
	wg.Wait()
	t.Logf("%d requests (seed %d); the slowest:", len(reqs), fuzzSeed)
	for _, f := range slowest {
		t.Logf("  %s, sent at %s: %s (%d)", f.took.Round(time.Millisecond), f.at.Round(time.Millisecond), short(f.req.what), f.status)
	}
	if os.Getenv("SECURITY_FUZZ_PER_ROUTE") != "" {
		for _, route := range sortedKeys(byRoute) {
			t.Logf("  slowest %s: %s", route, byRoute[route].Round(time.Millisecond))
		}
	}
	for i, f := range failures {
		if i == 20 {
			t.Errorf("... and %d more", len(failures)-i)
			break
		}
		t.Errorf("%s: status %d err %v: %s", f.req.what, f.status, f.err, f.body)
	}
}
