package server_test

import (
	"net/url"
	"testing"
)

// Standards: bad input gets the spec's error (or a clear 400) and writes
// nothing. Postgres text cannot hold U+0000: a NUL in a body string, a
// query value or a form value is refused before the handler (libs/httpkit)
// instead of failing the query as a 500.

func TestAdminNULIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	ids := s.seedCatalog()
	prog := "/admin/v1/programs/" + itoa(ids.program)
	cases := []struct {
		name, method, path, body string
		field, message, table    string
	}{
		{"partner name", "POST", "/admin/v1/partners", `{"name":"P\u0000","email":"x@y.example"}`,
			"name", "name must not contain the NUL character", "partners"},
		{"advertiser email", "POST", "/admin/v1/advertisers", `{"name":"A","email":"a\u0000@b.example"}`,
			"email", "email must not contain the NUL character", "advertisers"},
		{"program allowed_origins element", "POST", "/admin/v1/programs", `{"advertiser_id":` + itoa(ids.advertiser) +
			`,"name":"x","domain":"x.example","commission_type":"fixed","commission_rate":5,"allowed_origins":["https://a.example","https://b.example\u0000"]}`,
			"allowed_origins[1]", "allowed_origins[1] must not contain the NUL character", "programs"},
		{"program update nested processor_connection", "PATCH", prog, `{"processor_connection":{"status":"connected","account_id":"acct\u0000"}}`,
			"processor_connection.account_id", "processor_connection.account_id must not contain the NUL character", "programs"},
		{"link code", "POST", prog + "/links", `{"partner_id":` + itoa(ids.partner) + `,"code":"C\u0000"}`,
			"code", "code must not contain the NUL character", "links"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, outbox := s.count(tc.table), s.count("outbox")
			r := s.admin(tc.method, tc.path, tc.body)
			lookupField(t, r, tc.field, tc.message)
			if r.header.Get("X-Catalog-Seq") != "" {
				t.Fatal("a refused write must not answer a catalog sequence")
			}
			if after := s.count(tc.table); after != before {
				t.Fatalf("%s rows %d -> %d", tc.table, before, after)
			}
			if after := s.count("outbox"); after != outbox {
				t.Fatalf("outbox rows %d -> %d", outbox, after)
			}
		})
	}
	for _, tc := range []struct{ name, path, field string }{
		{"user lookup ?email=", "/admin/v1/users?email=" + url.QueryEscape("owner\x00@brand.example"), "email"},
		{"partner lookup ?email=", "/admin/v1/partners?email=" + url.QueryEscape("p\x00@partner.example"), "email"},
		{"link lookup ?code=", prog + "/links?code=" + url.QueryEscape("CODE1\x00"), "code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookupField(t, s.admin("GET", tc.path, ""), tc.field, tc.field+" must not contain the NUL character")
		})
	}
}

func TestCLINULIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	s, p := startCLI(t, nil)
	tok, _, _ := s.advertiserLogin(p, "owner@brand.example")

	t.Run("poll ?state= with a NUL", func(t *testing.T) {
		wantError(t, s.poll(s.begin().state+"\x00"), 400, "BadRequestError", "state must not contain the NUL character")
	})
	t.Run("callback state with a NUL, JSON and form", func(t *testing.T) {
		l := s.begin()
		signed, tokens := s.countWhere("cli_login_sessions", "signed_in_at IS NOT NULL"), s.count("cli_login_tokens")
		wantError(t, s.callback(l.state+"\x00", "tok"), 400, "BadRequestError", "state must not contain the NUL character")
		form := url.Values{"state": {l.state + "\x00"}, "id_token": {"tok"}}.Encode()
		wantError(t, s.do("POST", "/api/v1/cli/auth/callback", "", "application/x-www-form-urlencoded", form),
			400, "BadRequestError", "state must not contain the NUL character")
		if s.countWhere("cli_login_sessions", "signed_in_at IS NOT NULL") != signed || s.count("cli_login_tokens") != tokens {
			t.Fatal("a refused callback signed a session in")
		}
	})
	for _, tc := range []struct{ name, body, message string }{
		{"init name", `{"name":"Shop\u0000","domain":"shop.example","commission_type":"percent","commission_rate":10}`, "name must not contain the NUL character"},
		{"init domain", `{"name":"Shop","domain":"shop.example\u0000","commission_type":"percent","commission_rate":10}`, "domain must not contain the NUL character"},
		{"init commission_type", `{"name":"Shop","domain":"shop.example","commission_type":"percent\u0000","commission_rate":10}`, "commission_type must not contain the NUL character"},
		{"init commission_rate: the spec's message", `{"name":"Shop","domain":"shop.example","commission_type":"percent","commission_rate":"\u0000"}`, "commission_rate must be a positive number"},
		{"init cookie_duration: the spec's message", `{"name":"Shop","domain":"shop.example","commission_type":"percent","commission_rate":10,"cookie_duration":"3\u0000"}`, "cookie_duration must be a whole number of days from 1 to 365"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			programs, keys, outbox := s.count("programs"), s.count("api_keys"), s.count("outbox")
			wantError(t, s.cli("POST", "init", tok, tc.body), 400, "BadRequestError", tc.message)
			if s.count("programs") != programs || s.count("api_keys") != keys || s.count("outbox") != outbox {
				t.Fatal("a refused init wrote rows")
			}
		})
	}
}

func TestProgramSettingsNULIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	f := s.settingsFixture()
	events := s.count("outbox")
	for _, c := range []struct{ name, body, message string }{
		{"allowed_origins element", `{"allowed_origins":["https://shop.example\u0000"]}`, "allowed_origins[0] must not contain the NUL character"},
		{"lead_auth_policy", `{"lead_auth_policy":"browser_allowed\u0000"}`, "lead_auth_policy must not contain the NUL character"},
		{"key of a setting", `{"lead_auth_policy\u0000":"browser_allowed"}`, "Request body field names must not contain the NUL character"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantError(t, s.settings("PATCH", f.program, f.member, c.body), 400, "BadRequestError", c.message)
		})
	}
	t.Run("access is still checked first", func(t *testing.T) {
		r := s.settings("PATCH", f.program, f.outsider, `{"lead_auth_policy":"\u0000"}`)
		if r.status != 403 {
			t.Fatalf("outsider: %d %s", r.status, r.raw)
		}
	})
	if n := s.count("outbox"); n != events {
		t.Fatalf("refused changes published %d events", n-events)
	}
	if r := s.settings("GET", f.program, f.member, ""); r.body["data"].(map[string]any)["lead_auth_policy"] != "server_required" {
		t.Fatalf("refused change written: %s", r.raw)
	}
}
