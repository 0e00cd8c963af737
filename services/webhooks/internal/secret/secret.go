// Package secret makes endpoints' signing secrets and keeps them sealed at
// rest. A signature (HMAC-SHA256) needs the secret itself, so unlike API
// keys it cannot be stored as a hash: it is sealed with AES-256-GCM under
// the service's key (WEBHOOKS_SECRET_KEY), with the endpoint's id as
// additional data so a sealed secret copied to another endpoint's row does
// not open there.
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Prefix starts every secret, as the Standard Webhooks libraries expect.
const Prefix = "whsec_"

// Size is the secret's length in random bytes.
const Size = 32

// KeySize is the sealing key's length in bytes (AES-256).
const KeySize = 32

// New returns a fresh secret: Prefix and the standard base64 of Size random
// bytes.
func New() (string, error) {
	b := make([]byte, Size)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("new webhook secret: %w", err)
	}
	return Prefix + base64.StdEncoding.EncodeToString(b), nil
}

// Raw returns the bytes a secret signs with (what follows Prefix, decoded).
func Raw(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, Prefix))
	if err != nil || len(b) == 0 {
		return nil, errors.New("webhook secret: not whsec_ and base64")
	}
	return b, nil
}

// ParseKey reads the sealing key: the standard base64 of KeySize bytes.
func ParseKey(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("not standard base64: %w", err)
	}
	if len(b) != KeySize {
		return nil, fmt.Errorf("%d bytes, want %d (openssl rand -base64 32)", len(b), KeySize)
	}
	return b, nil
}

// Box seals and opens secrets under one key.
type Box struct {
	aead cipher.AEAD
}

// NewBox returns a Box over key (KeySize bytes).
func NewBox(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("webhook secret key: %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// Seal returns secret sealed for endpoint endpointID: a random nonce then
// the ciphertext.
func (b *Box) Seal(secret string, endpointID int64) ([]byte, error) {
	return b.seal(secret, additional(endpointPrefix, endpointID))
}

// Open returns the secret sealed for endpoint endpointID.
func (b *Box) Open(sealed []byte, endpointID int64) (string, error) {
	plain, err := b.open(sealed, additional(endpointPrefix, endpointID))
	if err != nil {
		return "", fmt.Errorf("open webhook secret of endpoint %d: %w", endpointID, err)
	}
	return plain, nil
}

// SealListener returns secret sealed for `svc listen` listener
// listenerID. Listeners number from 1 as endpoints do: their additional
// data has its own prefix, so neither kind of sealed secret opens as the
// other.
func (b *Box) SealListener(secret string, listenerID int64) ([]byte, error) {
	return b.seal(secret, additional(listenerPrefix, listenerID))
}

// OpenListener returns the secret sealed for listener listenerID.
func (b *Box) OpenListener(sealed []byte, listenerID int64) (string, error) {
	plain, err := b.open(sealed, additional(listenerPrefix, listenerID))
	if err != nil {
		return "", fmt.Errorf("open webhook secret of listener %d: %w", listenerID, err)
	}
	return plain, nil
}

func (b *Box) seal(secret string, ad []byte) ([]byte, error) {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal webhook secret: %w", err)
	}
	return b.aead.Seal(nonce, nonce, []byte(secret), ad), nil
}

func (b *Box) open(sealed, ad []byte) (string, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n {
		return "", errors.New("open webhook secret: too short")
	}
	plain, err := b.aead.Open(nil, sealed[:n], sealed[n:], ad)
	if err != nil {
		return "", err
	}
	return string(plain), nil
}

const (
	endpointPrefix = "svc-webhook-endpoint:"
	listenerPrefix = "svc-webhook-listener:"
)

func additional(prefix string, id int64) []byte {
	return []byte(prefix + strconv.FormatInt(id, 10))
}
