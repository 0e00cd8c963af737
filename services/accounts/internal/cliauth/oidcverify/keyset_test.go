package oidcverify_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/auth/oidctest"
	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/cliauth/oidcverify"
)

type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// Issue 23: a 9.9 s CLI callback under fuzz load. go-oidc's remote key set
// fetched the provider's JWKS again for every token its cache did not
// verify, so forged tokens (public issuer, audience and key id, a signature
// of their own) each cost a fetch, and callbacks queued behind fetches up
// to the client's timeout. Now a forged signature under a known key is
// refused from the cache, and an unknown key id fetches at most once per
// RefetchGap.
func TestForgedTokensDoNotFetchTheKeys(t *testing.T) {
	p := oidctest.Start(t)
	forger := oidctest.Start(t, oidctest.WithIssuer(p.Issuer()), oidctest.WithKeyID(p.KeyID()))
	stranger := oidctest.Start(t, oidctest.WithIssuer(p.Issuer()), oidctest.WithKeyID("rotated-or-made-up"))
	now := time.Now()
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	fetches := &countingTransport{}
	ctx := context.Background()
	v, err := oidcverify.New(ctx, oidcverify.Config{Issuer: p.Issuer(), Audience: p.ClientID(), JWKSURL: p.JWKSURL(),
		HTTPClient: &http.Client{Transport: fetches, Timeout: 10 * time.Second},
		Now:        func() time.Time { return time.Unix(0, clock.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, p.IDToken(t, oidctest.Claims{Email: "a@b.example"})); err != nil {
		t.Fatal(err)
	}
	if n := fetches.n.Load(); n != 1 {
		t.Fatalf("%d fetches for the first token", n)
	}
	for range 50 {
		if _, err := v.Verify(ctx, forger.IDToken(t, oidctest.Claims{Email: "a@b.example"})); !errors.Is(err, errkind.Unauthenticated) {
			t.Fatalf("forged signature: %v", err)
		}
		if _, err := v.Verify(ctx, stranger.IDToken(t, oidctest.Claims{Email: "a@b.example"})); !errors.Is(err, errkind.Unauthenticated) {
			t.Fatalf("unknown key id: %v", err)
		}
	}
	if n := fetches.n.Load(); n != 1 {
		t.Fatalf("%d fetches after 100 forged tokens, want none beyond the first (the unknown key id came within RefetchGap of it)", n)
	}
	clock.Add(int64(oidcverify.RefetchGap))
	if _, err := v.Verify(ctx, stranger.IDToken(t, oidctest.Claims{Email: "a@b.example"})); !errors.Is(err, errkind.Unauthenticated) {
		t.Fatalf("unknown key id: %v", err)
	}
	if _, err := v.Verify(ctx, p.IDToken(t, oidctest.Claims{Email: "a@b.example"})); err != nil {
		t.Fatal(err)
	}
	if n := fetches.n.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2 (an unknown key id fetches again after the gap, once)", n)
	}
}
