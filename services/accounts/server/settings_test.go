package server_test

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/auth/session"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/accounts/server"
)

// settingsFixture: a program, an active member, an inactive member and an
// outsider, each with a dashboard session token.
type settingsFixture struct {
	program                    int64
	member, inactive, outsider string
	// reader is an active member holding tracking:read only.
	reader   string
	memberID int64
}

func (s *stack) dashboardSession(uid int64) string {
	s.t.Helper()
	r := s.admin("POST", "/admin/v1/sessions", `{"user_id":`+itoa(uid)+`}`)
	if r.status != 201 {
		s.t.Fatalf("session: %d %s", r.status, r.raw)
	}
	return data(s.t, r)["token"].(string)
}

func (s *stack) settingsFixture() settingsFixture {
	s.t.Helper()
	ids := s.seedCatalog()
	var f settingsFixture
	f.program = ids.program
	user := func(email string, member, active bool, permissions ...string) (string, int64) {
		uid := dataID(s.t, s.admin("POST", "/admin/v1/users", `{"email":"`+email+`"}`))
		if member {
			if permissions == nil {
				permissions = []string{"tracking:read", "tracking:write"}
			}
			r := s.admin("POST", "/admin/v1/programs/"+itoa(ids.program)+"/members", jsonBody(s.t, map[string]any{"user_id": uid, "active": active, "permissions": permissions}))
			if r.status != 201 {
				s.t.Fatalf("member: %d %s", r.status, r.raw)
			}
		}
		return s.dashboardSession(uid), uid
	}
	f.member, f.memberID = user("member@brand.example", true, true)
	f.inactive, _ = user("inactive@brand.example", true, false)
	f.outsider, _ = user("outsider@brand.example", false, false)
	f.reader, _ = user("reader@brand.example", true, true, "tracking:read")
	return f
}

func (s *stack) settings(method string, program int64, token, body string) reply {
	s.t.Helper()
	ct := ""
	if body != "" {
		ct = "application/json"
	}
	return s.do(method, "/api/v1/programs/"+itoa(program)+"/settings", token, ct, body)
}

const defaultSettings = `{"data":{"allowed_origins":[],"attribution_window_days":60,"lead_auth_policy":"server_required","payment_tracking_mode":"processor_connect","program_id":%d}}`

func TestProgramSettingsReadAndChange(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	f := s.settingsFixture()

	r := s.settings("GET", f.program, f.member, "")
	if r.status != 200 || r.raw != strings.Replace(defaultSettings, "%d", itoa(f.program), 1) {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	events := s.countWhere("outbox", "event_type = $1 AND key = $2", eventsv1.TypeProgramUpserted, itoa(f.program))
	r = s.settings("PATCH", f.program, f.member, `{"lead_auth_policy":"browser_allowed","attribution_window_days":30,"payment_tracking_mode":"s2s","allowed_origins":["https://Shop.example","https://shop.example/"]}`)
	want := `{"data":{"allowed_origins":["https://shop.example"],"attribution_window_days":30,"lead_auth_policy":"browser_allowed","payment_tracking_mode":"s2s","program_id":` + itoa(f.program) + `}}`
	if r.status != 200 || r.raw != want || r.header.Get("X-Catalog-Seq") == "" || r.header.Get("X-RateLimit-Limit") != "30" {
		t.Fatalf("%d %v %s", r.status, r.header, r.raw)
	}
	if n := s.countWhere("outbox", "event_type = $1 AND key = $2", eventsv1.TypeProgramUpserted, itoa(f.program)); n != events+1 {
		t.Fatalf("catalog events %d -> %d", events, n)
	}
	var policy, mode string
	var window int
	if err := s.pool.QueryRow(context.Background(), `SELECT lead_auth_policy, attribution_window_days, payment_tracking_mode FROM programs WHERE id = $1`, f.program).
		Scan(&policy, &window, &mode); err != nil || policy != "browser_allowed" || window != 30 || mode != "s2s" {
		t.Fatalf("row: %s %d %s %v", policy, window, mode, err)
	}
	if r := s.settings("GET", f.program, f.member, ""); r.raw != want {
		t.Fatalf("read back %s", r.raw)
	}
	t.Run("one field at a time; null clears the origins", func(t *testing.T) {
		r := s.settings("PATCH", f.program, f.member, `{"allowed_origins":null}`)
		if r.status != 200 || !strings.Contains(r.raw, `"allowed_origins":[]`) || !strings.Contains(r.raw, `"attribution_window_days":30`) {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	})
}

func TestProgramSettingsValidation(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	f := s.settingsFixture()
	events := s.count("outbox")
	cases := []struct{ name, body, message string }{
		{"unknown lead auth policy", `{"lead_auth_policy":"anyone"}`, "lead_auth_policy must be one of: server_required, browser_allowed"},
		{"lead auth policy not a string", `{"lead_auth_policy":true}`, "lead_auth_policy must be one of: server_required, browser_allowed"},
		{"lead auth policy null", `{"lead_auth_policy":null}`, "lead_auth_policy must be one of: server_required, browser_allowed"},
		{"window zero", `{"attribution_window_days":0}`, "attribution_window_days must be a whole number of days from 1 to 3650"},
		{"window fractional", `{"attribution_window_days":1.5}`, "attribution_window_days must be a whole number of days from 1 to 3650"},
		{"window as a string", `{"attribution_window_days":"30"}`, "attribution_window_days must be a whole number of days from 1 to 3650"},
		{"unknown tracking mode", `{"payment_tracking_mode":"stripe"}`, "payment_tracking_mode must be one of: processor_connect, s2s"},
		{"origin with a path", `{"allowed_origins":["https://shop.example/cart"]}`, "allowed_origins must be a list of origins like https://shop.example.com"},
		{"origins not a list", `{"allowed_origins":"https://shop.example"}`, "allowed_origins must be a list of origins like https://shop.example.com"},
		{"a field that is not a setting", `{"commission_rate":50}`, "Unknown setting: commission_rate. Settings are lead_auth_policy, attribution_window_days, payment_tracking_mode, allowed_origins"},
		{"nothing to change", `{}`, "Send at least one of: lead_auth_policy, attribution_window_days, payment_tracking_mode, allowed_origins"},
		{"malformed JSON", `{"lead_auth_policy":`, "Request body is not valid JSON"},
		{"one bad field refuses the whole change", `{"lead_auth_policy":"browser_allowed","attribution_window_days":-1}`, "attribution_window_days must be a whole number of days from 1 to 3650"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantError(t, s.settings("PATCH", f.program, f.member, c.body), 400, "BadRequestError", c.message)
		})
	}
	t.Run("wrong content type", func(t *testing.T) {
		wantError(t, s.do("PATCH", "/api/v1/programs/"+itoa(f.program)+"/settings", f.member, "text/plain", `{}`), 400, "BadRequestError", "Content-Type must be application/json")
	})
	if r := s.settings("GET", f.program, f.member, ""); r.raw != strings.Replace(defaultSettings, "%d", itoa(f.program), 1) {
		t.Fatalf("refused changes were written: %s", r.raw)
	}
	if n := s.count("outbox"); n != events {
		t.Fatalf("refused changes published %d events", n-events)
	}
}

func TestProgramSettingsAccess(t *testing.T) {
	t.Parallel()
	// Over 30 deliberate 401s from one IP: raise the failed-auth allowance
	// (its own test is TestFailedAuthIsLimitedPerIPBeforeTheLookup).
	s := start(t, map[string]string{"FAILED_AUTH_RATE_LIMIT": "1000"})
	f := s.settingsFixture()
	priv := ed25519.NewKeyFromSeed(testSeed)
	past, err := session.NewIssuer(priv, server.SessionIssuer, time.Minute, func() time.Time { return time.Now().Add(-time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	expired, _, _ := past.Issue(f.memberID, session.KindDashboard)
	now, _ := session.NewIssuer(priv, server.SessionIssuer, time.Hour, time.Now)
	cliKind, _, _ := now.Issue(f.memberID, session.KindCLI)
	_, otherPriv, _ := ed25519.GenerateKey(nil)
	forger, _ := session.NewIssuer(otherPriv, server.SessionIssuer, time.Hour, time.Now)
	forged, _, _ := forger.Issue(f.memberID, session.KindDashboard)

	const (
		noAccess = "You do not have access to this program"
		invalid  = "Invalid session token. Sign in again."
	)
	cases := []struct {
		name    string
		program int64
		header  string
		status  int
		message string
	}{
		{"no Authorization header", f.program, "", 401, "Missing or malformed Authorization header. Expected: Bearer <session_token>"},
		{"not a Bearer header", f.program, "Token " + f.member, 401, "Missing or malformed Authorization header. Expected: Bearer <session_token>"},
		{"empty token", f.program, "Bearer ", 401, invalid},
		{"garbage token", f.program, "Bearer nope", 401, invalid},
		{"expired session", f.program, "Bearer " + expired, 401, "Session expired. Sign in again."},
		{"a command-line session token", f.program, "Bearer " + cliKind, 401, invalid},
		{"a token signed by another key", f.program, "Bearer " + forged, 401, invalid},
		{"not a member", f.program, "Bearer " + f.outsider, 403, noAccess},
		{"an inactive member", f.program, "Bearer " + f.inactive, 403, noAccess},
		{"a program that does not exist", f.program + 1000, "Bearer " + f.member, 403, noAccess},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := map[int]string{401: "UnauthorizedError", 403: "ForbiddenError"}[c.status]
			for _, m := range []struct{ method, body string }{{"GET", ""}, {"PATCH", `{"attribution_window_days":7}`}} {
				r := s.settings(m.method, c.program, "", m.body)
				if c.header != "" {
					r = s.doHeader(m.method, "/api/v1/programs/"+itoa(c.program)+"/settings", c.header, m.body)
				}
				wantError(t, r, c.status, name, c.message)
			}
		})
	}
	t.Run("a path id that is not a number", func(t *testing.T) {
		wantError(t, s.do("GET", "/api/v1/programs/abc/settings", f.member, "", ""), 403, "ForbiddenError", noAccess)
	})
	t.Run("access is checked before the body", func(t *testing.T) {
		wantError(t, s.settings("PATCH", f.program, f.outsider, `{"lead_auth_policy":"x"}`), 403, "ForbiddenError", noAccess)
	})
	t.Run("a reader (tracking:read only) reads the settings but every change is 403", func(t *testing.T) {
		r := s.settings("GET", f.program, f.reader, "")
		if r.status != 200 {
			t.Fatalf("reader GET: %d %s", r.status, r.raw)
		}
		for _, body := range []string{`{"attribution_window_days":7}`, `{"payment_tracking_mode":"s2s"}`,
			`{"lead_auth_policy":"browser_allowed"}`, `{"allowed_origins":["https://evil.example"]}`} {
			wantError(t, s.settings("PATCH", f.program, f.reader, body), 403, "ForbiddenError",
				"You do not have permission to change this program's settings")
		}
		var mode, policy string
		var origins []string
		_ = s.pool.QueryRow(context.Background(), `SELECT payment_tracking_mode, lead_auth_policy, allowed_origins FROM programs WHERE id = $1`, f.program).
			Scan(&mode, &policy, &origins)
		if mode != "processor_connect" || policy != "server_required" || len(origins) != 0 {
			t.Fatalf("a reader's PATCH changed the program: %s %s %v", mode, policy, origins)
		}
	})
	t.Run("a suspended member", func(t *testing.T) {
		s.exec(`UPDATE users SET blocked = true WHERE id = $1`, f.memberID)
		defer s.exec(`UPDATE users SET blocked = false WHERE id = $1`, f.memberID)
		wantError(t, s.settings("GET", f.program, f.member, ""), 403, "ForbiddenError", "Your account has been suspended.")
	})
	var window int
	_ = s.pool.QueryRow(context.Background(), `SELECT attribution_window_days FROM programs WHERE id = $1`, f.program).Scan(&window)
	if window != 60 {
		t.Fatalf("refused PATCH changed the window to %d", window)
	}
}

// doHeader sends a raw Authorization header value.
func (s *stack) doHeader(method, path, authorization, body string) reply {
	s.t.Helper()
	req, err := newRequest(method, s.base+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", authorization)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return s.send(req)
}

func TestProgramSettingsRateLimit(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	f := s.settingsFixture()
	for i := 1; i <= 30; i++ {
		if r := s.settings("GET", f.program, f.member, ""); r.status != 200 {
			t.Fatalf("request %d: %d %s", i, r.status, r.raw)
		}
	}
	r := s.settings("PATCH", f.program, f.member, `{"attribution_window_days":7}`)
	if r.status != 429 || r.header.Get("Retry-After") == "" || r.header.Get("X-RateLimit-Limit") != "30" {
		t.Fatalf("31st: %d %v %s", r.status, r.header, r.raw)
	}
	if e, _ := r.body["error"].(map[string]any); e["code"] != "rate_limited" {
		t.Fatalf("%s", r.raw)
	}
	if r := s.settings("GET", f.program, f.outsider, ""); r.status != 403 {
		t.Fatalf("another sign-in token has its own count: %d", r.status)
	}
}

func TestProgramSettingsServerError(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	f := s.settingsFixture()
	s.exec(`ALTER TABLE memberships RENAME TO memberships_away`)
	r := s.settings("GET", f.program, f.member, "")
	wantError(t, r, 500, "InternalServerError", "Failed to load program settings")
	if r.header.Get("X-Request-ID") == "" {
		t.Fatal("no request id")
	}
	wantError(t, s.settings("PATCH", f.program, f.member, `{"attribution_window_days":7}`), 500, "InternalServerError", "Failed to update program settings")
}

func newRequest(method, url, body string) (*http.Request, error) {
	return http.NewRequest(method, url, strings.NewReader(body))
}
