package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// client talks HTTP to the gateway as one end user would: from its own
// address, which reaches the services through a trusted loopback hop as
// X-Forwarded-For (as behind the production load balancer and ingress).
type client struct {
	t    *testing.T
	base string
	ip   string
	auth string
	hc   *http.Client
	// undocumented: the request is outside the document on purpose (an
	// unknown path), so its answer is not validated against it.
	undocumented bool
}

func newClient(t *testing.T, s *stack, ip string) *client {
	return &client{t: t, base: s.Gateway, ip: ip, hc: &http.Client{Timeout: 70 * time.Second}}
}

// withKey is the same client sending Authorization: Bearer key.
func (c *client) withKey(key string) *client {
	cc := *c
	cc.auth = "Bearer " + key
	return &cc
}

// withAuth is the same client sending this Authorization header verbatim
// ("" sends none).
func (c *client) withAuth(header string) *client {
	cc := *c
	cc.auth = header
	return &cc
}

// outsideTheDocument is the same client for a request the API description
// leaves out on purpose.
func (c *client) outsideTheDocument() *client {
	cc := *c
	cc.undocumented = true
	return &cc
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

var idSeq atomic.Int64

func uniqueID(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, time.Now().UnixNano(), idSeq.Add(1))
}

// do sends one request; body is JSON-encoded unless it is a string (sent
// as is). headers are name, value pairs. The answer is checked against the
// OpenAPI document.
func (c *client) do(method, path string, body any, headers ...string) reply {
	c.t.Helper()
	var rd io.Reader
	ctype := ""
	switch b := body.(type) {
	case nil:
	case string:
		rd, ctype = strings.NewReader(b), "application/json"
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd, ctype = bytes.NewReader(raw), "application/json"
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.ip != "" {
		req.Header.Set("X-Forwarded-For", c.ip)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if !c.undocumented {
		validateAgainstOpenAPI(c.t, req, resp)
	}
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func (c *client) click(body map[string]any, headers ...string) reply {
	c.t.Helper()
	return c.do("POST", "/api/v1/track/click", body, headers...)
}

func (c *client) lead(body map[string]any, headers ...string) reply {
	c.t.Helper()
	return c.do("POST", "/api/v1/track/lead", body, headers...)
}

func (c *client) sale(body map[string]any, headers ...string) reply {
	c.t.Helper()
	return c.do("POST", "/api/v1/track/sale", body, headers...)
}

func (c *client) refund(body map[string]any, headers ...string) reply {
	c.t.Helper()
	return c.do("POST", "/api/v1/track/refund", body, headers...)
}

// want fails the test unless the status is status.
func (r reply) want(t *testing.T, status int) reply {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	return r
}

// get walks the decoded body: get("error", "message").
func (r reply) get(keys ...string) any {
	var v any = r.body
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func (r reply) str(keys ...string) string {
	s, _ := r.get(keys...).(string)
	return s
}

// wantPlatformError checks the platform envelope of the spec: status, name
// and message, with data null.
func (r reply) wantPlatformError(t *testing.T, status int, name, message string) {
	t.Helper()
	r.want(t, status)
	if d, ok := r.body["data"]; !ok || d != nil {
		t.Fatalf("platform envelope needs data: null: %s", r.raw)
	}
	if got := r.get("error", "status"); got != float64(status) {
		t.Fatalf("error.status %v: %s", got, r.raw)
	}
	if r.str("error", "name") != name || r.str("error", "message") != message {
		t.Fatalf("error %q %q, want %q %q: %s", r.str("error", "name"), r.str("error", "message"), name, message, r.raw)
	}
}

// wantRateLimited checks the typed 429 envelope and its headers.
func (r reply) wantRateLimited(t *testing.T, limit string) {
	t.Helper()
	r.want(t, 429)
	if _, ok := r.body["data"]; ok {
		t.Fatalf("typed envelope has no data key: %s", r.raw)
	}
	if r.str("error", "code") != "rate_limited" || r.get("error", "status") != float64(429) {
		t.Fatalf("%s", r.raw)
	}
	if ra, ok := r.get("error", "retry_after_seconds").(float64); !ok || ra < 1 || ra > 60 {
		t.Fatalf("retry_after_seconds: %s", r.raw)
	}
	if r.header.Get("Retry-After") == "" || r.header.Get("X-RateLimit-Limit") != limit || r.header.Get("X-RateLimit-Remaining") != "0" || r.header.Get("X-RateLimit-Reset") == "" {
		t.Fatalf("rate-limit headers %v", r.header)
	}
}
