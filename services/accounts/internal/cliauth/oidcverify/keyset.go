package oidcverify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// RefetchGap is the least time between two fetches of a provider's JWKS.
const RefetchGap = 10 * time.Second

// remoteKeySet verifies id_token signatures against a provider's JWKS,
// fetched over HTTP and cached. It replaces go-oidc's RemoteKeySet, which
// fetches the JWKS again for every token whose signature its cached keys do
// not verify: anyone can write a token with the provider's public issuer,
// audience and key id and a signature of their own, so each such callback
// cost a fetch from the provider, and under load callbacks queued behind
// fetches up to the client's 10-second timeout (issue 23: a 9.9 s CLI
// callback). Here a token naming a key the cache holds is checked against
// it alone (a bad signature is refused at once); only a key id the cache
// lacks (the provider rotated) fetches again, and no sooner than gap after
// the last attempt, successful or not: a refused or unreachable fetch is
// answered from that attempt until then instead of waiting on a new one.
type remoteKeySet struct {
	url    string
	client *http.Client
	algs   []jose.SignatureAlgorithm
	now    func() time.Time
	gap    time.Duration

	mu      sync.Mutex
	keys    []jose.JSONWebKey
	tried   time.Time // last fetch started
	lastErr error     // its failure, if it failed
	flight  chan struct{}
}

func newRemoteKeySet(url string, client *http.Client, algs []string, now func() time.Time) *remoteKeySet {
	k := &remoteKeySet{url: url, client: client, now: now, gap: RefetchGap}
	for _, a := range algs {
		k.algs = append(k.algs, jose.SignatureAlgorithm(a))
	}
	return k
}

// VerifySignature implements oidc.KeySet. Fetch failures start with
// "fetching keys", as go-oidc's do (flaggingKeySet reads that).
func (k *remoteKeySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, k.algs)
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("id token must carry exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	k.mu.Lock()
	keys := k.keys
	k.mu.Unlock()
	if payload, known := verifyWith(jws, keys, kid); payload != nil {
		return payload, nil
	} else if known {
		return nil, errors.New("failed to verify id token signature")
	}
	keys, err = k.refresh(ctx)
	if err != nil {
		return nil, fmt.Errorf("fetching keys %w", err)
	}
	if payload, _ := verifyWith(jws, keys, kid); payload != nil {
		return payload, nil
	}
	return nil, errors.New("failed to verify id token signature")
}

// verifyWith tries the keys the token's kid names (every key without a
// kid) and reports whether any key matched the kid at all.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) ([]byte, bool) {
	known := false
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		known = known || kid != ""
		if payload, err := jws.Verify(&keys[i]); err == nil {
			return payload, true
		}
	}
	return nil, known
}

// refresh fetches the JWKS unless a fetch started less than gap ago (its
// keys, or its error, stand) and returns the keys; callers arriving during
// a fetch wait for it (or for their own context).
func (k *remoteKeySet) refresh(ctx context.Context) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	if k.flight == nil && !k.tried.IsZero() && k.now().Sub(k.tried) < k.gap {
		keys, err := k.keys, k.lastErr
		k.mu.Unlock()
		return keys, err
	}
	if k.flight == nil {
		k.flight = make(chan struct{})
		k.tried = k.now()
		go k.fetch(k.flight)
	}
	flight := k.flight
	k.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-flight:
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys, k.lastErr
}

// fetch runs on its own, bounded by the client's timeout: a caller that
// gives up does not cancel it for the others.
func (k *remoteKeySet) fetch(done chan struct{}) {
	keys, err := k.get()
	k.mu.Lock()
	if err == nil {
		k.keys = keys
	}
	k.lastErr = err
	k.flight = nil
	k.mu.Unlock()
	close(done)
}

func (k *remoteKeySet) get() ([]jose.JSONWebKey, error) {
	resp, err := k.client.Get(k.url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", k.url, resp.Status)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("%s: %w", k.url, err)
	}
	var keys []jose.JSONWebKey
	for _, key := range set.Keys {
		if key.IsPublic() && (key.Use == "" || key.Use == "sig") {
			keys = append(keys, key)
		}
	}
	return keys, nil
}
