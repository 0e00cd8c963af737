package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/svc-dev/svc/api/openapivalidate"
	"github.com/svc-dev/svc/libs/errkind"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	catalogpg "github.com/svc-dev/svc/services/accounts/internal/catalog/pgstore"
)

// console drives the console's routes through the gateway and checks
// every answer against api/openapi.yaml.
type console struct {
	*dash
	v *openapivalidate.Validator
}

func startConsole(t *testing.T) *console {
	t.Helper()
	v, err := openapivalidate.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	return &console{dash: startDash(t), v: v}
}

// call sends method path with bearer and body and validates the answer.
func (c *console) call(method, path, bearer, body string) answer {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	vreq, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
	vreq.Header = req.Header
	if err := c.v.ValidateResponse(vreq, resp); err != nil {
		c.t.Errorf("%s %s: %v\n%s", method, path, err, raw)
	}
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

// signUp signs a new person up through the dashboard sign-in (SIGNUP=open)
// and returns their session, user id and workspace.
func (c *console) signUp(email string) (tok string, uid, workspace int64) {
	c.t.Helper()
	tok = c.sessionFrom(c.signInAs(verified(email, "")), "/dashboard/")
	if err := c.pool.QueryRow(context.Background(), `SELECT id, advertiser_id FROM users WHERE email = $1`, email).Scan(&uid, &workspace); err != nil {
		c.t.Fatal(err)
	}
	return tok, uid, workspace
}

const shop = `"name":"Shop","domain":"shop.example","commission_type":"percent","commission_rate":10`

func TestConsolePrograms(t *testing.T) {
	c := startConsole(t)
	alice, aliceID, aliceWS := c.signUp("alice@brand-a.example")
	bob, _, bobWS := c.signUp("bob@brand-b.example")
	// Carol has a user (an operator made it) but no workspace: invited.
	carolID := c.id(c.admin("POST", "/admin/v1/users", `{"email":"carol@brand-a.example"}`))
	carol := c.dashSession(carolID)
	programs := func() int { return c.count(`SELECT count(*) FROM programs`) }

	var created int64
	t.Run("create: 201 with the program, in the person's own workspace, creator a member with read and write", func(t *testing.T) {
		before := c.lastOutboxID()
		a := c.call("POST", "/api/v1/programs", alice, `{`+shop+`,"allowed_origins":["https://Shop.example/","http://localhost:8000"]}`)
		if a.status != 201 || a.header.Get("X-Catalog-Seq") == "" || a.header.Get("X-RateLimit-Limit") != "30" || a.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("%d %v %s", a.status, a.header, a.raw)
		}
		d := a.body["data"].(map[string]any)
		created = int64(d["id"].(float64))
		if int64(d["advertiser_id"].(float64)) != aliceWS || d["name"] != "Shop" || d["commission_type"] != "percent" || d["commission_rate"] != 10.0 ||
			strings.Join(toStrings(d["allowed_origins"]), ",") != "https://shop.example,http://localhost:8000" || d["payment_tracking_mode"] != "processor_connect" {
			t.Fatalf("program %s", a.raw)
		}
		var active bool
		var perms []string
		if err := c.pool.QueryRow(context.Background(), `SELECT active, permissions FROM memberships WHERE program_id = $1 AND user_id = $2`, created, aliceID).
			Scan(&active, &perms); err != nil || !active || strings.Join(perms, ",") != "tracking:read,tracking:write" {
			t.Fatalf("membership %v %v %v", active, perms, err)
		}
		var types []string
		for _, e := range c.catalogEvents(before) {
			types = append(types, e.Type)
		}
		if strings.Join(types, ",") != eventsv1.TypeProgramUpserted+","+eventsv1.TypeMembershipUpserted {
			t.Fatalf("events %v", types)
		}
		// The settings routes now work for the creator.
		if s := c.call("GET", "/api/v1/programs/"+itoa(created)+"/settings", alice, ""); s.status != 200 || !strings.Contains(s.raw, `"allowed_origins":["https://shop.example","http://localhost:8000"]`) {
			t.Fatalf("settings %d %s", s.status, s.raw)
		}
	})

	t.Run("hold_days: the brand's hold period, 30 days when left out, 0 approves at once", func(t *testing.T) {
		for _, tc := range []struct {
			body string
			want float64
		}{{`{` + shop + `}`, 30}, {`{` + shop + `,"hold_days":0}`, 0}, {`{` + shop + `,"hold_days":14}`, 14}} {
			a := c.call("POST", "/api/v1/programs", alice, tc.body)
			if a.status != 201 || a.body["data"].(map[string]any)["hold_days"] != tc.want {
				t.Fatalf("%s: %d %s", tc.body, a.status, a.raw)
			}
			var held int
			id := int64(a.body["data"].(map[string]any)["id"].(float64))
			if err := c.pool.QueryRow(context.Background(), `SELECT hold_days FROM programs WHERE id = $1`, id).Scan(&held); err != nil || float64(held) != tc.want {
				t.Fatalf("%s: stored hold_days %d %v", tc.body, held, err)
			}
		}
	})

	t.Run("advertiser_id naming the own workspace, as a number or a string", func(t *testing.T) {
		for _, adv := range []string{itoa(aliceWS), `"` + itoa(aliceWS) + `"`, itoa(aliceWS) + ".0"} {
			if a := c.call("POST", "/api/v1/programs", alice, `{"advertiser_id":`+adv+`,`+shop+`}`); a.status != 201 {
				t.Fatalf("%s: %d %s", adv, a.status, a.raw)
			}
		}
	})

	t.Run("refusals write nothing", func(t *testing.T) {
		const (
			missing = "Missing required fields: name, domain, commission_type, commission_rate"
			notMine = "advertiser_id is not a workspace you own"
			noWS    = "You have no workspace to create a program in. Ask the owner of a workspace to invite you to one of its programs."
			origins = "allowed_origins must be a list of origins like https://shop.example.com"
		)
		for _, tc := range []struct {
			name, bearer, body string
			status             int
			message, code      string
		}{
			{"another tenant's workspace", bob, `{"advertiser_id":` + itoa(aliceWS) + `,` + shop + `}`, 403, notMine, ""},
			{"another tenant's workspace before validation", bob, `{"advertiser_id":` + itoa(aliceWS) + `}`, 403, notMine, ""},
			{"a workspace that does not exist", alice, `{"advertiser_id":999999,` + shop + `}`, 403, notMine, ""},
			{"advertiser_id not a number", alice, `{"advertiser_id":"abc",` + shop + `}`, 403, notMine, ""},
			{"advertiser_id a fraction", alice, `{"advertiser_id":` + itoa(aliceWS) + `.5,` + shop + `}`, 403, notMine, ""},
			{"a person without a workspace", carol, `{` + shop + `}`, 403, noWS, "NO_WORKSPACE"},
			{"a person without a workspace naming another's", carol, `{"advertiser_id":` + itoa(aliceWS) + `,` + shop + `}`, 403, notMine, ""},
			{"empty body", alice, `{}`, 400, missing, ""},
			{"blank name", alice, `{"name":"  ","domain":"shop.example","commission_type":"percent","commission_rate":10}`, 400, missing, ""},
			{"name not a string", alice, `{"name":5,"domain":"shop.example","commission_type":"percent","commission_rate":10}`, 400, missing, ""},
			{"unknown commission type", alice, `{"name":"Shop","domain":"shop.example","commission_type":"bogus","commission_rate":10}`, 400, "Invalid commission_type: bogus. Valid: percent, fixed, recurring_percent, recurring_fixed", ""},
			{"negative rate", alice, `{"name":"Shop","domain":"shop.example","commission_type":"percent","commission_rate":-1}`, 400, "commission_rate must be a positive number", ""},
			{"percent over 100", alice, `{"name":"Shop","domain":"shop.example","commission_type":"percent","commission_rate":101}`, 400, "commission_rate is a percentage for this type and cannot exceed 100", ""},
			{"fractional duration", alice, `{` + shop + `,"duration_months":1.5}`, 400, "duration_months must be a whole number of months (0 = lifetime)", ""},
			{"cookie duration out of range", alice, `{` + shop + `,"cookie_duration":366}`, 400, "cookie_duration must be a whole number of days from 1 to 365", ""},
			{"hold days out of range", alice, `{` + shop + `,"hold_days":366}`, 400, "hold_days must be a whole number of days from 0 to 365", ""},
			{"negative hold days", alice, `{` + shop + `,"hold_days":-1}`, 400, "hold_days must be a whole number of days from 0 to 365", ""},
			{"fractional hold days", alice, `{` + shop + `,"hold_days":1.5}`, 400, "hold_days must be a whole number of days from 0 to 365", ""},
			{"hold days not a number", alice, `{` + shop + `,"hold_days":"7"}`, 400, "hold_days must be a whole number of days from 0 to 365", ""},
			{"origins not a list", alice, `{` + shop + `,"allowed_origins":"https://shop.example"}`, 400, origins, ""},
			{"origin with a path", alice, `{` + shop + `,"allowed_origins":["https://shop.example/cart"]}`, 400, origins, ""},
			{"not JSON", alice, `{"name":`, 400, "", ""},
			{"NUL in the name", alice, `{"name":"Sh\u0000op","domain":"shop.example","commission_type":"percent","commission_rate":10}`, 400, "name must not contain the NUL character", ""},
			{"NUL in a number field", alice, `{"name":"Shop","domain":"shop.example","commission_type":"percent","commission_rate":"1\u00000"}`, 400, "commission_rate must be a positive number", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before, events := programs(), c.lastOutboxID()
				a := c.call("POST", "/api/v1/programs", tc.bearer, tc.body)
				if tc.message == "" {
					if a.status != tc.status || a.body["error"] == nil {
						t.Fatalf("%d %s", a.status, a.raw)
					}
				} else {
					wantRefusal(t, a, tc.status, tc.message, tc.code)
				}
				if programs() != before || len(c.catalogEvents(events)) != 0 {
					t.Fatalf("a refused create wrote: programs %d -> %d", before, programs())
				}
			})
		}
	})

	t.Run("sessions only: no token, an API key, a CLI login token", func(t *testing.T) {
		key := c.admin("POST", "/admin/v1/programs/"+itoa(created)+"/keys", `{}`).body["data"].(map[string]any)["key"].(string)
		for _, tc := range []struct{ name, bearer, message string }{
			{"no session", "", "Missing or malformed Authorization header. Expected: Bearer <session_token>"},
			{"program API key", key, "Invalid session token. Sign in again."},
			{"CLI login token", c.cliLogin("alice@brand-a.example"), "Invalid session token. Sign in again."},
		} {
			before := programs()
			wantRefusal(t, c.call("POST", "/api/v1/programs", tc.bearer, `{`+shop+`}`), 401, tc.message, "")
			wantRefusal(t, c.call("GET", "/api/v1/programs", tc.bearer, ""), 401, tc.message, "")
			if programs() != before {
				t.Fatalf("%s: a program was written", tc.name)
			}
		}
	})

	t.Run("list: the person's active memberships with their permissions; a second tenant sees none of the first's", func(t *testing.T) {
		// Carol reads Alice's first program; an inactive membership lists
		// nothing.
		c.admin("POST", "/admin/v1/programs/"+itoa(created)+"/members", `{"user_id":`+itoa(carolID)+`,"active":true,"permissions":["tracking:read"]}`)
		other := c.id(c.admin("POST", "/admin/v1/programs", `{"advertiser_id":`+itoa(bobWS)+`,`+shop+`}`))
		c.admin("POST", "/admin/v1/programs/"+itoa(other)+"/members", `{"user_id":`+itoa(carolID)+`,"active":false,"permissions":["tracking:read"]}`)

		a := c.call("GET", "/api/v1/programs", carol, "")
		items, _ := a.body["data"].([]any)
		if a.status != 200 || len(items) != 1 || a.body["next_cursor"] != nil || !strings.Contains(a.raw, `"next_cursor":null`) {
			t.Fatalf("carol: %d %s", a.status, a.raw)
		}
		it := items[0].(map[string]any)
		if int64(it["id"].(float64)) != created || strings.Join(toStrings(it["permissions"]), ",") != "tracking:read" || int64(it["advertiser_id"].(float64)) != aliceWS {
			t.Fatalf("carol's program %s", a.raw)
		}
		// A reader cannot create in the workspace of the program it reads.
		wantRefusal(t, c.call("POST", "/api/v1/programs", carol, `{"advertiser_id":`+itoa(aliceWS)+`,`+shop+`}`), 403, "advertiser_id is not a workspace you own", "")

		b := c.call("GET", "/api/v1/programs", bob, "")
		if b.status != 200 || b.raw != `{"data":[],"next_cursor":null}` {
			t.Fatalf("bob (a member of nothing yet) sees %s", b.raw)
		}
		// Nor touches: the settings routes refuse the second tenant.
		wantRefusal(t, c.call("PATCH", "/api/v1/programs/"+itoa(created)+"/settings", bob, `{"allowed_origins":["https://evil.example"]}`), 403, "You do not have access to this program", "")
	})

	t.Run("pages: limit and cursor", func(t *testing.T) {
		for i := 0; i < 4; i++ {
			if a := c.call("POST", "/api/v1/programs", bob, `{`+shop+`}`); a.status != 201 {
				t.Fatalf("%d %s", a.status, a.raw)
			}
		}
		var seen []string
		cursor := ""
		for pages := 0; ; pages++ {
			path := "/api/v1/programs?limit=3"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			a := c.call("GET", path, bob, "")
			items, _ := a.body["data"].([]any)
			if a.status != 200 || len(items) == 0 || len(items) > 3 || pages > 1 {
				t.Fatalf("page %d: %d %s", pages, a.status, a.raw)
			}
			for _, it := range items {
				seen = append(seen, strconv.FormatFloat(it.(map[string]any)["id"].(float64), 'f', 0, 64))
			}
			next, _ := a.body["next_cursor"].(string)
			if next == "" {
				break
			}
			cursor = next
		}
		var want []string
		rows, err := c.pool.Query(context.Background(), `SELECT p.id::text FROM programs p JOIN memberships m ON m.program_id = p.id
			JOIN users u ON u.id = m.user_id WHERE u.email = 'bob@brand-b.example' AND m.active ORDER BY p.id`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			_ = rows.Scan(&id)
			want = append(want, id)
		}
		rows.Close()
		if len(want) != 4 || strings.Join(seen, ",") != strings.Join(want, ",") {
			t.Fatalf("pages gave %v, want %v", seen, want)
		}
		for _, q := range []struct{ query, message string }{
			{"limit=0", "limit must be a whole number from 1 to 100"},
			{"limit=101", "limit must be a whole number from 1 to 100"},
			{"limit=abc", "limit must be a whole number from 1 to 100"},
			{"cursor=abc", "cursor must be the next_cursor of a previous page"},
			{"cursor=-5", "cursor must be the next_cursor of a previous page"},
			{"cursor=%00", "cursor must not contain the NUL character"},
		} {
			a := c.call("GET", "/api/v1/programs?"+q.query, bob, "")
			if q.query == "cursor=%00" {
				if a.status != 400 {
					t.Fatalf("%s: %d %s", q.query, a.status, a.raw)
				}
				continue
			}
			wantRefusal(t, a, 400, q.message, "")
		}
	})

	t.Run("30 a minute per session token, a bucket of its own; then 429 with Retry-After, nothing written", func(t *testing.T) {
		tok, _, _ := c.signUp("busy@brand-d.example")
		for i := 0; i < 30; i++ {
			if a := c.call("GET", "/api/v1/programs", tok, ""); a.status != 200 || a.header.Get("X-RateLimit-Remaining") != strconv.Itoa(29-i) {
				t.Fatalf("request %d: %d %v %s", i+1, a.status, a.header, a.raw)
			}
		}
		before := programs()
		a := c.call("POST", "/api/v1/programs", tok, `{`+shop+`}`)
		if a.status != 429 || a.header.Get("Retry-After") == "" {
			t.Fatalf("31st: %d %v %s", a.status, a.header, a.raw)
		}
		if programs() != before {
			t.Fatal("a limited create wrote a program")
		}
		// Another person keeps their own bucket.
		other, _, _ := c.signUp("calm@brand-e.example")
		if a := c.call("GET", "/api/v1/programs", other, ""); a.status != 200 || a.header.Get("X-RateLimit-Remaining") != "29" {
			t.Fatalf("another person: %d %s", a.status, a.raw)
		}
	})

	t.Run("a suspended person is refused", func(t *testing.T) {
		tok, uid, _ := c.signUp("later-blocked@brand-c.example")
		if _, err := c.pool.Exec(context.Background(), `UPDATE users SET blocked = true WHERE id = $1`, uid); err != nil {
			t.Fatal(err)
		}
		before := programs()
		wantRefusal(t, c.call("POST", "/api/v1/programs", tok, `{`+shop+`}`), 403, "Your account has been suspended.", "")
		wantRefusal(t, c.call("GET", "/api/v1/programs", tok, ""), 403, "Your account has been suspended.", "")
		if programs() != before {
			t.Fatal("a suspended person created a program")
		}
	})
}

// The program and its creator's membership are one transaction: a
// membership that cannot be written (no such user) leaves no program and
// no event behind.
func TestCreateOwnedProgramIsOneTransaction(t *testing.T) {
	c := startConsole(t)
	_, uid, ws := c.signUp("owner@atomic.example")
	store := catalogpg.New(c.pool, c.clock.Now)
	adv := itoa(ws)
	name, domain, ctype, rate := "Shop", "shop.example", "percent", "10"
	p, err := catalog.NewProgram(catalog.ProgramInput{AdvertiserID: &adv, Name: &name, Domain: &domain, CommissionType: &ctype, CommissionRate: &rate})
	if err != nil {
		t.Fatal(err)
	}
	before, events := c.count(`SELECT count(*) FROM programs`), c.lastOutboxID()
	if _, _, err := store.CreateOwnedProgram(context.Background(), p, uid+1000, []string{"tracking:read"}); !errors.Is(err, errkind.NotFound) {
		t.Fatalf("membership of a missing user: %v", err)
	}
	if n := c.count(`SELECT count(*) FROM programs`); n != before || len(c.catalogEvents(events)) != 0 {
		t.Fatalf("programs %d -> %d, events %v", before, n, c.catalogEvents(events))
	}
	got, seq, err := store.CreateOwnedProgram(context.Background(), p, uid, []string{"tracking:read", "tracking:write"})
	if err != nil || seq == 0 || c.count(`SELECT count(*) FROM memberships WHERE program_id = $1 AND user_id = $2 AND active`, got.ID, uid) != 1 {
		t.Fatalf("program %+v seq %d: %v", got, seq, err)
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// dashSession issues a dashboard session for uid through the admin API.
func (d *dash) dashSession(uid int64) string {
	d.t.Helper()
	return d.admin("POST", "/admin/v1/sessions", `{"user_id":`+itoa(uid)+`}`).body["data"].(map[string]any)["token"].(string)
}
