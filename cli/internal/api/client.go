// Package api is the svc command-line client's HTTP client for the
// /api/v1/cli/* routes: JSON requests, both error envelopes of the contract
// (platform and typed), request ids, key-rotation warnings and bounded
// retries after 429.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

const (
	// DefaultMaxRetries bounds the retries after 429 for one call.
	DefaultMaxRetries = 3
	// DefaultMaxWait is the longest Retry-After the client waits out; a
	// longer one (the synthetic chain's hourly cap) fails at once, because
	// a command that hangs for many minutes helps nobody.
	DefaultMaxWait = 60 * time.Second
	// maxBody bounds what is read of a response: every CLI answer is small.
	maxBody = 8 << 20

	headerRequestID = "X-Request-ID"
)

// Client calls the svc API. The zero value is not usable; fill BaseURL and
// HTTP (see NewHTTPClient).
type Client struct {
	BaseURL   string
	HTTP      *http.Client
	UserAgent string
	// MaxRetries is how many times a 429 is retried; 0 means
	// DefaultMaxRetries, a negative value none.
	MaxRetries int
	// MaxWait is the longest Retry-After waited out; 0 means DefaultMaxWait.
	MaxWait time.Duration
	// Sleep waits d or until ctx ends; nil means a timer. Tests inject one.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now resolves an HTTP-date Retry-After; nil means time.Now.
	Now func() time.Time
	// OnRetry is told about each wait before a retry (to tell the user).
	OnRetry func(wait time.Duration, attempt, max int)
}

// NewHTTPClient returns an http.Client with bounded connect, TLS, header and
// total times, so a dead server never hangs the CLI.
func NewHTTPClient(total time.Duration) *http.Client {
	return &http.Client{
		Timeout: total,
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: total,
			IdleConnTimeout:       30 * time.Second,
			MaxIdleConns:          4,
			ForceAttemptHTTP2:     true,
		},
	}
}

// Request is one API call.
type Request struct {
	Method string
	Path   string // e.g. "/api/v1/cli/status"
	Query  url.Values
	// Token is sent as "Authorization: Bearer <Token>" when not empty.
	Token string
	// Body is encoded as JSON when not nil.
	Body any
}

// Warning is one item of a response's top-level "warnings" array (key
// rotation, Versioning item 3).
type Warning struct {
	Code     string `json:"code"`
	Message  string `json:"message"`
	Hint     string `json:"hint,omitempty"`
	RotateBy string `json:"rotate_by,omitempty"`
	DocsURL  string `json:"docs_url,omitempty"`
}

// Response is a successful (2xx) answer.
type Response struct {
	Status    int
	RequestID string
	// Data is the envelope's "data", or the whole body when there is none.
	Data     json.RawMessage
	Warnings []Warning
	// Raw is the whole body (for answers with members beside data).
	Raw []byte
}

// Error is an answer with status >= 400, from either envelope.
type Error struct {
	Status int
	// Code is error.code, else error.details.code (CLI login refusals).
	Code    string
	Message string
	// Hint is the typed envelope's hint (retired key).
	Hint    string
	DocsURL string
	// RequestID is the X-Request-ID header, else error.details.request_id.
	RequestID string
	// RetryAfter is Retry-After (or retry_after_seconds) on a 429.
	RetryAfter time.Duration
	// Details is error.details of the platform envelope (nil when absent).
	Details  map[string]any
	Warnings []Warning
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Code != "" {
		b.WriteString(e.Code)
		if e.Message != "" {
			b.WriteString(": ")
		}
	}
	b.WriteString(e.Message)
	if b.Len() == 0 {
		b.WriteString(fmt.Sprintf("HTTP %d", e.Status))
	}
	return b.String()
}

// TransportError means no HTTP answer arrived: the server is unreachable,
// timed out or the connection broke.
type TransportError struct {
	URL string
	Err error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("cannot reach %s: %v", e.URL, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// Do sends r, retrying a 429 whose wait is at most MaxWait up to MaxRetries
// times. It returns *Error for any status >= 400, *TransportError when no
// answer came, and the ctx error when ctx ends.
func (c *Client) Do(ctx context.Context, r Request) (*Response, error) {
	retries := c.MaxRetries
	if retries == 0 {
		retries = DefaultMaxRetries
	}
	maxWait := c.MaxWait
	if maxWait == 0 {
		maxWait = DefaultMaxWait
	}
	for attempt := 0; ; attempt++ {
		resp, err := c.once(ctx, r)
		var apiErr *Error
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests ||
			attempt >= retries || apiErr.RetryAfter > maxWait {
			return resp, err
		}
		if c.OnRetry != nil {
			c.OnRetry(apiErr.RetryAfter, attempt+1, retries)
		}
		if err := c.sleep(ctx, apiErr.RetryAfter); err != nil {
			return nil, err
		}
	}
}

func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if c.Sleep != nil {
		return c.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (c *Client) once(ctx context.Context, r Request) (*Response, error) {
	u, err := c.url(r)
	if err != nil {
		return nil, err
	}
	var body io.Reader
	if r.Body != nil {
		b, err := json.Marshal(r.Body)
		if err != nil {
			return nil, fmt.Errorf("encode request body: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if r.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The URL (with the query's state) is the caller's own; the error
		// text of net/http repeats it, so report the base only.
		return nil, &TransportError{URL: c.BaseURL, Err: unwrapURLError(err)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &TransportError{URL: c.BaseURL, Err: fmt.Errorf("read response: %w", err)}
	}
	return c.decode(resp, raw)
}

func (c *Client) url(r Request) (string, error) {
	base, err := url.Parse(c.BaseURL)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return "", fmt.Errorf("invalid base URL %q: want e.g. http://127.0.0.1:8080", c.BaseURL)
	}
	u := *base
	u.Path = strings.TrimSuffix(base.Path, "/") + r.Path
	u.RawQuery = r.Query.Encode()
	return u.String(), nil
}

// unwrapURLError drops *url.Error's "Get \"<url>\":" prefix, which would
// repeat the query string.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

type envelope struct {
	Data     json.RawMessage `json:"data"`
	Error    json.RawMessage `json:"error"`
	Warnings []Warning       `json:"warnings"`
}

type errorBody struct {
	Code              string         `json:"code"`
	Message           string         `json:"message"`
	Hint              string         `json:"hint"`
	DocsURL           string         `json:"docs_url"`
	RetryAfterSeconds *float64       `json:"retry_after_seconds"`
	Details           map[string]any `json:"details"`
}

func (c *Client) decode(resp *http.Response, raw []byte) (*Response, error) {
	var env envelope
	jsonErr := json.Unmarshal(raw, &env)
	reqID := resp.Header.Get(headerRequestID)
	if resp.StatusCode < 400 {
		if resp.StatusCode == http.StatusNoContent {
			return &Response{Status: resp.StatusCode, RequestID: reqID}, nil
		}
		if jsonErr != nil {
			return nil, &Error{Status: resp.StatusCode, Message: "unexpected response (not JSON): " + snippet(raw), RequestID: reqID}
		}
		data := env.Data
		if data == nil {
			data = raw
		}
		return &Response{Status: resp.StatusCode, RequestID: reqID, Data: data, Warnings: env.Warnings, Raw: raw}, nil
	}
	e := &Error{Status: resp.StatusCode, RequestID: reqID, Warnings: env.Warnings}
	var eb errorBody
	switch {
	case jsonErr == nil && len(env.Error) > 0 && json.Unmarshal(env.Error, &eb) == nil:
		e.Code, e.Message, e.Hint, e.DocsURL, e.Details = eb.Code, eb.Message, eb.Hint, eb.DocsURL, eb.Details
		if e.Code == "" {
			e.Code, _ = eb.Details["code"].(string)
		}
		if e.RequestID == "" {
			e.RequestID, _ = eb.Details["request_id"].(string)
		}
		if eb.RetryAfterSeconds != nil && *eb.RetryAfterSeconds >= 0 {
			e.RetryAfter = time.Duration(*eb.RetryAfterSeconds * float64(time.Second))
		}
	case jsonErr == nil && len(env.Error) > 0:
		// "error" is an object by contract; a bare string is still shown.
		var s string
		if json.Unmarshal(env.Error, &s) == nil {
			e.Message = s
		}
	}
	if e.Message == "" && e.Code == "" {
		e.Message = http.StatusText(resp.StatusCode)
		if s := snippet(raw); s != "" && jsonErr != nil {
			e.Message += ": " + s
		}
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		if d, ok := c.retryAfter(resp.Header.Get("Retry-After")); ok {
			e.RetryAfter = d
		} else if e.RetryAfter == 0 {
			e.RetryAfter = time.Second
		}
	}
	return nil, e
}

// retryAfter parses Retry-After as delay-seconds or an HTTP-date.
func (c *Client) retryAfter(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	d := t.Sub(now())
	if d < 0 {
		d = 0
	}
	return d, true
}

// snippet is a short, single-line excerpt of a non-JSON body.
func snippet(raw []byte) string {
	s := strings.Join(strings.Fields(string(raw)), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
