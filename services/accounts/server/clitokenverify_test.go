package server_test

import (
	"strings"
	"testing"

	"github.com/svc-dev/svc/services/accounts/server"
)

const testInternalToken = "internal-token-for-tests-0123456789"

func TestCLITokenVerifyInternalRoute(t *testing.T) {
	s, p := startCLI(t, map[string]string{"INTERNAL_TOKEN": testInternalToken})
	token, uid := s.signIn(p, "verify@brand.example")
	verify := func(bearer, tok string) reply {
		t.Helper()
		return s.do("POST", server.CLITokenVerifyPath, bearer, "application/json", jsonBody(t, map[string]string{"token": tok}))
	}
	refused := func(t *testing.T, r reply) {
		t.Helper()
		if r.status != 404 || strings.Contains(r.raw, "svc_cli_") {
			t.Fatalf("want 404 without the token: %d %s", r.status, r.raw)
		}
		e, _ := r.body["error"].(map[string]any)
		if e["message"] != "Login token not valid" || e["code"] != "not_found" {
			t.Fatalf("refusal: %s", r.raw)
		}
	}

	t.Run("valid", func(t *testing.T) {
		r := verify(testInternalToken, token)
		if r.status != 200 || int64(data(t, r)["user_id"].(float64)) != uid {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if strings.Contains(r.raw, token) {
			t.Fatal("token echoed")
		}
	})
	t.Run("no or wrong internal token", func(t *testing.T) {
		if r := verify("", token); r.status != 401 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if r := verify("wrong", token); r.status != 401 || strings.Contains(r.raw, "svc_cli_") {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		// A login token is not an internal token.
		if r := verify(token, token); r.status != 401 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		refused(t, verify(testInternalToken, "svc_cli_nothing"))
		refused(t, verify(testInternalToken, "not-a-token"))
		if r := s.do("POST", server.CLITokenVerifyPath, testInternalToken, "application/json", `{"token":"`+strings.Repeat("a", 4096)+`"}`); r.status != 400 {
			t.Fatalf("oversized body: %d %s", r.status, r.raw)
		}
	})
	t.Run("blocked user", func(t *testing.T) {
		s.exec(`UPDATE users SET blocked = true WHERE id = $1`, uid)
		r := verify(testInternalToken, token)
		s.exec(`UPDATE users SET blocked = false WHERE id = $1`, uid)
		refused(t, r)
		if r := verify(testInternalToken, token); r.status != 200 {
			t.Fatalf("unblocked: %d %s", r.status, r.raw)
		}
	})
	t.Run("expired", func(t *testing.T) {
		s.exec(`UPDATE cli_login_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = $1`, sha(token))
		refused(t, verify(testInternalToken, token))
	})
	t.Run("revoked", func(t *testing.T) {
		other, _ := s.signIn(p, "verify@brand.example")
		if r := verify(testInternalToken, other); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		s.exec(`DELETE FROM cli_login_tokens WHERE token_hash = $1`, sha(other))
		refused(t, verify(testInternalToken, other))
	})
}

func TestCLITokenVerifyWithoutInternalToken(t *testing.T) {
	s, p := startCLI(t, nil)
	token, _ := s.signIn(p, "verify@brand.example")
	r := s.do("POST", server.CLITokenVerifyPath, "anything", "application/json", jsonBody(t, map[string]string{"token": token}))
	if r.status != 503 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
}
