package secret

import (
	"bytes"
	"strings"
	"testing"
)

func TestSealOpensOnlyForItsEndpoint(t *testing.T) {
	box, err := NewBox(bytes.Repeat([]byte{7}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s, Prefix) {
		t.Fatalf("secret %q", s)
	}
	if raw, err := Raw(s); err != nil || len(raw) != Size {
		t.Fatalf("raw: %d bytes, %v", len(raw), err)
	}
	sealed, err := box.Seal(s, 12)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte(s[len(Prefix):])) {
		t.Fatal("the sealed secret contains the secret")
	}
	if got, err := box.Open(sealed, 12); err != nil || got != s {
		t.Fatalf("open: %q, %v", got, err)
	}
	if _, err := box.Open(sealed, 13); err == nil {
		t.Fatal("another endpoint's row opened the secret")
	}
	other, _ := NewBox(bytes.Repeat([]byte{8}, KeySize))
	if _, err := other.Open(sealed, 12); err == nil {
		t.Fatal("another key opened the secret")
	}
}

func TestParseKey(t *testing.T) {
	if _, err := ParseKey("AAAA"); err == nil {
		t.Fatal("a 3-byte key was accepted")
	}
	if _, err := ParseKey("not base64!"); err == nil {
		t.Fatal("not base64 was accepted")
	}
	if k, err := ParseKey("BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="); err != nil || len(k) != KeySize {
		t.Fatalf("%d bytes, %v", len(k), err)
	}
}

// A listener's sealed secret opens only for that listener, never as the
// endpoint with the same id, and an endpoint's never as a listener's.
func TestListenerSealIsItsOwn(t *testing.T) {
	box, err := NewBox(bytes.Repeat([]byte{7}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := New()
	sealed, err := box.SealListener(s, 12)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := box.OpenListener(sealed, 12); err != nil || got != s {
		t.Fatalf("open: %q, %v", got, err)
	}
	if _, err := box.OpenListener(sealed, 13); err == nil {
		t.Fatal("another listener opened the secret")
	}
	if _, err := box.Open(sealed, 12); err == nil {
		t.Fatal("a listener's secret opened as endpoint 12's")
	}
	ep, _ := box.Seal(s, 12)
	if _, err := box.OpenListener(ep, 12); err == nil {
		t.Fatal("an endpoint's secret opened as listener 12's")
	}
}
