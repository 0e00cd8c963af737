package server_test

import (
	"fmt"
	"strings"
	"testing"
)

func TestVisitAndConfig(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	f := s.fixture()

	t.Run("config returns what the tracker needs", func(t *testing.T) {
		r := s.call("GET", fmt.Sprintf("/api/v1/track/config?program_id=%d", f.progBrowser), "")
		if r.status != 200 || r.body["cookie_window_days"] != float64(30) || r.body["lead_auth_policy"] != "browser_allowed" ||
			r.body["browser_leads_allowed"] != true || r.body["program_id"] != float64(f.progBrowser) {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if r.header.Get("X-RateLimit-Limit") != "60" {
			t.Fatalf("config limit %q", r.header.Get("X-RateLimit-Limit"))
		}
		r = s.call("GET", fmt.Sprintf("/api/v1/track/config?program_id=%d", f.progServer), "")
		if r.body["browser_leads_allowed"] != false || r.body["cookie_window_days"] != float64(60) {
			t.Fatalf("%s", r.raw)
		}
		wantPlatformError(t, s.call("GET", "/api/v1/track/config", ""), 400, "BadRequestError", "program_id is required")
		wantPlatformError(t, s.call("GET", "/api/v1/track/config?program_id=x", ""), 400, "BadRequestError", "Unknown program_id")
		wantPlatformError(t, s.call("GET", "/api/v1/track/config?program_id=999999", ""), 400, "BadRequestError", "Unknown program_id")
	})

	t.Run("visit records a page view", func(t *testing.T) {
		cid := s.click(f.codeB, nil)
		r := s.call("POST", "/api/v1/track/visit", jsonBody(map[string]any{"program_id": fmt.Sprint(f.progBrowser), "page_url": "https://brand.example/pricing", "click_id": cid}), "Origin", f.origin)
		if r.status != 200 || r.body["success"] != true || r.header.Get("X-RateLimit-Limit") != "120" {
			t.Fatalf("%d %s %v", r.status, r.raw, r.header)
		}
		if r.header.Get("Access-Control-Allow-Origin") != f.origin {
			t.Fatalf("allowed origin not granted CORS: %v", r.header)
		}
		if n := s.count(`SELECT count(*) FROM visits WHERE click_id = $1 AND page_url = 'https://brand.example/pricing'`, cid); n != 1 {
			t.Fatal("visit not stored")
		}
		if n := s.count(`SELECT count(*) FROM outbox WHERE event_type = 'tracking.visit.recorded'`); n != 1 {
			t.Fatal("visit event not published")
		}
	})

	t.Run("visit errors write nothing", func(t *testing.T) {
		for _, tc := range []struct {
			body map[string]any
			msg  string
		}{
			{map[string]any{"page_url": "https://brand.example/"}, "program_id is required"},
			{map[string]any{"program_id": 999999, "page_url": "https://brand.example/"}, "Unknown program_id"},
			{map[string]any{"program_id": f.progBrowser}, "page_url is required and must be an http or https URL"},
			{map[string]any{"program_id": f.progBrowser, "page_url": "javascript:alert(1)"}, "page_url is required and must be an http or https URL"},
		} {
			before := s.rows()
			wantPlatformError(t, s.call("POST", "/api/v1/track/visit", jsonBody(tc.body)), 400, "BadRequestError", tc.msg)
			if after := s.rows(); after != before {
				t.Fatalf("rows %v -> %v", before, after)
			}
		}
	})
}

func TestCORS(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	f := s.fixture()
	preflight := func(path, origin, headers string) reply {
		return s.call("OPTIONS", path, "", "Origin", origin, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", headers)
	}
	for _, path := range []string{"/api/v1/track/click", "/api/v1/track/lead", "/api/v1/track/visit", "/api/v1/track/config"} {
		t.Run("allowed origin preflight "+path, func(t *testing.T) {
			r := preflight(path, f.origin, "content-type")
			if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != f.origin || !strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "Content-Type") {
				t.Fatalf("%d %v", r.status, r.header)
			}
		})
	}
	t.Run("unknown origin gets no permission", func(t *testing.T) {
		r := preflight("/api/v1/track/click", "https://evil.example", "content-type")
		if r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("%v", r.header)
		}
	})
	t.Run("server mode preflight (Authorization) gets no permission", func(t *testing.T) {
		r := preflight("/api/v1/track/lead", f.origin, "authorization, content-type")
		if r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("%v", r.header)
		}
		cid := s.click(f.codeA, nil)
		resp := s.lead(map[string]any{"click_id": cid}, "Origin", f.origin, "Authorization", "Bearer "+f.keyServer)
		if resp.status != 200 || resp.header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("server-mode lead answered with CORS: %d %v", resp.status, resp.header)
		}
	})
	t.Run("tracker script is served", func(t *testing.T) {
		r := s.call("GET", "/svc.js", "")
		if r.status != 200 || !strings.Contains(r.header.Get("Content-Type"), "javascript") || !strings.Contains(r.raw, "svc_click_id") {
			t.Fatalf("%d %v", r.status, r.header)
		}
	})
}
