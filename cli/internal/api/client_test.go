package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// server answers each request with the next of its replies and records
// what it received.
type server struct {
	mu      sync.Mutex
	replies []reply
	got     []*http.Request
	bodies  []string
}

type reply struct {
	status  int
	body    string
	headers map[string]string
}

func newServer(t *testing.T, replies ...reply) (*server, *httptest.Server) {
	t.Helper()
	s := &server{replies: replies}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		i := len(s.got)
		s.got = append(s.got, r)
		s.bodies = append(s.bodies, string(b))
		s.mu.Unlock()
		if i >= len(s.replies) {
			i = len(s.replies) - 1
		}
		rp := s.replies[i]
		for k, v := range rp.headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rp.status)
		_, _ = io.WriteString(w, rp.body)
	}))
	t.Cleanup(ts.Close)
	return s, ts
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// fakeSleep records waits instead of waiting.
type fakeSleep struct{ waits []time.Duration }

func (f *fakeSleep) sleep(ctx context.Context, d time.Duration) error {
	f.waits = append(f.waits, d)
	return ctx.Err()
}

func newClient(base string, fs *fakeSleep) *Client {
	return &Client{BaseURL: base, HTTP: NewHTTPClient(5 * time.Second), UserAgent: "svc-cli/test", Sleep: fs.sleep}
}

func TestDoSendsRequest(t *testing.T) {
	s, ts := newServer(t, reply{status: 200, body: `{"data":{"ok":true}}`})
	c := newClient(ts.URL+"/prefix/", &fakeSleep{})
	resp, err := c.Do(context.Background(), Request{
		Method: "POST", Path: "/api/v1/cli/test-event", Token: "svc_live_x",
		Query: map[string][]string{"state": {"a b&c"}}, Body: map[string]string{"event_type": "click"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Data) != `{"ok":true}` {
		t.Fatalf("data %s", resp.Data)
	}
	r := s.got[0]
	checks := map[string][2]string{
		"path":          {r.URL.Path, "/prefix/api/v1/cli/test-event"},
		"query":         {r.URL.Query().Get("state"), "a b&c"},
		"authorization": {r.Header.Get("Authorization"), "Bearer svc_live_x"},
		"content-type":  {r.Header.Get("Content-Type"), "application/json"},
		"accept":        {r.Header.Get("Accept"), "application/json"},
		"user-agent":    {r.Header.Get("User-Agent"), "svc-cli/test"},
		"body":          {s.bodies[0], `{"event_type":"click"}`},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", name, c[0], c[1])
		}
	}
}

func TestDoNoTokenNoBodyHeaders(t *testing.T) {
	s, ts := newServer(t, reply{status: 200, body: `{"data":null}`})
	if _, err := newClient(ts.URL, &fakeSleep{}).Do(context.Background(), Request{Method: "GET", Path: "/x"}); err != nil {
		t.Fatal(err)
	}
	if h := s.got[0].Header; h.Get("Authorization") != "" || h.Get("Content-Type") != "" {
		t.Fatalf("unexpected headers %v", h)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		rep  reply
		want Error
	}{
		{
			name: "platform envelope without code",
			rep: reply{status: 401, headers: map[string]string{"X-Request-ID": "rid1"},
				body: `{"data":null,"error":{"status":401,"name":"UnauthorizedError","message":"Invalid API token","details":{}}}`},
			want: Error{Status: 401, Message: "Invalid API token", RequestID: "rid1"},
		},
		{
			name: "platform envelope with code",
			rep:  reply{status: 400, body: `{"data":null,"error":{"status":400,"name":"BadRequestError","message":"transaction_id is required","details":{},"code":"invalid_request"}}`},
			want: Error{Status: 400, Code: "invalid_request", Message: "transaction_id is required"},
		},
		{
			name: "login refusal code in details",
			rep:  reply{status: 403, body: `{"data":null,"error":{"status":403,"name":"ForbiddenError","message":"Your account has been suspended.","details":{"code":"ACCOUNT_BLOCKED"}}}`},
			want: Error{Status: 403, Code: "ACCOUNT_BLOCKED", Message: "Your account has been suspended."},
		},
		{
			name: "cli 500 request id from details when no header",
			rep:  reply{status: 500, body: `{"data":null,"error":{"status":500,"name":"InternalServerError","message":"Failed to get status (request_id: abc)","details":{"request_id":"abc"}}}`},
			want: Error{Status: 500, Message: "Failed to get status (request_id: abc)", RequestID: "abc"},
		},
		{
			name: "header request id wins over details",
			rep: reply{status: 500, headers: map[string]string{"X-Request-ID": "hdr"},
				body: `{"data":null,"error":{"status":500,"name":"InternalServerError","message":"m","details":{"request_id":"body"}}}`},
			want: Error{Status: 500, Message: "m", RequestID: "hdr"},
		},
		{
			name: "typed retired key",
			rep:  reply{status: 401, body: `{"error":{"code":"api_key_rotation_required","message":"This API key is past its rotation deadline and no longer works.","hint":"Create a new API key","docs_url":"https://docs.example/rot"}}`},
			want: Error{Status: 401, Code: "api_key_rotation_required", Message: "This API key is past its rotation deadline and no longer works.", Hint: "Create a new API key", DocsURL: "https://docs.example/rot"},
		},
		{
			name: "gone names the replacement",
			rep:  reply{status: 410, body: `{"data":null,"error":{"status":410,"name":"GoneError","message":"Endpoint retired; connect the payment processor from the dashboard","details":{}}}`},
			want: Error{Status: 410, Message: "Endpoint retired; connect the payment processor from the dashboard"},
		},
		{
			name: "not json",
			rep:  reply{status: 502, body: "<html>\n bad gateway </html>"},
			want: Error{Status: 502, Message: "Bad Gateway: <html> bad gateway </html>"},
		},
		{
			name: "error as a string",
			rep:  reply{status: 400, body: `{"error":"nope"}`},
			want: Error{Status: 400, Message: "nope"},
		},
		{
			name: "empty body",
			rep:  reply{status: 404},
			want: Error{Status: 404, Message: "Not Found"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ts := newServer(t, tc.rep)
			_, err := newClient(ts.URL, &fakeSleep{}).Do(context.Background(), Request{Method: "GET", Path: "/x"})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err %v, want *Error", err)
			}
			if e.Status != tc.want.Status || e.Code != tc.want.Code || e.Message != tc.want.Message || e.Hint != tc.want.Hint ||
				e.DocsURL != tc.want.DocsURL || e.RequestID != tc.want.RequestID {
				t.Fatalf("got %+v\nwant %+v", *e, tc.want)
			}
		})
	}
}

func TestErrorTextCodeFirst(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{Status: 429, Code: "rate_limited", Message: "Too many requests. Retry after 3 seconds."}, "rate_limited: Too many requests. Retry after 3 seconds."},
		{Error{Status: 401, Message: "Invalid API token"}, "Invalid API token"},
		{Error{Status: 418}, "HTTP 418"},
	}
	for _, tc := range tests {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}

func TestWarnings(t *testing.T) {
	w := `"warnings":[{"code":"api_key_rotation_required","message":"rotate","hint":"h","rotate_by":"2030-01-01T00:00:00Z","docs_url":"https://d"}]`
	want := Warning{Code: "api_key_rotation_required", Message: "rotate", Hint: "h", RotateBy: "2030-01-01T00:00:00Z", DocsURL: "https://d"}
	t.Run("on success", func(t *testing.T) {
		_, ts := newServer(t, reply{status: 200, body: `{"data":{"a":1},` + w + `}`})
		resp, err := newClient(ts.URL, &fakeSleep{}).Do(context.Background(), Request{Method: "GET", Path: "/x"})
		if err != nil || len(resp.Warnings) != 1 || resp.Warnings[0] != want || string(resp.Data) != `{"a":1}` {
			t.Fatalf("%+v %v", resp, err)
		}
	})
	t.Run("on error", func(t *testing.T) {
		_, ts := newServer(t, reply{status: 400, body: `{"data":null,"error":{"status":400,"message":"bad","details":{}},` + w + `}`})
		_, err := newClient(ts.URL, &fakeSleep{}).Do(context.Background(), Request{Method: "GET", Path: "/x"})
		var e *Error
		if !errors.As(err, &e) || len(e.Warnings) != 1 || e.Warnings[0] != want {
			t.Fatalf("%v", err)
		}
	})
}

func TestSuccessWithoutDataKeyReturnsBody(t *testing.T) {
	_, ts := newServer(t, reply{status: 200, body: `{"ok":true}`})
	resp, err := newClient(ts.URL, &fakeSleep{}).Do(context.Background(), Request{Method: "GET", Path: "/x"})
	if err != nil || string(resp.Data) != `{"ok":true}` {
		t.Fatalf("%+v %v", resp, err)
	}
}

func TestSuccessNotJSONIsError(t *testing.T) {
	_, ts := newServer(t, reply{status: 200, body: `hello`})
	_, err := newClient(ts.URL, &fakeSleep{}).Do(context.Background(), Request{Method: "GET", Path: "/x"})
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(e.Message, "not JSON") {
		t.Fatalf("%v", err)
	}
}

const limited = `{"error":{"status":429,"code":"rate_limited","message":"Too many requests. Retry after 2 seconds.","retry_after_seconds":2}}`

func TestRetryAfter429(t *testing.T) {
	ok := reply{status: 200, body: `{"data":{}}`}
	tests := []struct {
		name      string
		replies   []reply
		wantCalls int
		wantWaits []time.Duration
		wantErr   int // status of the final error, 0 for success
	}{
		{
			name:      "waits Retry-After then succeeds",
			replies:   []reply{{status: 429, body: limited, headers: map[string]string{"Retry-After": "2"}}, ok},
			wantCalls: 2, wantWaits: []time.Duration{2 * time.Second},
		},
		{
			name:      "gives up after three retries",
			replies:   []reply{{status: 429, body: limited, headers: map[string]string{"Retry-After": "1"}}},
			wantCalls: 4, wantWaits: []time.Duration{time.Second, time.Second, time.Second}, wantErr: 429,
		},
		{
			name:      "body retry_after_seconds when no header",
			replies:   []reply{{status: 429, body: limited}, ok},
			wantCalls: 2, wantWaits: []time.Duration{2 * time.Second},
		},
		{
			name: "wait longer than the bound fails at once",
			replies: []reply{{status: 429, headers: map[string]string{"Retry-After": "3600"},
				body: `{"error":{"code":"rate_limited","message":"Too many synthetic chains (max 10/program/hour).","retry_after_seconds":3600}}`}},
			wantCalls: 1, wantErr: 429,
		},
		{
			name:      "no hint at all waits one second",
			replies:   []reply{{status: 429}, ok},
			wantCalls: 2, wantWaits: []time.Duration{time.Second},
		},
		{
			name:      "other errors are not retried",
			replies:   []reply{{status: 503, body: `{"data":null,"error":{"status":503,"message":"down","details":{}}}`}, ok},
			wantCalls: 1, wantErr: 503,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, ts := newServer(t, tc.replies...)
			fs := &fakeSleep{}
			c := newClient(ts.URL, fs)
			var told int
			c.OnRetry = func(time.Duration, int, int) { told++ }
			_, err := c.Do(context.Background(), Request{Method: "POST", Path: "/x", Body: map[string]int{"a": 1}})
			if s.count() != tc.wantCalls {
				t.Fatalf("calls %d, want %d", s.count(), tc.wantCalls)
			}
			if len(fs.waits) != len(tc.wantWaits) || told != len(tc.wantWaits) {
				t.Fatalf("waits %v (told %d), want %v", fs.waits, told, tc.wantWaits)
			}
			for i := range fs.waits {
				if fs.waits[i] != tc.wantWaits[i] {
					t.Fatalf("waits %v, want %v", fs.waits, tc.wantWaits)
				}
			}
			var e *Error
			switch {
			case tc.wantErr == 0 && err != nil:
				t.Fatalf("err %v", err)
			case tc.wantErr != 0 && (!errors.As(err, &e) || e.Status != tc.wantErr):
				t.Fatalf("err %v, want status %d", err, tc.wantErr)
			}
			// Every retry resends the same body.
			for _, b := range s.bodies {
				if b != s.bodies[0] {
					t.Fatalf("bodies differ: %q", s.bodies)
				}
			}
		})
	}
}

func TestRetryAfterHTTPDate(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	_, ts := newServer(t, reply{status: 429, headers: map[string]string{"Retry-After": now.Add(5 * time.Second).Format(http.TimeFormat)}}, reply{status: 200, body: `{"data":{}}`})
	fs := &fakeSleep{}
	c := newClient(ts.URL, fs)
	c.Now = func() time.Time { return now }
	if _, err := c.Do(context.Background(), Request{Method: "GET", Path: "/x"}); err != nil {
		t.Fatal(err)
	}
	if len(fs.waits) != 1 || fs.waits[0] != 5*time.Second {
		t.Fatalf("waits %v", fs.waits)
	}
}

func TestRetryStopsWhenContextEnds(t *testing.T) {
	_, ts := newServer(t, reply{status: 429, headers: map[string]string{"Retry-After": "1"}})
	c := newClient(ts.URL, &fakeSleep{})
	c.Sleep = nil // the real timer, cut short by the context
	ctx, cancel := context.WithCancel(context.Background())
	c.OnRetry = func(time.Duration, int, int) { cancel() }
	_, err := c.Do(ctx, Request{Method: "GET", Path: "/x"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}

func TestUnreachableIsTransportError(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	base := ts.URL
	ts.Close()
	_, err := newClient(base, &fakeSleep{}).Do(context.Background(), Request{Method: "GET", Path: "/api/v1/cli/auth/poll", Query: map[string][]string{"state": {"secret"}}})
	var te *TransportError
	if !errors.As(err, &te) {
		t.Fatalf("err %v", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("error text repeats the query: %v", err)
	}
}

func TestInvalidBaseURL(t *testing.T) {
	for _, base := range []string{"", "127.0.0.1:8080", "://x"} {
		_, err := newClient(base, &fakeSleep{}).Do(context.Background(), Request{Method: "GET", Path: "/x"})
		if err == nil || !strings.Contains(err.Error(), "invalid base URL") {
			t.Errorf("%q: %v", base, err)
		}
	}
}

func TestWarningJSONShape(t *testing.T) {
	b, _ := json.Marshal(Warning{Code: "c", Message: "m"})
	if string(b) != `{"code":"c","message":"m"}` {
		t.Fatal(string(b))
	}
}

// 204 has no body (svc listen's stop): a success without data, and the
// whole body of other answers is kept in Raw.
func TestNoContentAndRaw(t *testing.T) {
	_, ts := newServer(t, reply{status: 204}, reply{status: 200, body: `{"data":[],"after":7}`})
	c := newClient(ts.URL, &fakeSleep{})
	resp, err := c.Do(context.Background(), Request{Method: "DELETE", Path: "/x"})
	if err != nil || resp.Status != 204 || resp.Data != nil {
		t.Fatalf("204: %+v, %v", resp, err)
	}
	resp, err = c.Do(context.Background(), Request{Method: "GET", Path: "/x"})
	if err != nil || string(resp.Raw) != `{"data":[],"after":7}` || string(resp.Data) != `[]` {
		t.Fatalf("200: %+v, %v", resp, err)
	}
}
