package server_test

import (
	"fmt"
	"sync"
	"testing"
)

// Standards: bad input gets the spec's error (or a clear 400) and writes
// nothing. Postgres text and jsonb cannot hold U+0000, so a NUL in any
// string is refused at the edge (libs/httpkit) before it reaches a query,
// where it used to be a 500.
func TestNULCharacterIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	f := s.fixture()
	cid := s.click(f.codeA, nil)
	landing := "https://brand.example/landing?via=" + f.codeA
	const bad = "BadRequestError"

	routes := []struct {
		name, path string
		body       map[string]any
		headers    []string
		message    string
	}{
		{"click page_title", "/api/v1/track/click", map[string]any{"affiliate_url": landing, "page_title": "Pricing\x00"}, nil,
			"page_title must not contain the NUL character"},
		{"click session_id", "/api/v1/track/click", map[string]any{"affiliate_url": landing, "session_id": "\x00"}, nil,
			"session_id must not contain the NUL character"},
		{"click additional_data.event_name (nested)", "/api/v1/track/click", map[string]any{"affiliate_url": landing,
			"additional_data": map[string]any{"event_name": "a\x00"}}, nil, "additional_data.event_name must not contain the NUL character"},
		{"click affiliate_url: the spec's message", "/api/v1/track/click", map[string]any{"affiliate_url": landing + "\x00"}, nil,
			"Invalid affiliate_url"},
		{"click existing_click_id", "/api/v1/track/click", map[string]any{"affiliate_url": landing, "existing_click_id": cid + "\x00"}, nil,
			"existing_click_id must not contain the NUL character"},
		{"click code percent-encoded NUL", "/api/v1/track/click", map[string]any{"affiliate_url": "https://brand.example/landing?aff=%00"}, nil,
			"Referral link not found"},
		{"click code percent-encoded invalid UTF-8", "/api/v1/track/click", map[string]any{"affiliate_url": "https://brand.example/landing?via=" + f.codeA + "%80"}, nil,
			"Referral link not found"},
		{"click unknown field", "/api/v1/track/click", map[string]any{"affiliate_url": landing, "extra": []any{"ok", "\x00"}}, nil,
			"extra[1] must not contain the NUL character"},
		{"lead customer_key", "/api/v1/track/lead", map[string]any{"click_id": cid, "customer_key": "k\x00"}, bearer(f.keyServer),
			"customer_key must not contain the NUL character"},
		{"lead click_id", "/api/v1/track/lead", map[string]any{"click_id": cid + "\x00", "customer_key": "k"}, bearer(f.keyServer),
			"click_id must not contain the NUL character"},
		{"lead email", "/api/v1/track/lead", map[string]any{"click_id": cid, "email": "a\x00@b.example"}, bearer(f.keyServer),
			"email must not contain the NUL character"},
		{"visit page_url: the route's message", "/api/v1/track/visit", map[string]any{"program_id": fmt.Sprint(f.progBrowser), "page_url": "https://brand.example/\x00", "click_id": cid},
			[]string{"Origin", f.origin}, "page_url is required and must be an http or https URL"},
		{"visit session_id", "/api/v1/track/visit", map[string]any{"program_id": fmt.Sprint(f.progBrowser), "page_url": "https://brand.example/", "session_id": "s\x00"},
			[]string{"Origin", f.origin}, "session_id must not contain the NUL character"},
	}
	for _, tc := range routes {
		t.Run(tc.name, func(t *testing.T) {
			before, sales := s.rows(), s.saleRows()
			r := s.call("POST", tc.path, jsonBody(tc.body), tc.headers...)
			wantPlatformError(t, r, 400, bad, tc.message)
			if after := s.rows(); after != before {
				t.Fatalf("rows %v -> %v", before, after)
			}
			if after := s.saleRows(); after != sales {
				t.Fatalf("sale rows %v -> %v", sales, after)
			}
		})
	}

	t.Run("a valid click sent together with NUL ones still records", func(t *testing.T) {
		before := s.count(`SELECT count(*) FROM affiliate_click_events`)
		const n = 8
		var wg sync.WaitGroup
		replies := make([]reply, 2*n)
		for i := range 2 * n {
			body := map[string]any{"affiliate_url": landing, "page_title": fmt.Sprintf("page %d", i)}
			if i%2 == 1 {
				body["page_title"] = fmt.Sprintf("page %d\x00", i)
			}
			wg.Go(func() { replies[i] = s.call("POST", "/api/v1/track/click", jsonBody(body)) })
		}
		wg.Wait()
		for i, r := range replies {
			if i%2 == 1 {
				wantPlatformError(t, r, 400, bad, "page_title must not contain the NUL character")
			} else if r.status != 200 || r.body["click_id"] == nil {
				t.Fatalf("valid click %d: %d %s", i, r.status, r.raw)
			}
		}
		if got := s.count(`SELECT count(*) FROM affiliate_click_events`) - before; got != n {
			t.Fatalf("%d clicks recorded, want %d", got, n)
		}
	})
}
