package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/auth/oidctest"
	"github.com/svc-dev/svc/libs/auth/session"
)

// The dashboard link `make run` prints signs the demo owner in with one
// click: start → the dev provider's page, which posts itself back → the
// callback redirects to /dashboard/ with a dashboard session. (The page's
// self-submission is a browser's; the test posts its form.)
func TestDevDashboardLinkSignsTheDemoOwnerIn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	t.Setenv("DEV_OIDC_ADDR", "127.0.0.1:0")
	t.Setenv("DEV_LOGIN_EMAIL", "")
	env, stop, err := devSignIn(io.Discard, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	seed := bytes.Repeat([]byte{4}, ed25519.SeedSize)
	env["PUBLIC_URL"] = base
	env["SESSION_SIGNING_KEY"] = base64.StdEncoding.EncodeToString(seed)
	st := stacktest.Start(t, env, "accounts")
	gw := httptest.NewUnstartedServer(gateway.New(st.Handlers()))
	_ = gw.Listener.Close()
	gw.Listener = ln
	gw.Start()
	t.Cleanup(gw.Close)

	var out strings.Builder
	printDashboardLink(&out, base)
	link := base + "/api/v1/dashboard/auth/start?return_to=/dashboard/"
	if !strings.Contains(out.String(), link) || !strings.Contains(out.String(), "owner@demo-brand.example") {
		t.Fatalf("printed %q, want the link %s and the demo owner", out.String(), link)
	}

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := browser.Get(link) // follows the redirect to the provider
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `onload="document.forms[0].submit()"`) {
		t.Fatalf("provider page %d: %s", resp.StatusCode, page)
	}
	action, fields, err := oidctest.FormPost(string(page))
	if err != nil || action != base+"/api/v1/dashboard/auth/callback" {
		t.Fatalf("form posts to %q (%v)", action, err)
	}
	browser.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err = browser.PostForm(action, fields)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	path, frag, _ := strings.Cut(resp.Header.Get("Location"), "#")
	if resp.StatusCode != http.StatusSeeOther || path != "/dashboard/" || !strings.HasPrefix(frag, "session=") {
		t.Fatalf("callback %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	tok := strings.TrimPrefix(strings.SplitN(frag, "&", 2)[0], "session=")
	v, err := session.NewVerifier(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey), "svc-accounts", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.VerifyKind(tok, session.KindDashboard); err != nil {
		t.Fatalf("session: %v", err)
	}
}
