package session_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/svc-dev/svc/libs/auth/session"
)

const issuer = "svc-accounts"

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func keys(t *testing.T) (ed25519.PrivateKey, ed25519.PublicKey) {
	t.Helper()
	sk, pk, err := session.GenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	priv, pub, err := session.ParseKeys(sk, pk)
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

func clockAt(tm *time.Time) func() time.Time { return func() time.Time { return *tm } }

func TestIssueVerify_RoundTrip(t *testing.T) {
	t.Parallel()
	priv, pub := keys(t)
	now := t0
	iss, err := session.NewIssuer(priv, issuer, time.Hour, clockAt(&now))
	if err != nil {
		t.Fatal(err)
	}
	ver, err := session.NewVerifier(pub, issuer, clockAt(&now))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{session.KindDashboard, session.KindCLI} {
		t.Run(kind, func(t *testing.T) {
			tok, exp, err := iss.Issue(42, kind)
			if err != nil {
				t.Fatal(err)
			}
			if !exp.Equal(t0.Add(time.Hour)) {
				t.Errorf("expiresAt %v", exp)
			}
			c, err := ver.VerifyKind(tok, kind)
			if err != nil {
				t.Fatal(err)
			}
			if c.UserID != 42 || c.Kind != kind || !c.ExpiresAt.Equal(exp) || len(c.ID) != 32 {
				t.Errorf("claims %+v", c)
			}
		})
	}
	a, _, _ := iss.Issue(1, session.KindDashboard)
	b, _, _ := iss.Issue(1, session.KindDashboard)
	ca, _ := ver.Verify(a)
	cb, _ := ver.Verify(b)
	if ca.ID == cb.ID {
		t.Error("two tokens share a jti")
	}
}

func TestVerify_ExpiryWithInjectedClock(t *testing.T) {
	t.Parallel()
	priv, pub := keys(t)
	issueAt := t0
	iss, _ := session.NewIssuer(priv, issuer, time.Hour, clockAt(&issueAt))
	tok, exp, err := iss.Issue(7, session.KindDashboard)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		now         time.Time
		wantExpired bool
	}{
		{"just issued", t0, false},
		{"at expiry", exp, false},
		{"within leeway", exp.Add(5*time.Second - time.Nanosecond), false},
		{"at the end of the leeway", exp.Add(5 * time.Second), true},
		{"a day later", exp.Add(24 * time.Hour), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			now := tt.now
			ver, _ := session.NewVerifier(pub, issuer, clockAt(&now))
			_, err := ver.Verify(tok)
			if tt.wantExpired {
				if !errors.Is(err, session.ErrExpired) || !errors.Is(err, session.ErrInvalidToken) {
					t.Fatalf("err = %v, want ErrExpired and ErrInvalidToken", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestVerify_Rejects(t *testing.T) {
	t.Parallel()
	priv, pub := keys(t)
	otherPriv, _ := keys(t)
	now := t0
	good, _ := session.NewIssuer(priv, issuer, time.Hour, clockAt(&now))
	wrongKey, _ := session.NewIssuer(otherPriv, issuer, time.Hour, clockAt(&now))
	wrongIss, _ := session.NewIssuer(priv, "someone-else", time.Hour, clockAt(&now))
	future := t0.Add(time.Hour)
	fromFuture, _ := session.NewIssuer(priv, issuer, time.Hour, clockAt(&future))

	signed := func(m jwt.SigningMethod, key any, claims jwt.Claims) string {
		s, err := jwt.NewWithClaims(m, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	valid := jwt.RegisteredClaims{
		Issuer: issuer, Subject: "42", Audience: jwt.ClaimStrings{session.KindDashboard},
		ExpiresAt: jwt.NewNumericDate(t0.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(t0),
	}
	with := func(f func(*jwt.RegisteredClaims)) jwt.RegisteredClaims {
		c := valid
		f(&c)
		return c
	}
	issue := func(i *session.Issuer) string {
		tok, _, err := i.Issue(42, session.KindDashboard)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	goodTok := issue(good)
	parts := strings.Split(goodTok, ".")

	tests := []struct {
		name  string
		token string
	}{
		{"empty", ""},
		{"garbage", "not-a-jwt"},
		{"three garbage parts", "a.b.c"},
		{"oversized", strings.Repeat("a", 5000)},
		{"signed by another key", issue(wrongKey)},
		{"wrong issuer", issue(wrongIss)},
		{"issued in the future", issue(fromFuture)},
		{"alg none", signed(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, valid)},
		{"HS256 with the public key as secret", signed(jwt.SigningMethodHS256, []byte(pub), valid)},
		{"HS256 with base64 public key as secret", signed(jwt.SigningMethodHS256, []byte(base64.StdEncoding.EncodeToString(pub)), valid)},
		{"tampered payload", parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"svc-accounts","sub":"1","aud":["dashboard"],"exp":9999999999,"iat":1}`)) + "." + parts[2]},
		{"signature stripped", parts[0] + "." + parts[1] + "."},
		{"no expiry", signed(jwt.SigningMethodEdDSA, priv, with(func(c *jwt.RegisteredClaims) { c.ExpiresAt = nil }))},
		{"subject not a user id", signed(jwt.SigningMethodEdDSA, priv, with(func(c *jwt.RegisteredClaims) { c.Subject = "alice" }))},
		{"subject zero", signed(jwt.SigningMethodEdDSA, priv, with(func(c *jwt.RegisteredClaims) { c.Subject = "0" }))},
		{"unknown kind", signed(jwt.SigningMethodEdDSA, priv, with(func(c *jwt.RegisteredClaims) { c.Audience = jwt.ClaimStrings{"admin"} }))},
		{"two kinds", signed(jwt.SigningMethodEdDSA, priv, with(func(c *jwt.RegisteredClaims) { c.Audience = jwt.ClaimStrings{"dashboard", "cli"} }))},
		{"no kind", signed(jwt.SigningMethodEdDSA, priv, with(func(c *jwt.RegisteredClaims) { c.Audience = nil }))},
	}
	ver, _ := session.NewVerifier(pub, issuer, clockAt(&now))
	if _, err := ver.Verify(goodTok); err != nil {
		t.Fatalf("control token refused: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := ver.Verify(tt.token)
			if !errors.Is(err, session.ErrInvalidToken) {
				t.Fatalf("Verify = %+v, %v; want ErrInvalidToken", c, err)
			}
			if errors.Is(err, session.ErrExpired) {
				t.Fatalf("reported as expired: %v", err)
			}
		})
	}
}

func TestVerifyKind_RefusesOtherKind(t *testing.T) {
	t.Parallel()
	priv, pub := keys(t)
	now := t0
	iss, _ := session.NewIssuer(priv, issuer, time.Hour, clockAt(&now))
	ver, _ := session.NewVerifier(pub, issuer, clockAt(&now))
	cli, _, _ := iss.Issue(5, session.KindCLI)
	if _, err := ver.VerifyKind(cli, session.KindDashboard); !errors.Is(err, session.ErrInvalidToken) {
		t.Fatalf("CLI token accepted as dashboard: %v", err)
	}
}

func TestIssue_RejectsBadInput(t *testing.T) {
	t.Parallel()
	priv, _ := keys(t)
	iss, _ := session.NewIssuer(priv, issuer, time.Hour, nil)
	for _, tt := range []struct {
		name string
		uid  int64
		kind string
	}{{"zero user", 0, session.KindCLI}, {"unknown kind", 1, "admin"}} {
		if _, _, err := iss.Issue(tt.uid, tt.kind); err == nil {
			t.Errorf("%s: Issue succeeded", tt.name)
		}
	}
}

func TestConstructors_RejectBadConfig(t *testing.T) {
	t.Parallel()
	priv, pub := keys(t)
	if _, err := session.NewIssuer(priv[:10], issuer, time.Hour, nil); err == nil {
		t.Error("short private key accepted")
	}
	if _, err := session.NewIssuer(priv, "", time.Hour, nil); err == nil {
		t.Error("empty issuer accepted")
	}
	if _, err := session.NewIssuer(priv, issuer, 0, nil); err == nil {
		t.Error("zero ttl accepted")
	}
	if _, err := session.NewVerifier(pub[:5], issuer, nil); err == nil {
		t.Error("short public key accepted")
	}
	if _, err := session.NewVerifier(pub, "", nil); err == nil {
		t.Error("empty issuer accepted")
	}
}

func TestParseKeys(t *testing.T) {
	t.Parallel()
	sk, pk, err := session.GenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	_, pk2, _ := session.GenerateKeyPair()
	seed, _ := base64.StdEncoding.DecodeString(sk)
	full := ed25519.NewKeyFromSeed(seed)
	corrupt := append([]byte(nil), full...)
	corrupt[40] ^= 0xff

	tests := []struct {
		name    string
		sk, pk  string
		wantErr bool
	}{
		{"generated pair", sk, pk, false},
		{"surrounding whitespace", " " + sk + "\n", pk + "\n", false},
		{"url base64 unpadded", base64.RawURLEncoding.EncodeToString(seed), base64.RawURLEncoding.EncodeToString(mustB64(t, pk)), false},
		{"64-byte private key", base64.StdEncoding.EncodeToString(full), pk, false},
		{"corrupt 64-byte private key", base64.StdEncoding.EncodeToString(corrupt), pk, true},
		{"mismatched pair", sk, pk2, true},
		{"not base64", "!!!", pk, true},
		{"wrong length", base64.StdEncoding.EncodeToString([]byte("short")), pk, true},
		{"public key wrong length", sk, base64.StdEncoding.EncodeToString([]byte("short")), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := session.ParseKeys(tt.sk, tt.pk)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), strings.TrimSpace(tt.sk)) {
				t.Fatalf("error leaks the signing key: %v", err)
			}
		})
	}
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
