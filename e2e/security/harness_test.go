package security_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/api/openapivalidate"
	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// env is one test's stack (only the services it names) behind the local
// gateway, which routes like the production Ingress plus the in-cluster
// admin rules. Every request of a test goes through the gateway.
type env struct {
	t       *testing.T
	Stack   *stack.Stack
	Gateway string
	seq     atomic.Int64
}

// start runs the named services (all when none) with vars on top of the
// test defaults (stacktest.Defaults).
func start(t *testing.T, vars map[string]string, only ...string) *env {
	t.Helper()
	return startOn(t, nil, vars, only...)
}

// startOn is start with every service on clock (nil: the real one).
func startOn(t *testing.T, clock *platformtest.Clock, vars map[string]string, only ...string) *env {
	t.Helper()
	st := stacktest.StartOn(t, clock, vars, only...)
	gw := httptest.NewServer(gateway.New(st.Handlers()))
	t.Cleanup(gw.Close)
	return &env{t: t, Stack: st, Gateway: gw.URL}
}

// admin calls the admin API (through the gateway's in-cluster rules) and
// returns data; a status of 300 or more fails the test.
func (e *env) admin(method, path string, body any) map[string]any {
	e.t.Helper()
	r := e.client("").withAuth("Bearer "+stacktest.AdminToken).do(method, path, body)
	if r.Status >= 300 {
		e.t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
	}
	if n, err := strconv.ParseInt(r.Header.Get("X-Catalog-Seq"), 10, 64); err == nil {
		for {
			cur := e.seq.Load()
			if n <= cur || e.seq.CompareAndSwap(cur, n) {
				break
			}
		}
	}
	data, _ := r.Body["data"].(map[string]any)
	return data
}

// id is admin's data.id.
func (e *env) id(method, path string, body any) int64 {
	e.t.Helper()
	v, ok := e.admin(method, path, body)["id"].(float64)
	if !ok {
		e.t.Fatalf("%s %s: no data.id", method, path)
	}
	return int64(v)
}

// sync waits on the catalog barrier until every replica has applied
// everything the admin API wrote so far.
func (e *env) sync() {
	e.t.Helper()
	e.admin("GET", fmt.Sprintf("/admin/v1/catalog/sync?seq=%d&timeout=25s", e.seq.Load()), nil)
}

// client is one end user talking to the gateway from its own address (sent
// as X-Forwarded-For through the trusted loopback hop, as behind the
// production load balancer).
type client struct {
	t    *testing.T
	base string
	ip   string
	auth string
	hc   *http.Client
	// undocumented: the request is outside api/openapi.yaml on purpose, so
	// its answer is not validated against it.
	undocumented bool
}

func (e *env) client(ip string) *client {
	return &client{t: e.t, base: e.Gateway, ip: ip, hc: &http.Client{Timeout: 40 * time.Second}}
}

// withKey sends Authorization: Bearer key.
func (c *client) withKey(key string) *client { return c.withAuth("Bearer " + key) }

// withAuth sends this Authorization header verbatim ("" sends none).
func (c *client) withAuth(header string) *client {
	cc := *c
	cc.auth = header
	return &cc
}

// outsideTheDocument skips the OpenAPI check for a request left out of the
// document on purpose.
func (c *client) outsideTheDocument() *client {
	cc := *c
	cc.undocumented = true
	return &cc
}

// reply is one answer: its status, headers, decoded JSON body and raw text.
type reply struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    string
}

// do sends one request: body is JSON-encoded unless it is a string or
// []byte (sent as is, as JSON); headers are name, value pairs. A public
// route's answer is checked against api/openapi.yaml.
func (c *client) do(method, path string, body any, headers ...string) reply {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
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
	if !c.undocumented && !strings.HasPrefix(req.URL.Path, "/admin/v1/") {
		validate(c.t, req, resp)
	}
	raw, _ := io.ReadAll(resp.Body)
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

// want fails the test unless the answer has status.
func (r reply) want(t *testing.T, status int) reply {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Raw)
	}
	return r
}

// get walks the decoded body by keys.
func (r reply) get(keys ...string) any {
	var v any = r.Body
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func (r reply) str(keys ...string) string { s, _ := r.get(keys...).(string); return s }

var (
	validatorOnce sync.Once
	validator     *openapivalidate.Validator
	validatorErr  error
)

// validate checks a live public answer against api/openapi.yaml.
func validate(t *testing.T, req *http.Request, resp *http.Response) {
	t.Helper()
	validatorOnce.Do(func() { validator, validatorErr = openapivalidate.NewValidator() })
	if validatorErr != nil {
		t.Fatalf("api/openapi.yaml: %v", validatorErr)
	}
	if err := validator.ValidateResponse(req, resp); err != nil {
		t.Errorf("%v", err)
	}
}

var idSeq atomic.Int64

// uniqueID is an id no other request of this test binary uses.
func uniqueID(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, time.Now().UnixNano(), idSeq.Add(1))
}
