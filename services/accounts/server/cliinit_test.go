package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/auth/oidctest"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// advertiserLogin signs in a user of a new advertiser and returns the
// login token, user id and advertiser id.
func (s *stack) advertiserLogin(p *oidctest.Provider, email string) (string, int64, int64) {
	s.t.Helper()
	adv := dataID(s.t, s.admin("POST", "/admin/v1/advertisers", jsonBody(s.t, map[string]string{"name": "Brand", "email": email})))
	if r := s.admin("POST", "/admin/v1/users", jsonBody(s.t, map[string]any{"email": email, "advertiser_id": adv})); r.status != 201 {
		s.t.Fatalf("user: %d %s", r.status, r.raw)
	}
	tok, uid := s.signIn(p, email)
	return tok, uid, adv
}

const validInit = `{"name":"Shop","domain":"shop.example","commission_type":"percent","commission_rate":12.5}`

func TestCLILoginTokenRefusals(t *testing.T) {
	t.Parallel()
	s, p := startCLI(t, nil)
	tok, uid, _ := s.advertiserLogin(p, "owner@brand.example")
	expired, _, _ := s.advertiserLogin(p, "expired@brand.example")
	s.exec(`UPDATE cli_login_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = $1`, sha(expired))
	// A token whose user row is gone (tokens keep no foreign key for this).
	orphan := "svc_cli_" + strings.Repeat("o", 43)
	s.exec(`INSERT INTO cli_login_tokens (token_hash, user_id, created_at, expires_at) VALUES ($1, 987654321, now(), now() + interval '1 day')`, sha(orphan))
	ids := s.seedCatalog()
	key := data(t, s.admin("POST", "/admin/v1/programs/"+itoa(ids.program)+"/keys", `{}`))["key"].(string)

	const prompt = ` Run "svc login" and try again.`
	cases := []struct {
		name, header       string
		initMsg, progsMsg  string
		initCode, progCode int
	}{
		{"no Authorization header", "", "Authentication required." + prompt, "Missing Authorization header." + prompt, 401, 401},
		{"not a Bearer header", "Basic " + tok, "Authentication required." + prompt, "Missing Authorization header." + prompt, 401, 401},
		{"empty token", "Bearer ", "Authentication required." + prompt, "Missing Authorization header." + prompt, 401, 401},
		{"unknown token", "Bearer svc_cli_" + strings.Repeat("x", 43), "Invalid or expired token." + prompt, "Invalid or expired token." + prompt, 401, 401},
		{"expired token", "Bearer " + expired, "Invalid or expired token." + prompt, "Invalid or expired token." + prompt, 401, 401},
		{"a program API key", "Bearer " + key, "Invalid or expired token." + prompt, "Invalid or expired token." + prompt, 401, 401},
		{"user gone", "Bearer " + orphan, "User not found." + prompt, "User not found", 401, 401},
	}
	programs := s.count("programs")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, rt := range []struct{ method, path, body, msg string }{
				{"POST", "init", validInit, c.initMsg},
				{"GET", "programs", "", c.progsMsg},
			} {
				req, _ := http.NewRequest(rt.method, s.base+"/api/v1/cli/"+rt.path, strings.NewReader(rt.body))
				if c.header != "" {
					req.Header.Set("Authorization", c.header)
				}
				req.Header.Set("Content-Type", "application/json")
				r := s.send(req)
				wantError(t, r, 401, "UnauthorizedError", rt.msg)
				if r.header.Get("X-Request-ID") == "" {
					t.Fatal("CLI 401 without X-Request-ID")
				}
			}
		})
	}
	t.Run("suspended after sign-in", func(t *testing.T) {
		s.exec(`UPDATE users SET blocked = true WHERE id = $1`, uid)
		defer s.exec(`UPDATE users SET blocked = false WHERE id = $1`, uid)
		wantCode(t, s.cli("POST", "init", tok, validInit), "Your account has been suspended.", "ACCOUNT_BLOCKED")
		wantCode(t, s.cli("GET", "programs", tok, ""), "Your account has been suspended.", "ACCOUNT_BLOCKED")
	})
	if n := s.count("programs"); n != programs {
		t.Fatalf("refused requests wrote programs: %d -> %d", programs, n)
	}
}

func (s *stack) send(req *http.Request) reply {
	s.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func TestCLIInitValidation(t *testing.T) {
	t.Parallel()
	s, p := startCLI(t, nil)
	tok, _, adv := s.advertiserLogin(p, "owner@brand.example")
	noAdv, _ := s.signIn(p, "solo@brand.example")

	const (
		missing  = "Missing required fields: name, domain, commission_type, commission_rate"
		badType  = "Invalid commission_type: %s. Valid: percent, fixed, recurring_percent, recurring_fixed"
		rate     = "commission_rate must be a positive number"
		rateCap  = "commission_rate is a percentage for this type and cannot exceed 100"
		duration = "duration_months must be a whole number of months (0 = lifetime)"
		cookie   = "cookie_duration must be a whole number of days from 1 to 365"
		mismatch = "advertiser_id does not match the authenticated account"
	)
	base := `"name":"Shop","domain":"shop.example","commission_type":"percent","commission_rate":10`
	cases := []struct {
		name, token, body string
		status            int
		message           string
	}{
		{"no advertiser", noAdv, `{` + base + `}`, 403, `No advertiser found for this account. Run "svc login" to sign in with the account of your advertiser.`},
		{"advertiser_id of another account", tok, `{"advertiser_id":` + itoa(adv+1000) + `,` + base + `}`, 403, mismatch},
		{"advertiser_id mismatch before validation", tok, `{"advertiser_id":"` + itoa(adv+1000) + `"}`, 403, mismatch},
		{"advertiser_id not a number", tok, `{"advertiser_id":"abc",` + base + `}`, 403, mismatch},
		{"advertiser_id as a fraction", tok, `{"advertiser_id":` + itoa(adv) + `.5,` + base + `}`, 403, mismatch},
		{"empty body", tok, `{}`, 400, missing},
		{"no commission_rate", tok, `{"name":"Shop","domain":"shop.example","commission_type":"percent"}`, 400, missing},
		{"blank name", tok, `{"name":"  ","domain":"shop.example","commission_type":"percent","commission_rate":10}`, 400, missing},
		{"name not a string", tok, `{"name":5,"domain":"shop.example","commission_type":"percent","commission_rate":10}`, 400, missing},
		{"missing fields before a bad type", tok, `{"commission_type":"bogus","commission_rate":-1}`, 400, missing},
		{"unknown commission_type", tok, `{"name":"Shop","domain":"shop.example","commission_type":"bogus","commission_rate":10}`, 400, strings.Replace(badType, "%s", "bogus", 1)},
		{"commission_type not a string", tok, `{"name":"Shop","domain":"shop.example","commission_type":7,"commission_rate":10}`, 400, strings.Replace(badType, "%s", "7", 1)},
		{"bad type before bad rate", tok, `{"name":"Shop","domain":"shop.example","commission_type":"pct","commission_rate":0}`, 400, strings.Replace(badType, "%s", "pct", 1)},
		{"rate as a string", tok, `{"name":"Shop","domain":"shop.example","commission_type":"fixed","commission_rate":"12"}`, 400, rate},
		{"rate zero", tok, `{"name":"Shop","domain":"shop.example","commission_type":"fixed","commission_rate":0}`, 400, rate},
		{"rate negative", tok, `{"name":"Shop","domain":"shop.example","commission_type":"fixed","commission_rate":-3}`, 400, rate},
		{"rate null", tok, `{"name":"Shop","domain":"shop.example","commission_type":"fixed","commission_rate":null}`, 400, missing},
		{"percent above 100", tok, `{"name":"Shop","domain":"shop.example","commission_type":"percent","commission_rate":100.01}`, 400, rateCap},
		{"recurring percent above 100", tok, `{"name":"Shop","domain":"shop.example","commission_type":"recurring_percent","commission_rate":150}`, 400, rateCap},
		{"bad rate before bad duration", tok, `{"name":"Shop","domain":"shop.example","commission_type":"percent","commission_rate":101,"duration_months":-1}`, 400, rateCap},
		{"duration fractional", tok, `{` + base + `,"duration_months":1.5}`, 400, duration},
		{"duration negative", tok, `{` + base + `,"duration_months":-1}`, 400, duration},
		{"duration as a string", tok, `{` + base + `,"duration_months":"3"}`, 400, duration},
		{"bad duration before bad cookie", tok, `{` + base + `,"duration_months":-1,"cookie_duration":0}`, 400, duration},
		{"cookie zero", tok, `{` + base + `,"cookie_duration":0}`, 400, cookie},
		{"cookie above 365", tok, `{` + base + `,"cookie_duration":366}`, 400, cookie},
		{"cookie fractional", tok, `{` + base + `,"cookie_duration":30.5}`, 400, cookie},
		{"malformed JSON", tok, `{"name":`, 400, "Request body is not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status := map[int]string{400: "BadRequestError", 403: "ForbiddenError"}[c.status]
			wantError(t, s.cli("POST", "init", c.token, c.body), c.status, status, c.message)
		})
	}
	t.Run("wrong content type", func(t *testing.T) {
		wantError(t, s.do("POST", "/api/v1/cli/init", tok, "text/plain", validInit), 400, "BadRequestError", "Content-Type must be application/json")
	})
	for _, table := range []string{"programs", "memberships", "api_keys"} {
		if n := s.count(table); n != 0 {
			t.Fatalf("refused init wrote %d %s", n, table)
		}
	}
}

func TestCLIInitCreatesProgramMemberAndKey(t *testing.T) {
	t.Parallel()
	s, p := startCLI(t, nil)
	tok, uid, adv := s.advertiserLogin(p, "owner@brand.example")

	for i, body := range []string{
		`{"name":"Shop","domain":"Shop.Example","commission_type":"percent","commission_rate":12.5,"duration_months":12,"cookie_duration":30}`,
		`{"advertiser_id":` + itoa(adv) + `,"name":"Second","domain":"two.example","commission_type":"fixed","commission_rate":500}`,
		`{"advertiser_id":"` + itoa(adv) + `","name":"Third","domain":"three.example","commission_type":"recurring_fixed","commission_rate":3}`,
	} {
		r := s.cli("POST", "init", tok, body)
		if r.status != 201 {
			t.Fatalf("init %d: %d %s", i, r.status, r.raw)
		}
		if _, err := strconv.ParseInt(r.header.Get("X-Catalog-Seq"), 10, 64); err != nil || r.header.Get("X-Request-ID") == "" {
			t.Fatalf("headers %v", r.header)
		}
		d := data(t, r)
		prog := d["program"].(map[string]any)
		pid := int64(prog["id"].(float64))
		key, _ := d["api_key"].(string)
		if !strings.HasPrefix(key, "svc_live_") {
			t.Fatalf("api_key %q", key)
		}
		if i == 0 {
			want := map[string]any{"name": "Shop", "domain": "shop.example", "commission_type": "percent", "commission_rate": 12.5,
				"duration_months": float64(12), "cookie_duration": float64(30), "advertiser_id": float64(adv),
				"lead_auth_policy": "server_required", "attribution_window_days": float64(60), "payment_tracking_mode": "processor_connect"}
			for k, v := range want {
				if prog[k] != v {
					t.Fatalf("program.%s = %v, want %v (%s)", k, prog[k], v, r.raw)
				}
			}
		}
		var active bool
		var perms []string
		if err := s.pool.QueryRow(context.Background(), `SELECT active, permissions FROM memberships WHERE program_id = $1 AND user_id = $2`, pid, uid).Scan(&active, &perms); err != nil ||
			!active || strings.Join(perms, ",") != "tracking:read,tracking:write" {
			t.Fatalf("membership: %v %v %v", active, perms, err)
		}
		if n := s.countWhere("api_keys", "program_id = $1 AND key_hash = $2 AND NOT test", pid, sha(key)); n != 1 {
			t.Fatalf("key stored by hash: %d", n)
		}
		for _, typ := range []string{eventsv1.TypeProgramUpserted, eventsv1.TypeMembershipUpserted, eventsv1.TypeAPIKeyUpserted} {
			if n := s.countWhere("outbox", "event_type = $1 AND key = $2", typ, itoa(pid)); n != 1 {
				t.Fatalf("%s events for program %d: %d", typ, pid, n)
			}
		}
		// The new key authenticates the program-key CLI routes.
		if r := s.cli("GET", "status", key, ""); r.status != 200 {
			t.Fatalf("status with the new key: %d %s", r.status, r.raw)
		}
	}

	t.Run("programs lists the advertiser's programs only", func(t *testing.T) {
		otherAdv := dataID(t, s.admin("POST", "/admin/v1/advertisers", `{"name":"Other","email":"o@other.example"}`))
		s.admin("POST", "/admin/v1/programs", `{"advertiser_id":`+itoa(otherAdv)+`,"name":"Theirs","domain":"other.example","commission_type":"fixed","commission_rate":1}`)
		r := s.cli("GET", "programs", tok, "")
		if r.status != 200 || r.header.Get("X-Request-ID") == "" {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		var out struct {
			Data []map[string]any `json:"data"`
		}
		_ = jsonUnmarshal(r.raw, &out)
		var names []string
		for _, p := range out.Data {
			names = append(names, p["name"].(string))
			if int64(p["advertiser_id"].(float64)) != adv {
				t.Fatalf("program of another advertiser: %v", p)
			}
		}
		if strings.Join(names, ",") != "Shop,Second,Third" {
			t.Fatalf("programs %v", names)
		}
	})
	t.Run("programs of a user without advertiser is empty", func(t *testing.T) {
		solo, _ := s.signIn(p, "solo@brand.example")
		if r := s.cli("GET", "programs", solo, ""); r.status != 200 || r.raw != `{"data":[]}` {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	})
}

func TestCLIStripeConnectIsGone(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	for _, tok := range []string{"", "anything"} {
		r := s.cli("POST", "stripe-connect", tok, `{}`)
		wantError(t, r, 410, "GoneError", "This endpoint has been retired. Connect your payment processor from the dashboard: Settings > Payments (/dashboard/#settings).")
		if r.header.Get("X-Request-ID") == "" || r.header.Get("X-RateLimit-Limit") != "60" {
			t.Fatalf("headers %v", r.header)
		}
	}
}

func TestCLIRateLimit(t *testing.T) {
	t.Parallel()
	t.Run("the 61st request of a login token is refused", func(t *testing.T) {
		t.Parallel()
		s, p := startCLI(t, nil)
		tok, _ := s.signIn(p, "busy@brand.example")
		// signIn's own requests (start, callback, poll) were counted per IP.
		for i := 1; i <= 60; i++ {
			r := s.cli("GET", "programs", tok, "")
			if r.status != 200 || r.header.Get("X-RateLimit-Limit") != "60" || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(60-i) {
				t.Fatalf("request %d: %d %v", i, r.status, r.header)
			}
		}
		r := s.cli("GET", "programs", tok, "")
		if r.status != 429 || r.header.Get("Retry-After") == "" || r.header.Get("X-RateLimit-Remaining") != "0" || r.header.Get("X-Request-ID") == "" {
			t.Fatalf("61st: %d %v %s", r.status, r.header, r.raw)
		}
		e, _ := r.body["error"].(map[string]any)
		if e["code"] != "rate_limited" || e["status"] != float64(429) || e["retry_after_seconds"] == nil || hasKey(r.body, "data") {
			t.Fatalf("429 body %s", r.raw)
		}
		// Refused before the endpoint: even a bad token gets the 401, but the
		// limited token gets 429 on every route, init included.
		if r := s.cli("POST", "init", tok, validInit); r.status != 429 || s.count("programs") != 0 {
			t.Fatalf("init while limited: %d %s", r.status, r.raw)
		}
		other, _ := s.signIn(p, "calm@brand.example")
		if r := s.cli("GET", "programs", other, ""); r.status != 200 {
			t.Fatalf("another token: %d %s", r.status, r.raw)
		}
	})
	t.Run("key-less sign-in routes are counted per IP", func(t *testing.T) {
		t.Parallel()
		s, _ := startCLI(t, map[string]string{"CLI_RATE_LIMIT": "2"})
		for range 2 {
			s.begin()
		}
		r := s.cli("POST", "auth/start", "", "")
		if r.status != 429 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if n := s.count("cli_login_sessions"); n != 2 {
			t.Fatalf("refused start wrote a session: %d", n)
		}
	})
}

// Every CLI 500 of this group ends its message with the request id and
// repeats it in details.request_id.
func TestCLIServerErrors(t *testing.T) {
	t.Parallel()
	s, p := startCLI(t, nil)
	tok, _, _ := s.advertiserLogin(p, "owner@brand.example")
	rename := func(from, to string) func() {
		s.exec(`ALTER TABLE ` + from + ` RENAME TO ` + to)
		return func() { s.exec(`ALTER TABLE ` + to + ` RENAME TO ` + from) }
	}

	t.Run("auth/start", func(t *testing.T) {
		undo := rename("cli_login_sessions", "cli_login_sessions_away")
		defer undo()
		want500(t, s.cli("POST", "auth/start", "", ""), "Failed to start auth session")
	})
	t.Run("auth/poll leaves the session collectable", func(t *testing.T) {
		l := s.begin()
		s.confirm(s.callback(l.state, p.IDToken(t, oidctest.Claims{Email: "owner@brand.example", EmailVerified: true, Nonce: l.nonce})))
		undo := rename("cli_login_tokens", "cli_login_tokens_away")
		want500(t, s.poll(l.state), "Failed to poll auth session")
		undo()
		if r := s.poll(l.state); data(t, r)["status"] != "complete" {
			t.Fatalf("after the failure: %s", r.raw)
		}
	})
	t.Run("init", func(t *testing.T) {
		undo := rename("api_keys", "api_keys_away")
		defer undo()
		want500(t, s.cli("POST", "init", tok, validInit), "Failed to create program")
	})
	t.Run("programs", func(t *testing.T) {
		undo := rename("programs", "programs_away")
		defer undo()
		want500(t, s.cli("GET", "programs", tok, ""), "Failed to list programs")
	})
	t.Run("login token lookup on init", func(t *testing.T) {
		undo := rename("cli_login_tokens", "cli_login_tokens_away")
		defer undo()
		want500(t, s.cli("POST", "init", tok, validInit), "Failed to create program")
	})
}

func TestCLICallbackProviderKeysUnreachable(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	s, p := startCLI(t, map[string]string{"OIDC_JWKS_URL": down.URL})
	l := s.begin()
	r := s.callback(l.state, p.IDToken(t, oidctest.Claims{Email: "a@brand.example", EmailVerified: true, Nonce: l.nonce}))
	want500(t, r, "Auth callback failed")
	if r := s.poll(l.state); r.raw != `{"data":{"status":"pending"}}` {
		t.Fatalf("session after failure: %s", r.raw)
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
