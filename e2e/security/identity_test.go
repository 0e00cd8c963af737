package security_test

import (
	"context"
	"database/sql"
	"net/http"
	"testing"

	"github.com/svc-dev/svc/libs/auth/oidctest"
)

// msgIdentityMismatch is the refusal of a sign-in whose verified email
// belongs to an account bound to another identity at the provider.
const msgIdentityMismatch = "This email address belongs to an account that signs in with a different identity. Sign in with that identity, or ask your administrator."

// identityOf is the issuer and subject stored for user id ("" when none).
func (e *signInEnv) identityOf(id int64) (issuer, subject string) {
	e.t.Helper()
	var iss, sub sql.NullString
	if err := e.Stack.Instance("accounts").Platform().Pool.QueryRow(context.Background(),
		`SELECT oidc_issuer, oidc_subject FROM users WHERE id = $1`, id).Scan(&iss, &sub); err != nil {
		e.t.Fatalf("identity of user %d: %v", id, err)
	}
	return iss.String, sub.String
}

// meID is the id of the user a dashboard session belongs to.
func (e *signInEnv) meID(token string) int64 {
	e.t.Helper()
	return int64(e.me(token).want(e.t, 200).get("data", "user", "id").(float64))
}

// cliCallback runs the command-line sign-in up to its callback and
// answers the callback, with the user the session was signed in for (0
// when none).
func (e *signInEnv) cliCallback(who person) (reply, int64) {
	e.t.Helper()
	c := e.client("198.51.100.40")
	start := c.do("POST", "/api/v1/cli/auth/start", map[string]any{}).want(e.t, 201)
	link, err := oidctest.ParseAuthURL(start.str("data", "url"))
	if err != nil {
		e.t.Fatalf("start: %s: %v", start.Raw, err)
	}
	cb := c.do("POST", "/api/v1/cli/auth/callback", map[string]any{"state": start.str("data", "state"),
		"id_token": e.p.IDToken(e.t, oidctest.Claims{Subject: who.subject, Email: who.email, EmailVerified: true, Nonce: link.Nonce})})
	var uid sql.NullInt64
	if err := e.Stack.Instance("accounts").Platform().Pool.QueryRow(context.Background(),
		`SELECT user_id FROM cli_login_sessions WHERE state_hash = sha256($1::bytea)`, []byte(start.str("data", "state"))).Scan(&uid); err != nil {
		e.t.Fatalf("sign-in session: %v", err)
	}
	return cb, uid.Int64
}

// Accounts are matched on the provider's issuer and subject, stored at the
// first sign-in: an email change at the provider keeps the account, and a
// new subject arriving with a known email is refused (403
// ACCOUNT_IDENTITY_MISMATCH), never given the account; users from before
// (no identity stored) are bound at their next sign-in. Both sign-ins
// (dashboard and command line) share the rule.
func TestSignInMatchesTheProviderSubjectNotTheEmail(t *testing.T) {
	t.Parallel()
	e := startSignIn(t, "accounts")
	users := func() int { return e.count("accounts", `SELECT count(*) FROM users`) }
	alice := person{subject: "sub-alice", email: "alice@brand.example"}

	aliceID := e.meID(e.dashboardSession(alice))
	if iss, sub := e.identityOf(aliceID); iss != e.p.Issuer() || sub != alice.subject {
		t.Fatalf("first sign-in stored (%q, %q), want (%q, %q)", iss, sub, e.p.Issuer(), alice.subject)
	}

	t.Run("an email change at the provider keeps the account", func(t *testing.T) {
		before := users()
		moved := person{subject: alice.subject, email: "alice.new@elsewhere.example"}
		if id := e.meID(e.dashboardSession(moved)); id != aliceID {
			t.Fatalf("dashboard sign-in after the email change: user %d, want %d", id, aliceID)
		}
		if cb, id := e.cliCallback(moved); cb.Status != 200 || id != aliceID {
			t.Fatalf("command-line callback after the email change: %d %s, user %d, want %d", cb.Status, cb.Raw, id, aliceID)
		}
		if n := users(); n != before {
			t.Fatalf("%d users after the email change, want %d", n, before)
		}
		// The account keeps its address: the provider's new one is not
		// written over it.
		if me := e.me(e.dashboardSession(moved)); me.str("data", "user", "email") != alice.email {
			t.Fatalf("me: %s", me.Raw)
		}
	})

	t.Run("a new subject with a known email is refused, on both sign-ins", func(t *testing.T) {
		before := users()
		impostor := person{subject: "sub-someone-else", email: alice.email}
		r := e.dashboardSignIn(impostor)
		wantMessage(t, "dashboard callback", r, 403, msgIdentityMismatch)
		if r.str("error", "details", "code") != "ACCOUNT_IDENTITY_MISMATCH" || r.Header.Get("Location") != "" {
			t.Fatalf("dashboard callback: %v %s", r.Header, r.Raw)
		}
		cb, id := e.cliCallback(impostor)
		wantMessage(t, "command-line callback", cb, 403, msgIdentityMismatch)
		if cb.str("error", "details", "code") != "ACCOUNT_IDENTITY_MISMATCH" || id != 0 {
			t.Fatalf("command-line callback: %s, session signed in for user %d", cb.Raw, id)
		}
		// Different case, same address: still Alice's.
		wantMessage(t, "dashboard callback", e.dashboardSignIn(person{subject: "sub-other", email: "ALICE@Brand.Example"}), 403, msgIdentityMismatch)
		if n := users(); n != before {
			t.Fatalf("%d users after the refusals, want %d", n, before)
		}
		if iss, sub := e.identityOf(aliceID); iss != e.p.Issuer() || sub != alice.subject {
			t.Fatalf("Alice's identity became (%q, %q)", iss, sub)
		}
	})

	t.Run("a new subject with a new email is a new user", func(t *testing.T) {
		before := users()
		bob := person{subject: "sub-bob", email: "bob@brand.example"}
		id := e.meID(e.dashboardSession(bob))
		if id == aliceID || users() != before+1 {
			t.Fatalf("bob is user %d (alice %d), users %d (before %d)", id, aliceID, users(), before)
		}
		if iss, sub := e.identityOf(id); iss != e.p.Issuer() || sub != bob.subject {
			t.Fatalf("bob's identity (%q, %q)", iss, sub)
		}
	})

	t.Run("a user from before is bound at the next sign-in, then held to it", func(t *testing.T) {
		carol := e.id("POST", "/admin/v1/users", map[string]any{"email": "carol@brand.example", "name": "Carol"})
		if iss, sub := e.identityOf(carol); iss != "" || sub != "" {
			t.Fatalf("a user made by the admin API has an identity (%q, %q)", iss, sub)
		}
		if cb, id := e.cliCallback(person{subject: "sub-carol", email: "carol@brand.example"}); cb.Status != 200 || id != carol {
			t.Fatalf("command-line callback: %d %s, user %d, want %d", cb.Status, cb.Raw, id, carol)
		}
		if iss, sub := e.identityOf(carol); iss != e.p.Issuer() || sub != "sub-carol" {
			t.Fatalf("carol's identity (%q, %q)", iss, sub)
		}
		if id := e.meID(e.dashboardSession(person{subject: "sub-carol", email: "carol@brand.example"})); id != carol {
			t.Fatalf("dashboard sign-in: user %d, want %d", id, carol)
		}
		wantMessage(t, "dashboard callback", e.dashboardSignIn(person{subject: "sub-not-carol", email: "carol@brand.example"}), 403, msgIdentityMismatch)
	})

	t.Run("a suspended user is refused before any binding", func(t *testing.T) {
		dave := e.id("POST", "/admin/v1/users", map[string]any{"email": "dave@brand.example", "blocked": true})
		r := e.dashboardSignIn(person{subject: "sub-dave", email: "dave@brand.example"})
		wantMessage(t, "dashboard callback", r, http.StatusForbidden, "Your account has been suspended.")
		if iss, sub := e.identityOf(dave); iss != "" || sub != "" {
			t.Fatalf("a refused sign-in bound dave to (%q, %q)", iss, sub)
		}
	})
}
