// Package bearer checks a shared secret sent as "Authorization: Bearer
// <token>": the admin token, the service-to-service token. The configured
// secret is kept only as its SHA-256 hash, and both sides are hashed before
// a constant-time comparison, so the time taken says nothing about the
// secret or its length. Each service answers a refusal in its own words;
// this package only says which refusal it is.
package bearer

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Token is a configured secret, held as its hash.
type Token struct {
	hash [sha256.Size]byte
	set  bool
}

// New keeps the hash of plain; an empty plain is a token that accepts
// nothing (Configured reports false).
func New(plain string) Token {
	if plain == "" {
		return Token{}
	}
	return Token{hash: sha256.Sum256([]byte(plain)), set: true}
}

// Configured reports whether a secret was given.
func (t Token) Configured() bool { return t.set }

// Result is the outcome of Check.
type Result int

const (
	// OK: the request carries the token.
	OK Result = iota
	// Missing: no "Authorization: Bearer ..." header.
	Missing
	// Invalid: a Bearer credential that is not the token (always the
	// answer when no token is configured).
	Invalid
)

// Check reads r's Authorization header.
func (t Token) Check(r *http.Request) Result {
	h := r.Header.Get("Authorization")
	plain, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return Missing
	}
	got := sha256.Sum256([]byte(plain))
	if subtle.ConstantTimeCompare(got[:], t.hash[:]) != 1 || !t.set {
		return Invalid
	}
	return OK
}
