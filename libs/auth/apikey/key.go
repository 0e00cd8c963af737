// Package apikey authenticates program API keys: generation and hashing,
// Bearer header parsing, lookup through a service-provided Store, the exact
// 401 answers of each route family of the interface contract, and the
// rotation signalling (headers and body warnings) of a key marked for
// mandatory rotation.
package apikey

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

const (
	// LivePrefix and TestPrefix start every generated key.
	LivePrefix = "svc_live_"
	TestPrefix = "svc_test_"

	// bodyLen is the length of the base62 body: 43 digits hold 256 bits
	// (62^43 > 2^256).
	bodyLen = 43
	// PrefixLen is how much of a key is stored in clear for display: the
	// 9-character kind prefix plus 4 random characters, enough for a user to
	// tell keys apart and far too little to guess the rest (252 bits remain).
	PrefixLen = len(LivePrefix) + 4
	// maxTokenLen bounds what is hashed and looked up: a generated key is
	// 52 characters; anything much longer is garbage.
	maxTokenLen = 256
)

// ErrKeyNotFound is returned by a Store when no key has the hash.
var ErrKeyNotFound = errors.New("api key not found")

// Key is what a Store knows about a program API key.
type Key struct {
	ID        int64
	ProgramID int64
	Test      bool
	// RotationMarkedAt is when the key was marked for mandatory rotation.
	RotationMarkedAt *time.Time
	// RotationDeadline is when the key stops working; nil when not marked.
	RotationDeadline *time.Time
	Revoked          bool
}

// Retired reports whether the key is past its rotation deadline at now.
// Exactly at the deadline the key is retired: the deadline is the first
// instant it no longer works.
func (k Key) Retired(now time.Time) bool {
	return k.RotationDeadline != nil && !now.Before(*k.RotationDeadline)
}

// Rotating reports whether the key is marked for rotation and still works
// at now, so responses must carry the rotation signals.
func (k Key) Rotating(now time.Time) bool {
	return k.RotationDeadline != nil && now.Before(*k.RotationDeadline)
}

// Store looks a key up by the SHA-256 hash of its plain value. Each service
// implements it over its own table or replica.
type Store interface {
	// LookupKeyByHash returns ErrKeyNotFound (possibly wrapped) when no key
	// has this hash; any other error is an infrastructure failure.
	LookupKeyByHash(ctx context.Context, hash []byte) (Key, error)
}

// Generate makes a new key. plain is shown to the user once and never
// stored; hash is what the store keeps (unique index); prefix is stored for
// masked display (see Mask).
func Generate(test bool) (plain string, hash []byte, prefix string, err error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", nil, "", fmt.Errorf("generate api key: %w", err)
	}
	// base62 rather than base64url: no '-' or '_' in the body, so a
	// double-click selects the whole key and nothing needs escaping in
	// shells, URLs or YAML.
	body := new(big.Int).SetBytes(raw[:]).Text(62)
	body = strings.Repeat("0", bodyLen-len(body)) + body
	kind := LivePrefix
	if test {
		kind = TestPrefix
	}
	plain = kind + body
	return plain, Hash(plain), plain[:PrefixLen], nil
}

// ErrMalformed is returned (wrapped) by Parse for a value that does not have
// the shape of a generated key. Its text never includes the value.
var ErrMalformed = errors.New("malformed api key")

// Parse checks that plain has the shape Generate gives a key: LivePrefix or
// TestPrefix, then bodyLen base62 characters (0-9, a-z, A-Z). It reports
// whether it is a test key. It checks shape only, not that the key exists,
// and does not hold 43-digit bodies to Generate's 256-bit range, so keys
// made by hand or by another system in the same format are accepted.
func Parse(plain string) (test bool, err error) {
	var body string
	switch {
	case strings.HasPrefix(plain, LivePrefix):
		body = plain[len(LivePrefix):]
	case strings.HasPrefix(plain, TestPrefix):
		body, test = plain[len(TestPrefix):], true
	default:
		return false, fmt.Errorf("%w: it must start with %s or %s", ErrMalformed, LivePrefix, TestPrefix)
	}
	if len(body) != bodyLen {
		return false, fmt.Errorf("%w: it must have %d characters after the prefix, not %d", ErrMalformed, bodyLen, len(body))
	}
	for i := 0; i < len(body); i++ {
		if !isBase62(body[i]) {
			return false, fmt.Errorf("%w: only letters and digits may follow the prefix", ErrMalformed)
		}
	}
	return test, nil
}

func isBase62(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// Import checks an existing key with Parse and returns what a store keeps
// for it, exactly as Generate does for a new one: the hash, the display
// prefix and whether it is a test key. It is for keys issued elsewhere
// (another system, fixed demo keys).
func Import(plain string) (hash []byte, prefix string, test bool, err error) {
	if test, err = Parse(plain); err != nil {
		return nil, "", false, err
	}
	return Hash(plain), plain[:PrefixLen], test, nil
}

// Hash returns the SHA-256 of a plain key. A fast hash is right here: keys
// carry 256 random bits, so there is nothing for a slow KDF to protect
// against brute force, and every authenticated request pays for it.
func Hash(plain string) []byte {
	sum := sha256.Sum256([]byte(plain))
	return sum[:]
}

// Mask renders a stored prefix for display: "svc_live_ab12••••".
func Mask(prefix string) string {
	if len(prefix) > PrefixLen {
		prefix = prefix[:PrefixLen]
	}
	return prefix + "••••"
}

// IsTestKey reports whether a plain key was generated as a test key.
func IsTestKey(plain string) bool { return strings.HasPrefix(plain, TestPrefix) }

type keyCtx struct{}

// WithKey returns ctx carrying the authenticated key.
func WithKey(ctx context.Context, k Key) context.Context {
	return context.WithValue(ctx, keyCtx{}, k)
}

// KeyFrom returns the key stored by WithKey, if any.
func KeyFrom(ctx context.Context) (Key, bool) {
	k, ok := ctx.Value(keyCtx{}).(Key)
	return k, ok
}
