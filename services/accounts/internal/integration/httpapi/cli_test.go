package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/platform/platformtest"
)

const docsURL = "https://docs.svc.dev/api-keys/rotation"

var isoRe = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// statusData returns data of a 200 status answer without lastUpdated, after
// checking lastUpdated's shape.
func statusData(t *testing.T, r reply) map[string]any {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status: %d %s", r.status, r.raw)
	}
	data, _ := r.body["data"].(map[string]any)
	lu, _ := data["lastUpdated"].(string)
	if !isoRe.MatchString(lu) {
		t.Fatalf("lastUpdated %q is not an ISO timestamp", lu)
	}
	at, _ := time.Parse(time.RFC3339, lu)
	if d := time.Since(at); d < -time.Minute || d > time.Minute {
		t.Fatalf("lastUpdated %s is not now", lu)
	}
	delete(data, "lastUpdated")
	return data
}

func pendingStats() map[string]any {
	return map[string]any{"testEventCount": 0.0, "hasTestEvents": false, "latestTestEvent": nil}
}

func TestCLIStatusAndTestEvents(t *testing.T) {
	s := startStack(t, true, nil)

	t.Run("status before any test event: pending, counts 0, latest null, no request id", func(t *testing.T) {
		prog, key := s.program(nil)
		r := s.status(key)
		got := statusData(t, r)
		want := map[string]any{
			"programId":    strconv.FormatInt(prog, 10),
			"stepStatuses": map[string]any{"pageview": "pending", "referrals": "pending", "payments": "pending"},
			"statistics": map[string]any{
				"pageview":  pendingStats(),
				"referrals": pendingStats(),
				"payments": map[string]any{
					"paymentTrackingMode": "processor_connect", "methodReady": false, "processorConnectionStatus": "not_connected",
					"isProcessorConnected": false, "processorAccountId": nil, "chargesEnabled": false, "payoutsEnabled": false,
					"detailsSubmitted": false, "connectionDate": nil,
				},
			},
			"hasPartners": false,
		}
		if jsonOf(got) != jsonOf(want) {
			t.Fatalf("status data\n got %s\nwant %s", jsonOf(got), jsonOf(want))
		}
		if _, ok := r.header["X-Request-Id"]; ok {
			t.Fatalf("status 200 carries X-Request-ID %q", r.header.Get("X-Request-ID"))
		}
		if r.header.Get("X-RateLimit-Limit") != "60" || r.header.Get("X-RateLimit-Remaining") == "" {
			t.Fatalf("rate-limit headers missing: %v", r.header)
		}
	})

	t.Run("test click and keyed test lead go through tracking and complete the steps", func(t *testing.T) {
		prog, key := s.program(nil)
		// A keyless test lead sent to tracking directly does not count.
		keyless := s.send(s.tracking, "POST", "/api/v1/track/lead", fmt.Sprintf(`{"additional_data":{"test_mode":true,"program_id":%d}}`, prog))
		if keyless.status != http.StatusOK {
			t.Fatalf("keyless test lead: %d %s", keyless.status, keyless.raw)
		}

		click := s.testEvent(key, `{"event_type":"click"}`)
		if click.status != http.StatusOK || click.header.Get("X-Request-ID") == "" {
			t.Fatalf("click: %d %s", click.status, click.raw)
		}
		clickID := int64(path(click.body, "data", "eventId").(float64))
		wantClick := fmt.Sprintf(`{"data":{"event_type":"click","eventId":%d,"programId":%d,"test_mode":true,"message":"Test click recorded"}}`, clickID, prog)
		if click.raw != wantClick {
			t.Fatalf("click body\n got %s\nwant %s", click.raw, wantClick)
		}
		if n := s.count(s.trkPool, `SELECT count(*) FROM affiliate_click_events WHERE id = $1 AND program_id = $2 AND is_test AND customer_id IS NULL`, clickID, prog); n != 1 {
			t.Fatalf("tracking test click rows = %d", n)
		}
		// The fixtures: partner, approved enrolment, active link, all in
		// accounts' catalog and replicated to tracking.
		if n := s.count(s.accPool, `SELECT count(*) FROM partners p JOIN partner_programs pp ON pp.partner_id = p.id
			JOIN links l ON l.partner_id = p.id AND l.program_id = pp.program_id
			WHERE p.email = $1 AND p.name = 'svc test partner' AND pp.program_id = $2 AND pp.approved AND l.code = $3 AND l.active`,
			fmt.Sprintf("test-partner+%d@svc.invalid", prog), prog, fmt.Sprintf("svc-test-%d", prog)); n != 1 {
			t.Fatalf("fixture rows = %d", n)
		}

		lead := s.testEvent(key, `{"event_type":"lead"}`)
		if lead.status != http.StatusOK {
			t.Fatalf("lead: %d %s", lead.status, lead.raw)
		}
		leadID := int64(path(lead.body, "data", "eventId").(float64))
		wantLead := fmt.Sprintf(`{"data":{"event_type":"lead","eventId":%d,"programId":%d,"test_mode":true,"message":"Test lead recorded"}}`, leadID, prog)
		if lead.raw != wantLead {
			t.Fatalf("lead body\n got %s\nwant %s", lead.raw, wantLead)
		}
		if n := s.count(s.trkPool, `SELECT count(*) FROM lead_events WHERE id = $1 AND program_id = $2 AND is_test AND via_api_key AND event_name = 'svc_cli_test_event'`, leadID, prog); n != 1 {
			t.Fatalf("tracking test lead rows = %d", n)
		}

		var data map[string]any
		eventually(t, "status shows the test click and lead", func() (bool, string) {
			data = statusData(t, s.status(key))
			return path(data, "stepStatuses", "referrals") == "complete" && path(data, "stepStatuses", "pageview") == "complete", jsonOf(data)
		})
		for _, step := range []struct {
			name string
			id   int64
		}{{"pageview", clickID}, {"referrals", leadID}} {
			st := path(data, "statistics", step.name)
			if path(st, "testEventCount") != 1.0 || path(st, "hasTestEvents") != true || path(st, "latestTestEvent", "id") != float64(step.id) {
				t.Fatalf("%s stats = %s, want one event %d (the keyless lead must not count)", step.name, jsonOf(st), step.id)
			}
			for _, f := range []string{"timestamp", "createdAt"} {
				if v, _ := path(st, "latestTestEvent", f).(string); !isoRe.MatchString(v) {
					t.Fatalf("%s latestTestEvent.%s = %q", step.name, f, v)
				}
			}
		}
		if path(data, "stepStatuses", "payments") != "pending" || path(data, "hasPartners") != false {
			t.Fatalf("payments/hasPartners: %s (the test partner must not count)", jsonOf(data))
		}

		// A second click reuses the fixtures and becomes the latest.
		again := s.testEvent(key, `{"event_type":"click"}`)
		againID := path(again.body, "data", "eventId")
		eventually(t, "second click is the latest", func() (bool, string) {
			data = statusData(t, s.status(key))
			st := path(data, "statistics", "pageview")
			return path(st, "testEventCount") == 2.0 && path(st, "latestTestEvent", "id") == againID, jsonOf(st)
		})
		if n := s.count(s.accPool, `SELECT count(*) FROM partners WHERE email = $1`, fmt.Sprintf("test-partner+%d@svc.invalid", prog)); n != 1 {
			t.Fatalf("test partners = %d after two clicks", n)
		}
	})

	t.Run("disabled test link is re-activated by the next test click", func(t *testing.T) {
		prog, key := s.program(nil)
		first := s.testEvent(key, `{"event_type":"click"}`)
		if first.status != http.StatusOK {
			t.Fatalf("first click: %d %s", first.status, first.raw)
		}
		var linkID int64
		if err := s.accPool.QueryRow(context.Background(), `SELECT id FROM links WHERE program_id = $1 AND code = $2`,
			prog, fmt.Sprintf("svc-test-%d", prog)).Scan(&linkID); err != nil {
			t.Fatal(err)
		}
		s.admin("PATCH", fmt.Sprintf("/admin/v1/links/%d", linkID), map[string]any{"active": false})
		s.sync()
		if r := s.testEvent(key, `{"event_type":"click"}`); r.status != http.StatusOK {
			t.Fatalf("click on a disabled test link: %d %s", r.status, r.raw)
		}
		if n := s.count(s.trkPool, `SELECT count(*) FROM links WHERE id = $1 AND active`, linkID); n != 1 {
			t.Fatal("tracking's replica of the test link is not active")
		}
	})

	t.Run("payments step: s2s and a connected processor", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			patch map[string]any
			want  map[string]any
		}{
			{"s2s", map[string]any{"payment_tracking_mode": "s2s"}, map[string]any{
				"paymentTrackingMode": "s2s", "methodReady": true, "processorConnectionStatus": "not_connected",
				"isProcessorConnected": false, "processorAccountId": nil, "chargesEnabled": false, "payoutsEnabled": false,
				"detailsSubmitted": false, "connectionDate": nil,
			}},
			{"connected processor", map[string]any{"processor_connection": map[string]any{
				"status": "connected", "account_id": "acct_123", "charges_enabled": true, "payouts_enabled": false,
				"details_submitted": true, "connected_at": "2026-01-02T03:04:05Z",
			}}, map[string]any{
				"paymentTrackingMode": "processor_connect", "methodReady": true, "processorConnectionStatus": "connected",
				"isProcessorConnected": true, "processorAccountId": "acct_123", "chargesEnabled": true, "payoutsEnabled": false,
				"detailsSubmitted": true, "connectionDate": "2026-01-02T03:04:05.000Z",
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				prog, key := s.program(nil)
				s.admin("PATCH", fmt.Sprintf("/admin/v1/programs/%d", prog), tc.patch)
				data := statusData(t, s.status(key))
				if path(data, "stepStatuses", "payments") != "complete" {
					t.Fatalf("payments step: %s", jsonOf(data))
				}
				if got := path(data, "statistics", "payments"); jsonOf(got) != jsonOf(tc.want) {
					t.Fatalf("payments\n got %s\nwant %s", jsonOf(got), jsonOf(tc.want))
				}
			})
		}
	})

	t.Run("hasPartners: an approved partner-program record", func(t *testing.T) {
		prog, key := s.program(nil)
		pending := s.id("POST", "/admin/v1/partners", map[string]any{"name": "Pending", "email": "pending@p.example"})
		s.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", prog), map[string]any{"partner_id": pending, "approved": false})
		if got := path(statusData(t, s.status(key)), "hasPartners"); got != false {
			t.Fatalf("hasPartners with an unapproved partner = %v", got)
		}
		ok := s.id("POST", "/admin/v1/partners", map[string]any{"name": "Real", "email": "real@p.example"})
		s.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", prog), map[string]any{"partner_id": ok, "approved": true})
		if got := path(statusData(t, s.status(key)), "hasPartners"); got != true {
			t.Fatalf("hasPartners with an approved partner = %v", got)
		}
	})

	t.Run("invalid event_type: 400 with the contract message, nothing written", func(t *testing.T) {
		prog, key := s.program(nil)
		for _, tc := range []struct{ body, shown string }{
			{`{}`, "undefined"},
			{``, "undefined"},
			{`{"event_type":"Click"}`, "Click"},
			{`{"event_type":"chain"}`, "chain"},
			{`{"event_type":""}`, ""},
			{`{"event_type":5}`, "5"},
			{`{"event_type":null}`, "null"},
			{`{"event_type":["click"]}`, `[\"click\"]`}, // JSON text, escaped in the JSON answer
			{`{"type":"click"}`, "undefined"},
			{`{"type":"Chain","event_type":"visit"}`, "visit"},
		} {
			t.Run(tc.body, func(t *testing.T) {
				r := s.testEvent(key, tc.body)
				want := `{"data":null,"error":{"status":400,"name":"BadRequestError","message":"Invalid event_type: ` + tc.shown + `. Valid: click, lead, sale","details":{}}}`
				if r.status != http.StatusBadRequest || r.raw != want {
					t.Fatalf("%d %s\nwant %s", r.status, r.raw, want)
				}
			})
		}
		if n := s.count(s.accPool, `SELECT count(*) FROM partners WHERE email = $1`, fmt.Sprintf("test-partner+%d@svc.invalid", prog)); n != 0 {
			t.Fatal("a refused test event created fixtures")
		}
	})

	t.Run("body problems: 400 for the media type and for malformed JSON", func(t *testing.T) {
		_, key := s.program(nil)
		r := s.send(s.accounts, "POST", "/api/v1/cli/test-event", `{"event_type":"click"}`, "Authorization", "Bearer "+key, "Content-Type", "text/plain")
		if r.status != http.StatusBadRequest || path(r.body, "error", "name") != "BadRequestError" || path(r.body, "error", "message") != "Content-Type must be application/json" {
			t.Fatalf("text/plain: %d %s", r.status, r.raw)
		}
		r = s.testEvent(key, `{"event_type":`)
		if r.status != http.StatusBadRequest || path(r.body, "error", "message") != "Request body is not valid JSON" {
			t.Fatalf("malformed: %d %s", r.status, r.raw)
		}
	})

	t.Run("test sale goes through the sale route on commissions as a keyed test sale of the fixed amount", func(t *testing.T) {
		prog, key := s.program(nil)
		r := s.testEvent(key, `{"event_type":"sale"}`)
		if r.status != http.StatusOK || r.header.Get("X-Request-ID") == "" {
			t.Fatalf("sale: %d %s", r.status, r.raw)
		}
		saleID, _ := path(r.body, "data", "eventId").(float64)
		want := fmt.Sprintf(`{"data":{"event_type":"sale","eventId":%d,"programId":%d,"test_mode":true,"message":"Test sale recorded"}}`, int64(saleID), prog)
		if r.raw != want {
			t.Fatalf("sale body\n got %s\nwant %s", r.raw, want)
		}
		// Commissions made the transaction id and recorded a test sale of
		// the key's program with no customer (no click id was sent) and no
		// commission.
		if n := s.count(s.comPool, `SELECT count(*) FROM sales WHERE id = $1 AND program_id = $2 AND is_test
			AND amount_cents = 1000 AND currency = 'USD' AND source = 'api' AND transaction_id LIKE 'test_txn_%'
			AND customer_id = 0 AND partner_id = 0`, int64(saleID), prog); n != 1 {
			t.Fatalf("commissions test sale rows = %d", n)
		}
		if n := s.count(s.comPool, `SELECT count(*) FROM commissions WHERE program_id = $1`, prog); n != 0 {
			t.Fatalf("a test sale made %d commissions", n)
		}
		// A sale needs no fixture, and tracking recorded nothing (no click
		// or lead; tracking has no sales since its 00010).
		if n := s.count(s.accPool, `SELECT count(*) FROM partners WHERE email = $1`, fmt.Sprintf("test-partner+%d@svc.invalid", prog)); n != 0 {
			t.Fatal("a test sale created fixtures")
		}
		if n := s.count(s.trkPool, `SELECT (SELECT count(*) FROM affiliate_click_events WHERE program_id = $1) + (SELECT count(*) FROM lead_events WHERE program_id = $1)`, prog); n != 0 {
			t.Fatalf("tracking click and lead rows = %d", n)
		}
		// A second test sale is its own row (commissions' generated
		// transaction ids do not collide).
		again := s.testEvent(key, `{"event_type":"sale"}`)
		if again.status != http.StatusOK || path(again.body, "data", "eventId") == saleID {
			t.Fatalf("second sale: %d %s", again.status, again.raw)
		}
		if n := s.count(s.comPool, `SELECT count(*) FROM sales WHERE program_id = $1 AND is_test`, prog); n != 2 {
			t.Fatalf("test sales = %d after two", n)
		}
	})

	t.Run("test sale with a test key is a test sale too", func(t *testing.T) {
		prog, _ := s.program(nil)
		d := s.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/keys", prog), map[string]any{"test": true})
		testKey := d["key"].(string)
		s.sync()
		r := s.testEvent(testKey, `{"event_type":"sale"}`)
		if r.status != http.StatusOK || path(r.body, "data", "test_mode") != true {
			t.Fatalf("sale with a test key: %d %s", r.status, r.raw)
		}
		if n := s.count(s.comPool, `SELECT count(*) FROM sales WHERE id = $1 AND program_id = $2 AND is_test`,
			path(r.body, "data", "eventId"), prog); n != 1 {
			t.Fatalf("commissions test sale rows by the test key = %d", n)
		}
	})

	t.Run("chain: click and lead recorded in tracking, the sale in commissions, run counted", func(t *testing.T) {
		prog, key := s.program(nil)
		r := s.testEvent(key, `{"type":"chain"}`)
		if r.status != http.StatusOK {
			t.Fatalf("chain: %d %s", r.status, r.raw)
		}
		steps, _ := path(r.body, "data", "chain").([]any)
		if len(steps) != 3 {
			t.Fatalf("chain steps: %s", r.raw)
		}
		clickID, leadID, saleID := path(steps[0], "eventId"), path(steps[1], "eventId"), path(steps[2], "eventId")
		want := fmt.Sprintf(`{"data":{"type":"chain","programId":%d,"test_mode":true,"chain":[{"step":"click","status":"recorded","eventId":%v},{"step":"lead","status":"recorded","eventId":%v},{"step":"sale","status":"recorded","eventId":%v}]}}`, prog, clickID, leadID, saleID)
		if r.raw != want {
			t.Fatalf("chain body\n got %s\nwant %s", r.raw, want)
		}
		if n := s.count(s.trkPool, `SELECT count(*) FROM affiliate_click_events WHERE id = $1 AND program_id = $2 AND is_test`, clickID, prog); n != 1 {
			t.Fatal("chain click not in tracking")
		}
		if n := s.count(s.trkPool, `SELECT count(*) FROM lead_events WHERE id = $1 AND program_id = $2 AND is_test AND via_api_key AND event_name = 'svc_cli_synthetic_chain'`, leadID, prog); n != 1 {
			t.Fatal("chain lead not in tracking")
		}
		if n := s.count(s.comPool, `SELECT count(*) FROM sales WHERE id = $1 AND program_id = $2 AND is_test AND amount_cents = 1000 AND currency = 'USD'`, saleID, prog); n != 1 {
			t.Fatal("chain sale not in commissions")
		}
		if n := s.count(s.accPool, `SELECT count(*) FROM integration_chain_runs WHERE program_id = $1 AND request_id = $2`, prog, r.header.Get("X-Request-ID")); n != 1 {
			t.Fatalf("chain runs = %d", n)
		}
		eventually(t, "chain events in status", func() (bool, string) {
			d := statusData(t, s.status(key))
			return path(d, "stepStatuses", "pageview") == "complete" && path(d, "stepStatuses", "referrals") == "complete", jsonOf(d)
		})
	})

	t.Run("chain cap: 10 per program per hour, checked after the fixtures", func(t *testing.T) {
		// The hour is the injected clock's: the stack runs on a fake one,
		// and the test moves it instead of moving rows.
		clock := platformtest.NewClock(time.Now().UTC().Truncate(time.Second))
		s := startStackOn(t, clock, true, nil)
		prog, key := s.program(nil)
		_, otherKey := s.program(nil)
		// Ten runs 50 minutes ago fill the hour; the oldest leaves in 10.
		if _, err := s.accPool.Exec(context.Background(), `INSERT INTO integration_chain_runs (program_id, started_at)
			SELECT $1, $2::timestamptz FROM generate_series(1, 10)`, prog, clock.Now().Add(-50*time.Minute)); err != nil {
			t.Fatal(err)
		}
		r := s.testEvent(key, `{"type":"chain"}`)
		if r.status != http.StatusTooManyRequests {
			t.Fatalf("11th chain: %d %s", r.status, r.raw)
		}
		secs, err := strconv.Atoi(r.header.Get("Retry-After"))
		if err != nil || secs != 600 {
			t.Fatalf("Retry-After %q, want exactly 600 on the fake clock", r.header.Get("Retry-After"))
		}
		want := fmt.Sprintf(`{"error":{"status":429,"code":"rate_limited","message":"Too many synthetic chains (max 10/program/hour).","retry_after_seconds":%d}}`, secs)
		if r.raw != want {
			t.Fatalf("body\n got %s\nwant %s", r.raw, want)
		}
		// The fixtures were created before the cap refused; no event was sent.
		if n := s.count(s.accPool, `SELECT count(*) FROM links WHERE program_id = $1 AND code = $2 AND active`, prog, fmt.Sprintf("svc-test-%d", prog)); n != 1 {
			t.Fatal("fixtures not created before the cap check")
		}
		if n := s.count(s.trkPool, `SELECT count(*) FROM affiliate_click_events WHERE program_id = $1`, prog); n != 0 {
			t.Fatal("a refused chain sent a click")
		}
		if n := s.count(s.accPool, `SELECT count(*) FROM integration_chain_runs WHERE program_id = $1`, prog); n != 10 {
			t.Fatalf("a refused chain was counted: %d runs", n)
		}
		// Single test events and other programs are not capped by it.
		if r := s.testEvent(key, `{"event_type":"click"}`); r.status != http.StatusOK {
			t.Fatalf("single click under a full chain cap: %d %s", r.status, r.raw)
		}
		if r := s.testEvent(otherKey, `{"type":"chain"}`); r.status != http.StatusOK {
			t.Fatalf("other program's chain: %d %s", r.status, r.raw)
		}
		// Once the runs are an hour old, chains run again: one second
		// before, still refused; at the hour, accepted.
		clock.Advance(10*time.Minute - time.Second)
		if r := s.testEvent(key, `{"type":"chain"}`); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "1" {
			t.Fatalf("chain a second before the hour: %d %s %q", r.status, r.raw, r.header.Get("Retry-After"))
		}
		clock.Advance(time.Second)
		if r := s.testEvent(key, `{"type":"chain"}`); r.status != http.StatusOK {
			t.Fatalf("chain after the hour: %d %s", r.status, r.raw)
		}
	})

	t.Run("401s with the contract bodies; status 401s carry no request id", func(t *testing.T) {
		prog, _ := s.program(nil)
		retired, retiredID := s.key(prog)
		s.admin("POST", fmt.Sprintf("/admin/v1/keys/%d/rotation", retiredID), map[string]any{"deadline": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)})
		missing := `{"data":null,"error":{"status":401,"name":"UnauthorizedError","message":"Missing or malformed Authorization header. Expected: Bearer <token>","details":{}}}`
		empty := `{"data":null,"error":{"status":401,"name":"UnauthorizedError","message":"Missing API token","details":{}}}`
		invalid := `{"data":null,"error":{"status":401,"name":"UnauthorizedError","message":"Invalid API token","details":{}}}`
		retiredBody := `{"error":{"code":"api_key_rotation_required","message":"This API key is past its rotation deadline and no longer works.","hint":"Create a new API key for this program in the dashboard and use it instead of this one.","docs_url":"` + docsURL + `"}}`
		cases := []struct {
			name   string
			header []string
			want   string
		}{
			{"missing", nil, missing},
			{"malformed", []string{"Authorization", "Basic abc"}, missing},
			{"lower-case scheme", []string{"Authorization", "bearer " + retired}, missing},
			{"empty", []string{"Authorization", "Bearer "}, empty},
			{"invalid", []string{"Authorization", "Bearer svc_live_notakey"}, invalid},
			{"retired", []string{"Authorization", "Bearer " + retired}, retiredBody},
		}
		for _, route := range []struct{ method, path, body string }{
			{"GET", "/api/v1/cli/status", ""},
			{"POST", "/api/v1/cli/test-event", `{"event_type":"click"}`},
		} {
			for _, tc := range cases {
				t.Run(route.method+" "+tc.name, func(t *testing.T) {
					r := s.send(s.accounts, route.method, route.path, route.body, tc.header...)
					if r.status != http.StatusUnauthorized || r.raw != tc.want {
						t.Fatalf("%d %s\nwant %s", r.status, r.raw, tc.want)
					}
					_, hasID := r.header["X-Request-Id"]
					if hasID != (route.method == "POST") {
						t.Fatalf("X-Request-ID present = %t on %s", hasID, route.path)
					}
				})
			}
		}
		if n := s.count(s.accPool, `SELECT count(*) FROM partners WHERE email = $1`, fmt.Sprintf("test-partner+%d@svc.invalid", prog)); n != 0 {
			t.Fatal("a refused test event created fixtures")
		}
	})

	t.Run("a key marked for rotation works with the rotation headers and warnings", func(t *testing.T) {
		prog, _ := s.program(nil)
		key, keyID := s.key(prog)
		deadline := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
		s.admin("POST", fmt.Sprintf("/admin/v1/keys/%d/rotation", keyID), map[string]any{"deadline": deadline.Format(time.RFC3339)})
		s.sync()
		for _, r := range []reply{s.status(key), s.testEvent(key, `{"event_type":"lead"}`)} {
			if r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			if r.header.Get("Sunset") != deadline.Format(http.TimeFormat) || r.header.Get("Link") != "<"+docsURL+">; rel='deprecation'" ||
				!regexp.MustCompile(`^@\d+$`).MatchString(r.header.Get("Deprecation")) {
				t.Fatalf("rotation headers: %v", r.header)
			}
			w, _ := r.body["warnings"].([]any)
			if len(w) != 1 || path(w[0], "code") != "api_key_rotation_required" || path(w[0], "rotate_by") != deadline.Format(time.RFC3339) || r.body["data"] == nil {
				t.Fatalf("warnings: %s", r.raw)
			}
		}
	})

	t.Run("status 500: message with the request id, header kept", func(t *testing.T) {
		_, key := s.program(nil)
		ctx := context.Background()
		if _, err := s.accPool.Exec(ctx, `ALTER TABLE integration_test_events RENAME TO integration_test_events_away`); err != nil {
			t.Fatal(err)
		}
		r := s.status(key)
		if _, err := s.accPool.Exec(ctx, `ALTER TABLE integration_test_events_away RENAME TO integration_test_events`); err != nil {
			t.Fatal(err)
		}
		id := r.header.Get("X-Request-ID")
		want := `{"data":null,"error":{"status":500,"name":"InternalServerError","message":"Failed to get status (request_id: ` + id + `)","details":{"request_id":"` + id + `"}}}`
		if r.status != http.StatusInternalServerError || id == "" || r.raw != want {
			t.Fatalf("%d (id %q) %s\nwant %s", r.status, id, r.raw, want)
		}
	})
}

func TestCLIKeyLookupFailureIs500WithTheRequestID(t *testing.T) {
	s := startStack(t, false, nil)
	_, key := s.program(nil)
	ctx := context.Background()
	if _, err := s.accPool.Exec(ctx, `ALTER TABLE api_keys RENAME TO api_keys_away`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = s.accPool.Exec(ctx, `ALTER TABLE api_keys_away RENAME TO api_keys`) })
	for _, tc := range []struct {
		name    string
		r       reply
		message string
	}{
		{"status", s.status(key), "Failed to get status"},
		{"test-event", s.testEvent(key, `{"type":"chain"}`), "Failed to process test event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.r.header.Get("X-Request-ID")
			want := `{"data":null,"error":{"status":500,"name":"InternalServerError","message":"` + tc.message + ` (request_id: ` + id + `)","details":{"request_id":"` + id + `"}}}`
			if tc.r.status != http.StatusInternalServerError || id == "" || tc.r.raw != want {
				t.Fatalf("%d %s\nwant %s", tc.r.status, tc.r.raw, want)
			}
		})
	}
}

func TestCLIStatusRateLimitHasNoRequestID(t *testing.T) {
	s := startStackOn(t, platformtest.NewClock(time.Now()), false, map[string]string{"CLI_RATE_LIMIT": "2"})
	_, key := s.program(nil)
	for i := range 2 {
		if r := s.status(key); r.status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i+1, r.status, r.raw)
		}
	}
	r := s.status(key)
	if r.status != http.StatusTooManyRequests || path(r.body, "error", "code") != "rate_limited" || r.header.Get("Retry-After") == "" {
		t.Fatalf("3rd: %d %s", r.status, r.raw)
	}
	if _, ok := r.header["X-Request-Id"]; ok {
		t.Fatal("status 429 carries X-Request-ID")
	}
	// The limit is shared with test-event (one bucket per key), whose
	// answers keep their request id.
	r = s.testEvent(key, `{"event_type":"sale"}`)
	if r.status != http.StatusTooManyRequests || r.header.Get("X-Request-ID") == "" {
		t.Fatalf("test-event over the shared limit: %d %v", r.status, r.header)
	}
}

func TestCLITestEventFailuresAnswer500WithTheRequestID(t *testing.T) {
	s := startStack(t, false, map[string]string{"CHAIN_LIMIT_PER_HOUR": "1"})
	prog, key := s.program(nil)
	for _, tc := range []struct{ name, body, message string }{
		{"click with tracking down", `{"event_type":"click"}`, "Failed to process test event"},
		{"lead with tracking down", `{"event_type":"lead"}`, "Failed to process test event"},
		{"sale with commissions down", `{"event_type":"sale"}`, "Failed to process test event"},
		{"chain with tracking down", `{"type":"chain"}`, "Failed to run synthetic chain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.testEvent(key, tc.body)
			id := r.header.Get("X-Request-ID")
			want := `{"data":null,"error":{"status":500,"name":"InternalServerError","message":"` + tc.message + ` (request_id: ` + id + `)","details":{"request_id":"` + id + `"}}}`
			if r.status != http.StatusInternalServerError || id == "" || r.raw != want {
				t.Fatalf("%d %s\nwant %s", r.status, r.raw, want)
			}
		})
	}
	// The failed chain used the only run of the hour (CHAIN_LIMIT_PER_HOUR=1).
	r := s.testEvent(key, `{"type":"chain"}`)
	if r.status != http.StatusTooManyRequests || path(r.body, "error", "message") != "Too many synthetic chains (max 1/program/hour)." {
		t.Fatalf("second chain: %d %s", r.status, r.raw)
	}
	if n := s.count(s.accPool, `SELECT count(*) FROM integration_chain_runs WHERE program_id = $1`, prog); n != 1 {
		t.Fatalf("chain runs = %d", n)
	}
}
