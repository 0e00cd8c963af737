package server_test

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/platform/platformtest"
	"github.com/svc-dev/svc/services/tracking/internal/ingest/enrich/enrichtest"
)

var clickIDRe = regexp.MustCompile(`^cust_[0-9]+_[0-9]+$`)

// Customer status table, click rows.
func TestClickCustomerRows(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	f := s.fixture()

	t.Run("no reusable customer: new customer in status click", func(t *testing.T) {
		r := s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": "https://brand.example/?aff=" + f.codeB}))
		if r.status != 200 || r.body["success"] != true || r.body["partner_code"] != f.codeB || r.body["cookie_window_days"] != float64(30) {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		cid := r.body["click_id"].(string)
		if !clickIDRe.MatchString(cid) {
			t.Fatalf("click id %q", cid)
		}
		for _, h := range []string{"X-Request-ID", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
			if r.header.Get(h) == "" {
				t.Errorf("missing %s", h)
			}
		}
		if r.header.Get("X-RateLimit-Limit") != "60" || r.header.Get("Retry-After") != "" {
			t.Errorf("limit headers %v", r.header)
		}
		if n := s.count(`SELECT count(*) FROM customers WHERE click_id = $1 AND status = 'click' AND first_partner_id = $2 AND program_id = $3`, cid, f.partner1, f.progBrowser); n != 1 {
			t.Fatal("customer not created in status click")
		}
		// Counters are folded in from the click's delta within moments.
		eventually(t, "link clicks and last_clicked", func() bool {
			return s.count(`SELECT count(*) FROM link_stats ls JOIN links l ON l.id = ls.link_id WHERE l.code = $1 AND ls.clicks = 1 AND ls.last_clicked IS NOT NULL`, f.codeB) == 1
		})
		eventually(t, "partner-program clicks", func() bool {
			return s.count(`SELECT COALESCE(sum(clicks), 0) FROM partner_program_metrics WHERE program_id = $1 AND partner_id = $2`, f.progBrowser, f.partner1) == 1
		})
		if n := s.count(`SELECT count(*) FROM outbox WHERE topic = 'tracking.events.v1' AND event_type = 'tracking.click.recorded'`); n != 1 {
			t.Fatalf("click events in outbox: %d", n)
		}
	})

	t.Run("aff wins over via", func(t *testing.T) {
		r := s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": "https://brand.example/?via=" + f.codeB + "&aff=" + f.codeA}))
		if r.status != 200 || r.body["partner_code"] != f.codeA {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	})

	t.Run("existing click id: customer reused, first partner kept, click recorded for the new partner", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		again := s.click(f.codeA2, map[string]any{"existing_click_id": cid})
		if again != cid {
			t.Fatalf("click id %s, want reuse of %s", again, cid)
		}
		if n := s.count(`SELECT count(*) FROM customers WHERE click_id = $1 AND first_partner_id = $2`, cid, f.partner1); n != 1 {
			t.Fatal("first partner not kept")
		}
		if n := s.count(`SELECT count(*) FROM affiliate_click_events e JOIN customers c ON c.id = e.customer_id
			WHERE c.click_id = $1 AND e.partner_id = $2`, cid, f.partner2); n != 1 {
			t.Fatal("second click not recorded for the new partner")
		}
	})

	t.Run("existing click id of the same program with program_id: reused", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		again := s.click(f.codeA2, map[string]any{"existing_click_id": cid, "program_id": strconv.FormatInt(f.progServer, 10)})
		if again != cid {
			t.Fatalf("got %s, want %s", again, cid)
		}
	})

	t.Run("existing click id of another program with program_id: new click id and customer", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		before := s.count(`SELECT count(*) FROM customers`)
		other := s.click(f.codeB, map[string]any{"existing_click_id": cid, "program_id": f.progBrowser})
		if other == cid || !clickIDRe.MatchString(other) {
			t.Fatalf("got %s, want a new id", other)
		}
		if after := s.count(`SELECT count(*) FROM customers`); after != before+1 {
			t.Fatalf("customers %d -> %d", before, after)
		}
	})

	t.Run("unknown existing click id: new customer created with it", func(t *testing.T) {
		const adopted = "cust_1700000000000_42"
		got := s.click(f.codeA, map[string]any{"existing_click_id": adopted})
		if got != adopted {
			t.Fatalf("got %s, want %s", got, adopted)
		}
		if n := s.count(`SELECT count(*) FROM customers WHERE click_id = $1 AND status = 'click'`, adopted); n != 1 {
			t.Fatal("customer with the given id not created")
		}
	})

	t.Run("program_id scopes the code lookup", func(t *testing.T) {
		r := s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": "https://x.example/?aff=" + f.codeShared, "program_id": f.progBrowser}))
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		cid := r.body["click_id"].(string)
		if n := s.count(`SELECT count(*) FROM customers WHERE click_id = $1 AND program_id = $2 AND first_partner_id = $3`, cid, f.progBrowser, f.partner2); n != 1 {
			t.Fatal("code not looked up inside the sent program")
		}
	})
}

// Track click error table: every row, and nothing written.
func TestClickErrors(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	f := s.fixture()
	// A link whose program the replica does not know: "lacks program".
	if _, err := s.pool.Exec(context.Background(), `INSERT INTO links (id, program_id, partner_id, code, active, catalog_seq) VALUES (9999, 424242, 1, 'ORPHAN', true, 1)`); err != nil {
		t.Fatal(err)
	}
	url := func(q string) string { return "https://brand.example/p?" + q }
	cases := []struct {
		name    string
		body    map[string]any
		headers []string
		status  int
		errName string
		msg     string
	}{
		{"affiliate_url missing", map[string]any{"page_url": "https://brand.example"}, nil, 400, "BadRequestError", "affiliate_url is required"},
		{"affiliate_url empty", map[string]any{"affiliate_url": ""}, nil, 400, "BadRequestError", "affiliate_url is required"},
		{"affiliate_url not a URL", map[string]any{"affiliate_url": "brand.example/?aff=X"}, nil, 400, "BadRequestError", "Invalid affiliate_url"},
		{"affiliate_url not a string", map[string]any{"affiliate_url": 12}, nil, 400, "BadRequestError", "Invalid affiliate_url"},
		// A URL that parses, only too long: our limit, said as such.
		{"affiliate_url too long", map[string]any{"affiliate_url": url("aff=" + f.codeA + "&x=" + strings.Repeat("a", 2048))}, nil, 400, "BadRequestError", "affiliate_url must be at most 2048 bytes"},
		{"no aff or via", map[string]any{"affiliate_url": url("utm_source=x")}, nil, 400, "BadRequestError", "No aff parameter found in affiliate_url"},
		{"program_id not a program", map[string]any{"affiliate_url": url("aff=" + f.codeA), "program_id": 987654}, nil, 400, "BadRequestError", "Unknown program_id"},
		{"program_id not numeric", map[string]any{"affiliate_url": url("aff=" + f.codeA), "program_id": "abc"}, nil, 400, "BadRequestError", "Unknown program_id"},
		{"code matches no link", map[string]any{"affiliate_url": url("aff=NOPE")}, nil, 400, "BadRequestError", "Referral link not found"},
		{"code outside the sent program", map[string]any{"affiliate_url": url("aff=" + f.codeB), "program_id": f.progServer}, nil, 400, "BadRequestError", "Referral link not found"},
		{"link lacks its program", map[string]any{"affiliate_url": url("aff=ORPHAN")}, nil, 400, "BadRequestError", "Invalid referral link configuration"},
		{"test mode key for another program", map[string]any{"affiliate_url": url("aff=" + f.codeA), "additional_data": map[string]any{"test_mode": true, "program_id": f.progBrowser}},
			[]string{"Authorization", "Bearer " + f.keyServer}, 403, "ForbiddenError", "program_id does not match the API key"},
		{"origin not allowed", map[string]any{"affiliate_url": url("aff=" + f.codeA)}, []string{"Origin", "https://evil.example"}, 403, "ForbiddenError", "Origin is not allowed for this program"},
		{"page_url wrong type", map[string]any{"affiliate_url": url("aff=" + f.codeA), "page_url": 5}, nil, 400, "BadRequestError", "page_url must be a string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := s.rows()
			r := s.call("POST", "/api/v1/track/click", jsonBody(tc.body), tc.headers...)
			wantPlatformError(t, r, tc.status, tc.errName, tc.msg)
			if after := s.rows(); after != before {
				t.Fatalf("rows %v -> %v", before, after)
			}
		})
	}

	t.Run("410 link_disabled: typed envelope, nothing recorded", func(t *testing.T) {
		before := s.rows()
		r := s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": url("via=" + f.codeOff)}))
		if r.status != 410 || r.body["success"] != false || r.body["message"] == nil || r.body["data"] != nil {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if _, has := r.body["data"]; has {
			t.Fatal("typed envelope has no data key")
		}
		e := r.body["error"].(map[string]any)
		if e["code"] != "link_disabled" || e["hint"] == nil || e["message"] != r.body["message"] {
			t.Fatalf("error %v", e)
		}
		if after := s.rows(); after != before {
			t.Fatalf("rows %v -> %v", before, after)
		}
		if n := s.count(`SELECT count(*) FROM link_stats ls JOIN links l ON l.id = ls.link_id WHERE l.code = $1`, f.codeOff) +
			s.count(`SELECT count(*) FROM click_count_deltas d JOIN links l ON l.id = d.link_id WHERE l.code = $1`, f.codeOff); n != 0 {
			t.Fatal("disabled link counted a click")
		}
	})

	t.Run("malformed JSON and wrong content type", func(t *testing.T) {
		before := s.rows()
		wantPlatformError(t, s.call("POST", "/api/v1/track/click", `{"affiliate_url":`), 400, "BadRequestError", "Request body is not valid JSON")
		wantPlatformError(t, s.call("POST", "/api/v1/track/click", `affiliate_url=x`, "Content-Type", "application/x-www-form-urlencoded"),
			400, "BadRequestError", "Content-Type must be application/json")
		if after := s.rows(); after != before {
			t.Fatalf("rows %v -> %v", before, after)
		}
	})

	t.Run("500 Click tracking failed", func(t *testing.T) {
		ctx := context.Background()
		if _, err := s.pool.Exec(ctx, `ALTER TABLE affiliate_click_events RENAME TO affiliate_click_events_away`); err != nil {
			t.Fatal(err)
		}
		r := s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": url("aff=" + f.codeA)}))
		if _, err := s.pool.Exec(ctx, `ALTER TABLE affiliate_click_events_away RENAME TO affiliate_click_events`); err != nil {
			t.Fatal(err)
		}
		wantPlatformError(t, r, 500, "InternalServerError", "Click tracking failed")
		if n := s.count(`SELECT count(*) FROM customers WHERE program_id = $1`, f.progServer); n != 0 {
			t.Fatalf("a failed click left %d customers", n)
		}
	})

	// After the 500 row, which counts the program's customers.
	t.Run("optional descriptive fields never refuse the click", func(t *testing.T) { testClickOptionalFields(t, s, f) })
}

func TestClickTestModeAndKeys(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	f := s.fixture()
	url := "https://brand.example/?aff=" + f.codeA

	t.Run("test mode answers data and touches no production record", func(t *testing.T) {
		r := s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": url, "additional_data": map[string]any{"test_mode": true}}),
			"Authorization", "Bearer "+f.keyTest)
		if r.status != 200 || r.body["success"] != true || r.body["message"] == nil {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		d := r.body["data"].(map[string]any)
		if d["test_mode"] != true || d["programId"] != float64(f.progServer) || d["eventId"] == nil {
			t.Fatalf("data %v", d)
		}
		if n := s.count(`SELECT count(*) FROM affiliate_click_events WHERE is_test AND program_id = $1 AND customer_id IS NULL`, f.progServer); n != 1 {
			t.Fatal("test click not stored as a test event")
		}
		if n := s.count(`SELECT count(*) FROM customers`); n != 0 {
			t.Fatal("test click created a customer")
		}
		if n := s.count(`SELECT count(*) FROM link_stats`) + s.count(`SELECT count(*) FROM click_count_deltas`); n != 0 {
			t.Fatal("test click counted on the link")
		}
	})

	t.Run("a test key without test_mode: a test click too", func(t *testing.T) {
		r := s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": url}), "Authorization", "Bearer "+f.keyTest)
		d, _ := r.body["data"].(map[string]any)
		if r.status != 200 || d["test_mode"] != true || d["programId"] != float64(f.progServer) || r.body["click_id"] != nil {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if n := s.count(`SELECT count(*) FROM affiliate_click_events WHERE is_test AND program_id = $1 AND customer_id IS NULL`, f.progServer); n != 2 {
			t.Fatalf("%d test clicks, want 2", n)
		}
		if n := s.count(`SELECT count(*) FROM customers`); n != 0 {
			t.Fatal("a test key's click created a customer")
		}
	})

	t.Run("a rotating key gets the deprecation signalling", func(t *testing.T) {
		r := s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": url}), "Authorization", "Bearer "+f.keyRotating)
		if r.status != 200 || r.header.Get("Deprecation") == "" || r.header.Get("Sunset") == "" || r.header.Get("Link") == "" {
			t.Fatalf("%d %v", r.status, r.header)
		}
		w, _ := r.body["warnings"].([]any)
		if len(w) != 1 || w[0].(map[string]any)["code"] != "api_key_rotation_required" || r.body["click_id"] == nil {
			t.Fatalf("body %s", r.raw)
		}
	})

	t.Run("a retired or unknown key never refuses a click", func(t *testing.T) {
		for _, k := range []string{f.keyRetired, "svc_live_unknown"} {
			r := s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": url, "visitor_ip": "203.0.113.9"}), "Authorization", "Bearer "+k)
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			cid := r.body["click_id"].(string)
			if n := s.count(`SELECT count(*) FROM affiliate_click_events WHERE click_id = $1 AND ip = '203.0.113.9'`, cid); n != 0 {
				t.Fatal("visitor_ip honoured without a usable key of the link's program")
			}
		}
	})

	t.Run("visitor_ip honoured with the link's own program key", func(t *testing.T) {
		cid := s.click(f.codeA, map[string]any{"visitor_ip": "198.51.100.7"})
		if n := s.count(`SELECT count(*) FROM affiliate_click_events WHERE click_id = $1 AND ip = '198.51.100.7'`, cid); n != 0 {
			t.Fatal("visitor_ip honoured without a key")
		}
		r := s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": url, "visitor_ip": "198.51.100.7"}), "Authorization", "Bearer "+f.keyServer)
		cid = r.body["click_id"].(string)
		if n := s.count(`SELECT count(*) FROM affiliate_click_events WHERE click_id = $1 AND ip = '198.51.100.7'`, cid); n != 1 {
			t.Fatalf("visitor_ip not used: %s", r.raw)
		}
		r = s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": url, "visitor_ip": "not-an-ip"}), "Authorization", "Bearer "+f.keyServer)
		if r.status != 200 {
			t.Fatalf("a bad visitor_ip must never refuse: %d %s", r.status, r.raw)
		}
		r = s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": url, "visitor_ip": "198.51.100.8"}), "Authorization", "Bearer "+f.keyBrowser)
		cid = r.body["click_id"].(string)
		if n := s.count(`SELECT count(*) FROM affiliate_click_events WHERE click_id = $1 AND ip = '198.51.100.8'`, cid); n != 0 {
			t.Fatal("visitor_ip honoured with another program's key")
		}
	})
}

func TestClickRateLimit(t *testing.T) {
	t.Parallel()
	// A frozen clock: the window is a calendar minute, and a burst that
	// straddled two would see a fresh allowance.
	s := startStackOn(t, platformtest.NewClock(time.Now()), map[string]string{"TRACK_CLICK_RATE_LIMIT": "3"})
	f := s.fixture()
	body := jsonBody(map[string]any{"affiliate_url": "https://brand.example/?aff=" + f.codeA})
	for i := 0; i < 3; i++ {
		if r := s.call("POST", "/api/v1/track/click", body, "X-Forwarded-For", "192.0.2.1"); r.status != 200 {
			t.Fatalf("request %d: %d", i, r.status)
		}
	}
	before := s.rows()
	r := s.call("POST", "/api/v1/track/click", body, "X-Forwarded-For", "192.0.2.1")
	if r.status != 429 || r.header.Get("Retry-After") == "" || r.header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("%d %v", r.status, r.header)
	}
	e := r.body["error"].(map[string]any)
	if e["code"] != "rate_limited" || e["status"] != float64(429) || e["retry_after_seconds"] == nil {
		t.Fatalf("%s", r.raw)
	}
	if after := s.rows(); after != before {
		t.Fatalf("a refused click wrote rows: %v -> %v", before, after)
	}
	// Another client IP has its own bucket.
	if r := s.call("POST", "/api/v1/track/click", body, "X-Forwarded-For", "192.0.2.2"); r.status != 200 {
		t.Fatalf("other ip: %d", r.status)
	}
}

// Each click event stores geo from the configured .mmdb (for the request's
// IP, or visitor_ip with the program key) and device, OS and browser from
// the user agent.
func TestClickEnrichment(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "geo.mmdb")
	enrichtest.WriteTestDB(t, db, append(enrichtest.SampleRecords(),
		enrichtest.Record{Network: "127.0.0.0/8", Country: "DE", Region: "BE", City: "Berlin"}))
	s := startStack(t, map[string]string{"GEOIP_DB": db})
	f := s.fixture()
	iphone := "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"
	chrome := "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
	geo := func(cid string) string {
		var out string
		if err := s.pool.QueryRow(context.Background(), `SELECT concat_ws('|', country, region, city, device_type, os, browser, is_test)
			FROM affiliate_click_events WHERE click_id = $1`, cid).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	cid := s.click(f.codeA, map[string]any{"user_agent": iphone})
	if got := geo(cid); got != "DE|BE|Berlin|mobile|iOS|Safari|f" {
		t.Fatalf("browser click stored %q", got)
	}
	r := s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": "https://brand.example/?aff=" + f.codeA, "visitor_ip": "81.2.69.160"}),
		"Authorization", "Bearer "+f.keyServer, "User-Agent", chrome)
	if got := geo(r.body["click_id"].(string)); got != "GB|ENG|London|desktop|Windows|Chrome|f" {
		t.Fatalf("server click stored %q", got)
	}
}

// The click path caches the catalog: a change that passed the sync barrier
// must be what the next click sees (the cache is dropped on the replica's
// notification before the barrier can answer).
func TestCatalogChangeVisibleAfterBarrier(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	f := s.fixture()
	s.click(f.codeA, nil) // the link is now cached as active
	var linkID int64
	if err := s.pool.QueryRow(context.Background(), `SELECT id FROM links WHERE code = $1`, f.codeA).Scan(&linkID); err != nil {
		t.Fatal(err)
	}
	s.admin("PATCH", "/admin/v1/links/"+strconv.FormatInt(linkID, 10), map[string]any{"active": false})
	s.sync()
	r := s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": "https://brand.example/?aff=" + f.codeA}))
	if r.status != 410 {
		t.Fatalf("click after the link was turned off: %d %s", r.status, r.raw)
	}
	s.admin("PATCH", "/admin/v1/links/"+strconv.FormatInt(linkID, 10), map[string]any{"active": true})
	s.sync()
	if r := s.call("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": "https://brand.example/?aff=" + f.codeA})); r.status != 200 {
		t.Fatalf("click after the link was turned on again: %d %s", r.status, r.raw)
	}
}
