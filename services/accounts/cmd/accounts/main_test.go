package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/svc-dev/svc/libs/auth/session"
)

// parseKeygen runs keygen with random and returns its two values by name.
func parseKeygen(t *testing.T, random *bytes.Reader) (signing, public, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := keygen(nil, random, &out, &errOut); code != 0 {
		t.Fatalf("keygen exit code %d, stderr %q", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("stdout has %d lines, want 2: %q", len(lines), out.String())
	}
	got := map[string]string{}
	for _, l := range lines {
		name, value, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("line %q is not NAME=value", l)
		}
		got[name] = value
	}
	return got["SESSION_SIGNING_KEY"], got["SESSION_PUBLIC_KEY"], errOut.String()
}

func TestKeygen(t *testing.T) {
	t.Run("signing key is base64 of a 32-byte seed", func(t *testing.T) {
		signing, _, _ := parseKeygen(t, bytes.NewReader(bytes.Repeat([]byte{7}, 64)))
		seed, err := base64.StdEncoding.DecodeString(signing)
		if err != nil {
			t.Fatalf("SESSION_SIGNING_KEY %q: %v", signing, err)
		}
		if len(seed) != ed25519.SeedSize {
			t.Fatalf("seed is %d bytes, want %d", len(seed), ed25519.SeedSize)
		}
		if !bytes.Equal(seed, bytes.Repeat([]byte{7}, ed25519.SeedSize)) {
			t.Fatalf("seed %x is not the first 32 bytes of the random source", seed)
		}
	})

	t.Run("public key is ed25519.NewKeyFromSeed of the seed", func(t *testing.T) {
		signing, public, _ := parseKeygen(t, bytes.NewReader(bytes.Repeat([]byte{9}, 32)))
		seed, _ := base64.StdEncoding.DecodeString(signing)
		pub, err := base64.StdEncoding.DecodeString(public)
		if err != nil {
			t.Fatalf("SESSION_PUBLIC_KEY %q: %v", public, err)
		}
		want := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
		if !want.Equal(ed25519.PublicKey(pub)) {
			t.Fatalf("public key %x, want %x", pub, want)
		}
	})

	t.Run("the services accept the pair (libs/auth/session)", func(t *testing.T) {
		signing, public, _ := parseKeygen(t, bytes.NewReader(bytes.Repeat([]byte{1}, 32)))
		if _, _, err := session.ParseKeys(signing, public); err != nil {
			t.Fatalf("session.ParseKeys: %v", err)
		}
	})

	t.Run("each run makes a new key from crypto/rand", func(t *testing.T) {
		buf := make([]byte, 64)
		if _, err := rand.Read(buf); err != nil {
			t.Fatal(err)
		}
		a, _, _ := parseKeygen(t, bytes.NewReader(buf[:32]))
		b, _, _ := parseKeygen(t, bytes.NewReader(buf[32:]))
		if a == b {
			t.Fatalf("two runs printed the same key")
		}
	})

	t.Run("stderr says the signing key is secret and keeps the keys out", func(t *testing.T) {
		signing, public, stderr := parseKeygen(t, bytes.NewReader(bytes.Repeat([]byte{3}, 32)))
		if !strings.Contains(stderr, "SESSION_SIGNING_KEY is a secret") {
			t.Fatalf("stderr %q has no secret hint", stderr)
		}
		if strings.Contains(stderr, signing) || strings.Contains(stderr, public) {
			t.Fatalf("stderr %q repeats a key", stderr)
		}
	})

	t.Run("arguments are refused", func(t *testing.T) {
		var out, errOut bytes.Buffer
		if code := keygen([]string{"--bits=256"}, rand.Reader, &out, &errOut); code != 2 {
			t.Fatalf("exit code %d, want 2", code)
		}
		if out.Len() != 0 {
			t.Fatalf("stdout %q, want nothing", out.String())
		}
	})

	t.Run("a failing random source prints no key", func(t *testing.T) {
		var out, errOut bytes.Buffer
		if code := keygen(nil, iotest.ErrReader(errors.New("no entropy")), &out, &errOut); code != 1 {
			t.Fatalf("exit code %d, want 1", code)
		}
		if out.Len() != 0 {
			t.Fatalf("stdout %q, want nothing", out.String())
		}
		if !strings.Contains(errOut.String(), "no entropy") {
			t.Fatalf("stderr %q does not name the cause", errOut.String())
		}
	})

	t.Run("a short random source prints no key", func(t *testing.T) {
		var out, errOut bytes.Buffer
		if code := keygen(nil, bytes.NewReader(make([]byte, 31)), &out, &errOut); code != 1 {
			t.Fatalf("exit code %d, want 1", code)
		}
		if out.Len() != 0 {
			t.Fatalf("stdout %q, want nothing", out.String())
		}
	})
}
