package oidcverify_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/svc-dev/svc/libs/errkind"

	"github.com/svc-dev/svc/libs/auth/oidctest"
	"github.com/svc-dev/svc/services/accounts/internal/cliauth/oidcverify"
)

func TestNewRefusesIncompleteConfig(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		cfg  oidcverify.Config
	}{
		{"no issuer", oidcverify.Config{Audience: "a", JWKSURL: "http://x"}},
		{"no audience", oidcverify.Config{Issuer: "i", JWKSURL: "http://x"}},
		{"no keys", oidcverify.Config{Issuer: "i", Audience: "a"}},
		{"both key sources", oidcverify.Config{Issuer: "i", Audience: "a", JWKSURL: "http://x", JWKSFile: "f"}},
		{"symmetric algorithm", oidcverify.Config{Issuer: "i", Audience: "a", JWKSURL: "http://x", Algorithms: []string{"HS256"}}},
		{"missing file", oidcverify.Config{Issuer: "i", Audience: "a", JWKSFile: filepath.Join(dir, "none.json")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := oidcverify.New(context.Background(), c.cfg); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestJWKSFileRefusesPrivateKeysAndEmptySets(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, v any) string {
		b, _ := json.Marshal(v)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	priv := jose.JSONWebKey{Key: key, KeyID: "k", Algorithm: "ES256", Use: "sig"}
	enc := jose.JSONWebKey{Key: key.Public(), KeyID: "e", Algorithm: "ECDH-ES", Use: "enc"}
	for name, path := range map[string]string{
		"private key":          write("priv.json", jose.JSONWebKeySet{Keys: []jose.JSONWebKey{priv}}),
		"no keys":              write("empty.json", jose.JSONWebKeySet{}),
		"only encryption keys": write("enc.json", jose.JSONWebKeySet{Keys: []jose.JSONWebKey{enc}}),
		"not json":             write("bad.json", "nope"),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := oidcverify.New(context.Background(), oidcverify.Config{Issuer: "https://i", Audience: "a", JWKSFile: path}); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestVerifyIdentityAndErrorKinds(t *testing.T) {
	p := oidctest.Start(t)
	ctx := context.Background()
	v, err := oidcverify.New(ctx, oidcverify.Config{Issuer: p.Issuer(), Audience: p.ClientID(), JWKSURL: p.JWKSURL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("string email_verified and name", func(t *testing.T) {
		tok := p.IDToken(t, oidctest.Claims{Email: "a@b.example", Name: "Ann", Nonce: "n", Omit: []string{"email_verified"}, Extra: map[string]any{"email_verified": "true"}})
		id, err := v.Verify(ctx, tok)
		if err != nil || !id.EmailVerified || id.Email != "a@b.example" || id.Name != "Ann" || id.Nonce != "n" || id.Subject == "" {
			t.Fatalf("%+v %v", id, err)
		}
	})
	t.Run("email_verified that is not a boolean", func(t *testing.T) {
		tok := p.IDToken(t, oidctest.Claims{Email: "a@b.example", Extra: map[string]any{"email_verified": "yes"}})
		if _, err := v.Verify(ctx, tok); !errors.Is(err, errkind.Unauthenticated) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("refused token is unauthenticated", func(t *testing.T) {
		tok := p.IDToken(t, oidctest.Claims{Email: "a@b.example", Audience: []string{"x"}})
		if _, err := v.Verify(ctx, tok); !errors.Is(err, errkind.Unauthenticated) || errors.Is(err, errkind.Unavailable) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("unreachable keys are unavailable", func(t *testing.T) {
		down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }))
		defer down.Close()
		v, err := oidcverify.New(ctx, oidcverify.Config{Issuer: p.Issuer(), Audience: p.ClientID(), JWKSURL: down.URL})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(ctx, p.IDToken(t, oidctest.Claims{Email: "a@b.example"})); !errors.Is(err, errkind.Unavailable) {
			t.Fatalf("%v", err)
		}
	})
}
