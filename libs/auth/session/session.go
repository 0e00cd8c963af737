// Package session issues and verifies dashboard and command-line session
// tokens: JWTs signed with Ed25519 (EdDSA). The accounts service holds the
// private key (SESSION_SIGNING_KEY) and issues; every other service holds
// only the public key (SESSION_PUBLIC_KEY) and verifies locally, without a
// call to accounts.
package session

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Token kinds. The kind is the token's audience, so a CLI token is refused
// where a dashboard token is expected (VerifyKind) and the other way round.
const (
	KindDashboard = "dashboard"
	KindCLI       = "cli"
)

const (
	// leeway absorbs clock skew between the issuing and verifying pods; a
	// few seconds, so an expired session does not linger.
	leeway = 5 * time.Second
	// maxTokenLen refuses absurd input before any parsing; a real token is
	// about 300 bytes.
	maxTokenLen = 4096
)

var (
	// ErrInvalidToken is matched (errors.Is) by every verification failure.
	ErrInvalidToken = errors.New("invalid session token")
	// ErrExpired is matched, in addition to ErrInvalidToken, by a token past
	// its expiry.
	ErrExpired = errors.New("session token expired")
)

// Claims is what a verified token says.
type Claims struct {
	UserID    int64
	Kind      string
	ExpiresAt time.Time
	// ID is the token's unique id (jti), for revocation lists and logs.
	ID string
}

func validKind(kind string) bool { return kind == KindDashboard || kind == KindCLI }

// Issuer signs session tokens.
type Issuer struct {
	priv   ed25519.PrivateKey
	kid    string
	issuer string
	ttl    time.Duration
	now    func() time.Time
}

// NewIssuer returns an Issuer signing with priv, stamping iss=issuer and
// tokens valid for ttl from now().
func NewIssuer(priv ed25519.PrivateKey, issuer string, ttl time.Duration, now func() time.Time) (*Issuer, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("new session issuer: private key is %d bytes, want %d", len(priv), ed25519.PrivateKeySize)
	}
	if issuer == "" {
		return nil, errors.New("new session issuer: issuer is empty")
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("new session issuer: ttl %v must be positive", ttl)
	}
	if now == nil {
		now = time.Now
	}
	pub, ok := priv.Public().(ed25519.PublicKey)
	if !ok {
		return nil, errors.New("new session issuer: private key has no Ed25519 public key")
	}
	return &Issuer{priv: priv, kid: KeyID(pub), issuer: issuer, ttl: ttl, now: now}, nil
}

// Issue signs a token for userID of the given kind (KindDashboard or
// KindCLI). expiresAt is the token's exp, at second precision as in the
// token.
func (i *Issuer) Issue(userID int64, kind string) (token string, expiresAt time.Time, err error) {
	if userID <= 0 {
		return "", time.Time{}, fmt.Errorf("issue session token: user id %d must be positive", userID)
	}
	if !validKind(kind) {
		return "", time.Time{}, fmt.Errorf("issue session token: unknown kind %q", kind)
	}
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", time.Time{}, fmt.Errorf("issue session token: token id: %w", err)
	}
	now := i.now().Truncate(time.Second)
	expiresAt = now.Add(i.ttl)
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.RegisteredClaims{
		Issuer:    i.issuer,
		Subject:   strconv.FormatInt(userID, 10),
		Audience:  jwt.ClaimStrings{kind},
		ExpiresAt: jwt.NewNumericDate(expiresAt),
		NotBefore: jwt.NewNumericDate(now),
		IssuedAt:  jwt.NewNumericDate(now),
		ID:        hex.EncodeToString(jti[:]),
	})
	t.Header["kid"] = i.kid
	token, err = t.SignedString(i.priv)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("issue session token: sign: %w", err)
	}
	return token, expiresAt, nil
}

// Verifier checks session tokens with the public key only.
type Verifier struct {
	pub    ed25519.PublicKey
	parser *jwt.Parser
}

// NewVerifier returns a Verifier accepting tokens signed by pub's private
// key with iss=issuer, judged at now().
func NewVerifier(pub ed25519.PublicKey, issuer string, now func() time.Time) (*Verifier, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("new session verifier: public key is %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	if issuer == "" {
		return nil, errors.New("new session verifier: issuer is empty")
	}
	if now == nil {
		now = time.Now
	}
	return &Verifier{
		pub: pub,
		parser: jwt.NewParser(
			// Only EdDSA: refuses "none" and HS256 signed with the public
			// key as an HMAC secret (algorithm confusion).
			jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
			jwt.WithIssuer(issuer),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(leeway),
			jwt.WithTimeFunc(now),
			jwt.WithStrictDecoding(),
		),
	}, nil
}

// Verify checks signature, algorithm, issuer, expiry (required), not-before,
// issued-at, subject and kind, and returns the claims. Every failure
// matches ErrInvalidToken; an expired token also matches ErrExpired.
func (v *Verifier) Verify(token string) (Claims, error) {
	if token == "" || len(token) > maxTokenLen {
		return Claims{}, fmt.Errorf("%w: empty or oversized", ErrInvalidToken)
	}
	var rc jwt.RegisteredClaims
	_, err := v.parser.ParseWithClaims(token, &rc, func(t *jwt.Token) (any, error) {
		return v.pub, nil
	})
	if errors.Is(err, jwt.ErrTokenExpired) {
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalidToken, ErrExpired)
	}
	if err != nil {
		// jwt's errors stay out of the API: callers match our sentinels.
		return Claims{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	uid, err := strconv.ParseInt(rc.Subject, 10, 64)
	if err != nil || uid <= 0 {
		return Claims{}, fmt.Errorf("%w: subject %q is not a user id", ErrInvalidToken, rc.Subject)
	}
	if len(rc.Audience) != 1 || !validKind(rc.Audience[0]) {
		return Claims{}, fmt.Errorf("%w: audience %q is not a session kind", ErrInvalidToken, []string(rc.Audience))
	}
	return Claims{UserID: uid, Kind: rc.Audience[0], ExpiresAt: rc.ExpiresAt.Time, ID: rc.ID}, nil
}

// VerifyKind is Verify that also requires the token's kind.
func (v *Verifier) VerifyKind(token, kind string) (Claims, error) {
	c, err := v.Verify(token)
	if err != nil {
		return Claims{}, err
	}
	if c.Kind != kind {
		return Claims{}, fmt.Errorf("%w: %s token where %s was expected", ErrInvalidToken, c.Kind, kind)
	}
	return c, nil
}

// KeyID is a short fingerprint of a public key, put in the token header
// ("kid") so a token names the key that signed it when keys rotate.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return base64.RawURLEncoding.EncodeToString(sum[:8])
}

// GenerateKeyPair returns a new key pair encoded for the environment:
// SESSION_SIGNING_KEY (base64 of the 32-byte seed) and SESSION_PUBLIC_KEY
// (base64 of the 32-byte public key).
func GenerateKeyPair() (signingKey, publicKey string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("generate session key pair: %w", err)
	}
	return base64.StdEncoding.EncodeToString(priv.Seed()), base64.StdEncoding.EncodeToString(pub), nil
}

// ParsePrivateKey decodes SESSION_SIGNING_KEY: base64 (standard or URL,
// padded or not) of a 32-byte seed, or of a 64-byte seed+public key.
func ParsePrivateKey(s string) (ed25519.PrivateKey, error) {
	b, err := decodeBase64(s)
	if err != nil {
		return nil, fmt.Errorf("parse session signing key: %w", err)
	}
	switch len(b) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case ed25519.PrivateKeySize:
		priv := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize])
		if !priv.Equal(ed25519.PrivateKey(b)) {
			return nil, errors.New("parse session signing key: public half does not match the seed")
		}
		return priv, nil
	}
	return nil, fmt.Errorf("parse session signing key: %d bytes, want %d (seed) or %d", len(b), ed25519.SeedSize, ed25519.PrivateKeySize)
}

// ParsePublicKey decodes SESSION_PUBLIC_KEY: base64 of a 32-byte Ed25519
// public key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := decodeBase64(s)
	if err != nil {
		return nil, fmt.Errorf("parse session public key: %w", err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("parse session public key: %d bytes, want %d", len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// ParseKeys decodes both environment values and checks they are one pair,
// for the accounts service, which signs and verifies.
func ParseKeys(signingKey, publicKey string) (ed25519.PrivateKey, ed25519.PublicKey, error) {
	priv, err := ParsePrivateKey(signingKey)
	if err != nil {
		return nil, nil, err
	}
	pub, err := ParsePublicKey(publicKey)
	if err != nil {
		return nil, nil, err
	}
	if !pub.Equal(priv.Public()) {
		return nil, nil, errors.New("parse session keys: public key does not belong to the signing key")
	}
	return priv, pub, nil
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}
