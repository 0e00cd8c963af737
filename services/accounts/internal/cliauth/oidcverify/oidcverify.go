// Package oidcverify verifies OpenID Connect id_tokens for the command-line
// sign-in with github.com/coreos/go-oidc/v3: signature against the
// provider's JWKS (fetched from a URL and cached, or read once from a file),
// issuer, audience, expiry and the signing algorithm. It adapts the result
// to cliauth.Identity; the nonce is compared by cliauth against the session.
package oidcverify

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/svc-dev/svc/libs/errkind"

	"github.com/svc-dev/svc/services/accounts/internal/cliauth"
)

// DefaultAlgorithms are accepted unless configured otherwise: RS256 (every
// provider supports it) and ES256.
var DefaultAlgorithms = []string{oidc.RS256, oidc.ES256}

// Config names the provider.
type Config struct {
	Issuer   string
	Audience string
	// Exactly one of JWKSURL and JWKSFile.
	JWKSURL  string
	JWKSFile string
	// Algorithms accepted in the token header; DefaultAlgorithms when empty.
	Algorithms []string
	Now        func() time.Time
	// HTTPClient fetches the JWKS; a 10-second-timeout client when nil.
	HTTPClient *http.Client
}

// Verifier implements cliauth.IDTokenVerifier.
type Verifier struct {
	v *oidc.IDTokenVerifier
}

var _ cliauth.IDTokenVerifier = (*Verifier)(nil)

// New builds the verifier. A JWKS file is read and checked now, so a bad
// file stops the service at start; a JWKS URL is fetched on first use and
// again when a token names a key it has not seen (provider rotation), at
// most once per RefetchGap (remoteKeySet).
func New(ctx context.Context, cfg Config) (*Verifier, error) {
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("oidc: issuer and audience are required")
	}
	if (cfg.JWKSURL == "") == (cfg.JWKSFile == "") {
		return nil, errors.New("oidc: set exactly one of the JWKS URL and the JWKS file")
	}
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = DefaultAlgorithms
	}
	for _, a := range cfg.Algorithms {
		if a == "none" || strings.HasPrefix(a, "HS") {
			return nil, fmt.Errorf("oidc: algorithm %q cannot verify an id_token with public keys", a)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var keys oidc.KeySet
	if cfg.JWKSFile != "" {
		pubs, err := readJWKSFile(cfg.JWKSFile)
		if err != nil {
			return nil, err
		}
		keys = &oidc.StaticKeySet{PublicKeys: pubs}
	} else {
		client := cfg.HTTPClient
		if client == nil {
			client = &http.Client{Timeout: 10 * time.Second}
		}
		keys = &flaggingKeySet{inner: newRemoteKeySet(cfg.JWKSURL, client, cfg.Algorithms, cfg.Now)}
	}
	return &Verifier{v: oidc.NewVerifier(cfg.Issuer, keys, &oidc.Config{
		ClientID:             cfg.Audience,
		SupportedSigningAlgs: cfg.Algorithms,
		Now:                  cfg.Now,
	})}, nil
}

// readJWKSFile parses a JWKS document with go-jose and keeps its public
// signing keys.
func readJWKSFile(path string) ([]crypto.PublicKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("oidc: read JWKS file: %w", err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, fmt.Errorf("oidc: parse JWKS file %s: %w", path, err)
	}
	var pubs []crypto.PublicKey
	for _, k := range set.Keys {
		if !k.IsPublic() {
			return nil, fmt.Errorf("oidc: JWKS file %s holds a private key (kid %q); publish only public keys", path, k.KeyID)
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pubs = append(pubs, k.Key)
	}
	if len(pubs) == 0 {
		return nil, fmt.Errorf("oidc: JWKS file %s has no signing keys", path)
	}
	return pubs, nil
}

// emailVerified accepts the boolean the standard defines and the string
// "true"/"false" some providers send.
type emailVerified bool

func (b *emailVerified) UnmarshalJSON(data []byte) error {
	switch string(data) {
	case "true", `"true"`:
		*b = true
	case "false", `"false"`, "null":
		*b = false
	default:
		return fmt.Errorf("email_verified: %s is not a boolean", data)
	}
	return nil
}

// ErrUnreachable is a failure to fetch the provider's keys: not the token's
// fault, so the callback answers 500 rather than refusing the token.
var ErrUnreachable = fmt.Errorf("oidc: provider keys unreachable: %w", errkind.Unavailable)

// Verify checks the token and returns who it names. A refused token gives
// an error matching errkind.Unauthenticated; unreachable keys one
// matching errkind.Unavailable.
func (v *Verifier) Verify(ctx context.Context, raw string) (cliauth.Identity, error) {
	var fetch atomic.Bool
	tok, err := v.v.Verify(context.WithValue(ctx, fetchFailedKey{}, &fetch), raw)
	if err != nil {
		if fetch.Load() {
			return cliauth.Identity{}, fmt.Errorf("%w: %v", ErrUnreachable, err)
		}
		return cliauth.Identity{}, fmt.Errorf("%w: %v", errkind.Unauthenticated, err)
	}
	var c struct {
		Email         string        `json:"email"`
		EmailVerified emailVerified `json:"email_verified"`
		Name          string        `json:"name"`
	}
	if err := tok.Claims(&c); err != nil {
		return cliauth.Identity{}, fmt.Errorf("%w: claims: %v", errkind.Unauthenticated, err)
	}
	return cliauth.Identity{
		Issuer: tok.Issuer, Subject: tok.Subject, Email: c.Email, EmailVerified: bool(c.EmailVerified), Name: c.Name, Nonce: tok.Nonce,
	}, nil
}

type fetchFailedKey struct{}

// flaggingKeySet tells Verify when the remote key set could not be fetched.
// go-oidc formats that error with %v, so it cannot be matched afterwards;
// its RemoteKeySet prefixes every fetch failure with "fetching keys".
type flaggingKeySet struct {
	inner oidc.KeySet
}

func (k *flaggingKeySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	payload, err := k.inner.VerifySignature(ctx, jwt)
	if err != nil && strings.HasPrefix(err.Error(), "fetching keys") {
		if f, ok := ctx.Value(fetchFailedKey{}).(*atomic.Bool); ok {
			f.Store(true)
		}
	}
	return payload, err
}
