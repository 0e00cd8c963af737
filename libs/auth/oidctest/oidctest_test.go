package oidctest_test

import (
	"context"
	"crypto"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/svc-dev/svc/libs/auth/oidctest"
)

// verifier is what a relying party builds: go-oidc over the provider's
// published keys.
func verifier(t *testing.T, p *oidctest.Provider, keys oidc.KeySet, now time.Time) *oidc.IDTokenVerifier {
	t.Helper()
	return oidc.NewVerifier(p.Issuer(), keys, &oidc.Config{
		ClientID:             p.ClientID(),
		SupportedSigningAlgs: []string{p.Algorithm()},
		Now:                  func() time.Time { return now },
	})
}

func TestTokensVerifyWithGoOIDCForEveryAlgorithm(t *testing.T) {
	for _, alg := range []string{oidctest.RS256, oidctest.ES256, oidctest.EdDSA} {
		t.Run(alg, func(t *testing.T) {
			p := oidctest.Start(t, oidctest.WithAlgorithm(alg))
			ctx := context.Background()
			tok := p.IDToken(t, oidctest.Claims{Email: "Ann@Example.com", EmailVerified: true, Name: "Ann", Nonce: "n-1"})
			v := verifier(t, p, oidc.NewRemoteKeySet(ctx, p.JWKSURL()), time.Now())
			id, err := v.Verify(ctx, tok)
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			var c struct {
				Email         string `json:"email"`
				EmailVerified bool   `json:"email_verified"`
				Name          string `json:"name"`
			}
			if err := id.Claims(&c); err != nil {
				t.Fatal(err)
			}
			if id.Nonce != "n-1" || c.Email != "Ann@Example.com" || !c.EmailVerified || c.Name != "Ann" || id.Subject != "sub-ann@example.com" {
				t.Fatalf("claims: nonce %q %+v sub %q", id.Nonce, c, id.Subject)
			}
		})
	}
}

func TestJWKSFileVerifiesWithStaticKeySet(t *testing.T) {
	p, err := oidctest.New(oidctest.WithIssuer("https://issuer.test"), oidctest.WithAlgorithm(oidctest.ES256))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := p.WriteJWKSFile(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 1 || set.Keys[0].KeyID != p.KeyID() || !set.Keys[0].IsPublic() || set.Keys[0].Use != "sig" {
		t.Fatalf("jwks: %s", raw)
	}
	tok := p.IDToken(t, oidctest.Claims{Email: "a@b.example", EmailVerified: true})
	v := verifier(t, p, &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{set.Keys[0].Key}}, time.Now())
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("verify: %v", err)
	}
}

func TestChosenClaimsAreRefusedByTheVerifier(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	p := oidctest.Start(t, oidctest.WithClock(func() time.Time { return now }))
	other := oidctest.Start(t, oidctest.WithIssuer(p.Issuer()), oidctest.WithKeyID(p.KeyID()))
	keys := oidc.NewRemoteKeySet(context.Background(), p.JWKSURL())
	cases := []struct {
		name string
		tok  string
	}{
		{"expired", p.IDToken(t, oidctest.Claims{Email: "a@b.example", ExpiresAt: now.Add(-time.Minute)})},
		{"wrong audience", p.IDToken(t, oidctest.Claims{Email: "a@b.example", Audience: []string{"someone-else"}})},
		{"wrong issuer", p.IDToken(t, oidctest.Claims{Email: "a@b.example", Issuer: "https://evil.example"})},
		{"no expiry", p.IDToken(t, oidctest.Claims{Email: "a@b.example", Omit: []string{"exp"}})},
		{"signed by another key", other.IDToken(t, oidctest.Claims{Email: "a@b.example"})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := verifier(t, p, keys, now).Verify(context.Background(), c.tok); err == nil {
				t.Fatal("verified")
			}
		})
	}
}

func TestMapDefaultsOmitAndExtra(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	p, err := oidctest.New(oidctest.WithIssuer("https://iss"), oidctest.WithClock(func() time.Time { return now }), oidctest.WithTokenTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	m := p.Map(oidctest.Claims{Email: "x@y.example", Omit: []string{"email_verified"}, Extra: map[string]any{"email_verified": "true", "hd": "y.example"}})
	want := map[string]any{"iss": "https://iss", "aud": oidctest.DefaultClientID, "sub": "sub-x@y.example", "iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(), "email": "x@y.example", "email_verified": "true", "hd": "y.example"}
	if len(m) != len(want) {
		t.Fatalf("got %v want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Fatalf("%s: got %v want %v", k, m[k], v)
		}
	}
	if m := p.Map(oidctest.Claims{Audience: []string{"a", "b"}}); len(m["aud"].([]string)) != 2 {
		t.Fatalf("aud list: %v", m["aud"])
	}
}

func TestDiscoveryDocumentWorksWithNewProvider(t *testing.T) {
	p := oidctest.Start(t, oidctest.WithAlgorithm(oidctest.ES256))
	ctx := context.Background()
	prov, err := oidc.NewProvider(ctx, p.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	if prov.Endpoint().AuthURL != p.AuthURL() {
		t.Fatalf("auth url %q", prov.Endpoint().AuthURL)
	}
	tok := p.IDToken(t, oidctest.Claims{Email: "a@b.example"})
	if _, err := prov.Verifier(&oidc.Config{ClientID: p.ClientID()}).Verify(ctx, tok); err != nil {
		t.Fatal(err)
	}
	env := p.Env()
	if env["OIDC_ISSUER"] != p.Issuer() || env["OIDC_AUDIENCE"] != oidctest.DefaultClientID || env["OIDC_JWKS_URL"] != p.URL()+"/jwks" || env["OIDC_AUTH_URL"] != p.URL()+"/authorize" {
		t.Fatalf("env %v", env)
	}
}

// A provider whose sign-in page is not at {issuer}/authorize publishes it
// in the discovery document, and serves it only there.
func TestWithAuthPathMovesTheSignInPage(t *testing.T) {
	const path = "/o/oauth2/v2/auth"
	p := oidctest.Start(t, oidctest.WithAuthPath(path))
	p.SetSignIn(&oidctest.SignIn{Email: "a@b.example", EmailVerified: true})
	if p.AuthURL() != p.URL()+path {
		t.Fatalf("AuthURL %q", p.AuthURL())
	}
	prov, err := oidc.NewProvider(context.Background(), p.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	if prov.Endpoint().AuthURL != p.URL()+path {
		t.Fatalf("discovered authorization_endpoint %q", prov.Endpoint().AuthURL)
	}
	if env := p.Env(); env["OIDC_AUTH_URL"] != p.URL()+path {
		t.Fatalf("env %v", env)
	}
	for _, tc := range []struct {
		link   string
		status int
	}{
		{authLink(p, ""), http.StatusOK},
		{strings.Replace(authLink(p, ""), path, oidctest.PathAuthorize, 1), http.StatusNotFound},
	} {
		resp, err := http.Get(tc.link)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: %d, want %d", tc.link, resp.StatusCode, tc.status)
		}
	}
}

func TestNewRefusesABadAuthPath(t *testing.T) {
	for _, path := range []string{"", "authorize", oidctest.PathJWKS, oidctest.PathDiscovery} {
		if _, err := oidctest.New(oidctest.WithAuthPath(path)); err == nil {
			t.Errorf("WithAuthPath(%q): want error", path)
		}
	}
}

func authLink(p *oidctest.Provider, redirect string) string {
	q := url.Values{"client_id": {p.ClientID()}, "response_type": {"id_token"}, "scope": {"openid email"}, "state": {"st-1"}, "nonce": {"no-1"}}
	if redirect != "" {
		q.Set("redirect_uri", redirect)
	}
	return p.AuthURL() + "?" + q.Encode()
}

func TestParseAuthURL(t *testing.T) {
	p := oidctest.Start(t)
	r, err := oidctest.ParseAuthURL(authLink(p, "https://app.example/cb"))
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "st-1" || r.Nonce != "no-1" || r.ClientID != p.ClientID() || r.RedirectURI != "https://app.example/cb" || r.Scope != "openid email" || r.ResponseType != "id_token" {
		t.Fatalf("%+v", r)
	}
	if _, err := oidctest.ParseAuthURL("https://x/authorize?state=s"); err == nil {
		t.Fatal("want error without nonce and client_id")
	}
}

func noRedirect() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func TestSignInPage(t *testing.T) {
	p := oidctest.Start(t)
	keys := oidc.NewRemoteKeySet(context.Background(), p.JWKSURL())
	checkToken := func(t *testing.T, tok string) {
		t.Helper()
		id, err := verifier(t, p, keys, time.Now()).Verify(context.Background(), tok)
		if err != nil || id.Nonce != "no-1" {
			t.Fatalf("token: %v nonce %q", err, id.Nonce)
		}
	}

	t.Run("refuses when nobody is signed in", func(t *testing.T) {
		p.SetSignIn(nil)
		resp, err := http.Get(authLink(p, ""))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
	t.Run("answers JSON without redirect_uri", func(t *testing.T) {
		p.SetSignIn(&oidctest.SignIn{Email: "a@b.example", EmailVerified: true})
		resp, err := http.Get(authLink(p, ""))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]string
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out["state"] != "st-1" {
			t.Fatalf("%v %v", out, err)
		}
		checkToken(t, out["id_token"])
	})
	t.Run("redirects with the token in the fragment", func(t *testing.T) {
		resp, err := noRedirect().Get(authLink(p, "https://app.example/cb"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, err := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusFound || err != nil || loc.Host != "app.example" {
			t.Fatalf("status %d location %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		frag, _ := url.ParseQuery(loc.Fragment)
		if frag.Get("state") != "st-1" {
			t.Fatalf("fragment %v", frag)
		}
		checkToken(t, frag.Get("id_token"))
	})
	t.Run("posts to the callback as the browser page would", func(t *testing.T) {
		var mu sync.Mutex
		var got map[string]string
		cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
				http.Error(w, "bad", 400)
				return
			}
			_ = json.NewDecoder(r.Body).Decode(&got)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"data":{"ok":true}}`)
		}))
		defer cb.Close()
		p.SetSignIn(&oidctest.SignIn{Email: "a@b.example", EmailVerified: true, CallbackURL: cb.URL})
		resp, err := http.Get(authLink(p, ""))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), `"ok":true`) {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		mu.Lock()
		defer mu.Unlock()
		if got["state"] != "st-1" {
			t.Fatalf("callback got %v", got)
		}
		checkToken(t, got["id_token"])
	})
	t.Run("refuses an unknown client", func(t *testing.T) {
		resp, err := http.Get(strings.Replace(authLink(p, ""), "client_id=svc-cli", "client_id=other", 1))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
}

func TestNewRefusesUnknownAlgorithm(t *testing.T) {
	if _, err := oidctest.New(oidctest.WithAlgorithm("HS256")); err == nil {
		t.Fatal("want error")
	}
}

// response_mode=form_post with a redirect_uri gets the form-post page (even
// when a CallbackURL is set for the command-line sign-in): a form posting
// state and a valid id_token for the nonce to redirect_uri, self-submitting
// only with AutoSubmit.
func TestAuthorizeFormPost(t *testing.T) {
	p := oidctest.Start(t)
	for _, auto := range []bool{false, true} {
		p.SetSignIn(&oidctest.SignIn{Email: "a@b.example", EmailVerified: true, CallbackURL: "http://127.0.0.1:1/cli", AutoSubmit: auto})
		q := url.Values{"client_id": {p.ClientID()}, "response_type": {"id_token"}, "response_mode": {"form_post"},
			"state": {"st<&>"}, "nonce": {"n1"}, "redirect_uri": {"https://app.example/cb?x=1&y=2"}}
		resp, err := http.Get(p.AuthURL() + "?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Fatalf("%d %v", resp.StatusCode, resp.Header)
		}
		action, fields, err := oidctest.FormPost(string(page))
		if err != nil || action != "https://app.example/cb?x=1&y=2" || fields.Get("state") != "st<&>" || fields.Get("id_token") == "" {
			t.Fatalf("form %q %v %v\n%s", action, fields, err, page)
		}
		if got := strings.Contains(string(page), "onload="); got != auto {
			t.Fatalf("auto-submit %v with AutoSubmit %v", got, auto)
		}
	}
	q := url.Values{"client_id": {p.ClientID()}, "response_mode": {"form_post"}, "state": {"s"}, "nonce": {"n"}, "redirect_uri": {"javascript:alert(1)"}}
	resp, err := http.Get(p.AuthURL() + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("a non-http redirect_uri: %d", resp.StatusCode)
	}
}

// With a CallbackURL, a browser's navigation gets a form that posts to it
// (the browser lands on the callback's page); a client asking for no page
// gets the callback's answer relayed.
func TestCallbackURLToABrowserIsAFormPost(t *testing.T) {
	p := oidctest.Start(t)
	p.SetSignIn(&oidctest.SignIn{Email: "a@b.example", EmailVerified: true, CallbackURL: "http://127.0.0.1:1/cli/callback", AutoSubmit: true})
	req, _ := http.NewRequest("GET", authLink(p, ""), nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	action, fields, err := oidctest.FormPost(string(page))
	if resp.StatusCode != 200 || err != nil || action != "http://127.0.0.1:1/cli/callback" || fields.Get("state") != "st-1" || fields.Get("id_token") == "" ||
		!strings.Contains(string(page), "onload=") {
		t.Fatalf("%d %q %v %v\n%s", resp.StatusCode, action, fields, err, page)
	}
	// No page asked for: the provider posts itself (to a closed port here).
	resp, err = http.Get(authLink(p, ""))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("relay: %d", resp.StatusCode)
	}
}
