package server_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"
)

// The spec refuses a click only for the rows of its Track click table:
// optional descriptive fields never cost the click (its cookie and its
// attribution). Through the gateway: a page title longer than 255
// characters (a long Vietnamese title is 3 bytes a character), a
// User-Agent header that is not UTF-8, screen sizes of another shape and
// an oversize visitor_ip are all recorded, cut to their lengths in
// characters, never inside one; only a wrong JSON type is a 400.
func testClickOptionalFields(t *testing.T, s *stack, f fixture) {
	landing := "https://brand.example/landing?via=" + f.codeA
	stored := func(t *testing.T, cid string) (title, ua, screen, viewport, session string) {
		t.Helper()
		if err := s.pool.QueryRow(context.Background(), `SELECT page_title, user_agent, screen_resolution, viewport_size, session_id
			FROM affiliate_click_events WHERE click_id = $1`, cid).Scan(&title, &ua, &screen, &viewport, &session); err != nil {
			t.Fatal(err)
		}
		return
	}
	recorded := func(t *testing.T, r reply) string {
		t.Helper()
		cid, _ := r.body["click_id"].(string)
		if r.status != 200 || cid == "" {
			t.Fatalf("click refused: %d %s", r.status, r.raw)
		}
		return cid
	}

	t.Run("a 300-character Vietnamese title: recorded, cut to 255 characters", func(t *testing.T) {
		title := strings.Repeat("Trang chủ cửa hàng ", 16) // 304 characters, ~440 bytes
		r := s.front("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": landing, "page_title": title,
			"session_id": strings.Repeat("s", 300), "screen_resolution": "huge", "viewport_size": "1x2x3", "visitor_ip": strings.Repeat("1", 100)}))
		got, _, screen, viewport, session := stored(t, recorded(t, r))
		if utf8.RuneCountInString(got) != 255 || !utf8.ValidString(got) || !strings.HasPrefix(title, got) {
			t.Fatalf("title stored %q (%d characters)", got, utf8.RuneCountInString(got))
		}
		if screen != "" || viewport != "" || len(session) != 255 {
			t.Fatalf("screen %q, viewport %q, session of %d", screen, viewport, len(session))
		}
	})

	t.Run("a User-Agent header that is not UTF-8: recorded with the bytes replaced", func(t *testing.T) {
		r := s.front("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": landing}), "User-Agent", "x\xff\xfey")
		if _, ua, _, _, _ := stored(t, recorded(t, r)); ua != "x\uFFFDy" {
			t.Fatalf("user agent stored %q", ua)
		}
		long := strings.Repeat("é", 3000)
		r = s.front("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": landing}), "User-Agent", long)
		if _, ua, _, _, _ := stored(t, recorded(t, r)); utf8.RuneCountInString(ua) != 2048 || !utf8.ValidString(ua) {
			t.Fatalf("long user agent stored with %d characters", utf8.RuneCountInString(ua))
		}
	})

	t.Run("a wrong JSON type is still a 400 and records nothing", func(t *testing.T) {
		before := s.rows()
		r := s.front("POST", "/api/v1/track/click", jsonBody(map[string]any{"affiliate_url": landing, "page_title": 12}))
		if r.status != 400 {
			t.Fatalf("page_title a number: %d %s", r.status, r.raw)
		}
		if after := s.rows(); after != before {
			t.Fatalf("rows %v -> %v", before, after)
		}
	})
}
