// Package accountsclient asks accounts whose a CLI login token (svc_cli_…)
// is, through accounts' internal route POST /internal/v1/cli-tokens/verify:
// accounts alone keeps the tokens' hashes. Answers are cached for a short
// while keyed by the token's SHA-256 (never the token), so a listener's
// polls do not call accounts each time; a sign-out takes effect within
// the cache's TTL.
package accountsclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Path is accounts' route.
const Path = "/internal/v1/cli-tokens/verify"

// ErrUnknown: accounts does not know the token as a live login token of
// an unblocked user.
var ErrUnknown = errors.New("login token not valid")

// TTL bounds how long an answer (either way) is reused.
const TTL = 60 * time.Second

// maxEntries bounds the cache; past it, expired entries are swept and, if
// still full, the cache is emptied (a burst of invented tokens cannot grow
// it without bound).
const maxEntries = 10000

type entry struct {
	userID int64
	at     time.Time
}

// Client verifies login tokens with accounts.
type Client struct {
	base  string
	token string
	http  *http.Client
	now   func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]entry
}

// New builds a client of accounts at base with the internal token. hc
// carries the timeout and the tracing transport.
func New(base, internalToken string, hc *http.Client, now func() time.Time) (*Client, error) {
	if base == "" || internalToken == "" {
		return nil, errors.New("accountsclient: base URL and internal token are required")
	}
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	if now == nil {
		now = time.Now
	}
	return &Client{base: strings.TrimRight(base, "/"), token: internalToken, http: hc, now: now, cache: map[[32]byte]entry{}}, nil
}

// Verify returns the user id of a live login token, ErrUnknown for one
// accounts refuses, or an error when accounts could not be asked.
func (c *Client) Verify(ctx context.Context, token string) (int64, error) {
	key := sha256.Sum256([]byte(token))
	now := c.now()
	c.mu.Lock()
	e, ok := c.cache[key]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < TTL {
		if e.userID == 0 {
			return 0, ErrUnknown
		}
		return e.userID, nil
	}
	id, err := c.ask(ctx, token)
	if err != nil && !errors.Is(err, ErrUnknown) {
		return 0, err
	}
	c.store(key, entry{userID: id, at: now})
	if id == 0 {
		return 0, ErrUnknown
	}
	return id, nil
}

func (c *Client) store(key [32]byte, e entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cache) >= maxEntries {
		for k, v := range c.cache {
			if e.at.Sub(v.at) >= TTL {
				delete(c.cache, k)
			}
		}
		if len(c.cache) >= maxEntries {
			clear(c.cache)
		}
	}
	c.cache[key] = e
}

func (c *Client) ask(ctx context.Context, token string) (int64, error) {
	body, err := json.Marshal(map[string]string{"token": token})
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+Path, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("build accounts request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		// The error names the URL, never the token (it is in the body).
		return 0, fmt.Errorf("ask accounts: %w", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return 0, ErrUnknown
	default:
		return 0, fmt.Errorf("ask accounts: status %d", resp.StatusCode)
	}
	var out struct {
		Data struct {
			UserID int64 `json:"user_id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 64<<10)).Decode(&out); err != nil {
		return 0, fmt.Errorf("decode accounts answer: %w", err)
	}
	if out.Data.UserID <= 0 {
		return 0, errors.New("accounts answered no user id")
	}
	return out.Data.UserID, nil
}
