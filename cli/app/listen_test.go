package app_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/svc-dev/svc/cli/app"
)

var listenSecret = "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, 32))

// The body as the server stores and sends it: the CLI must forward these
// bytes, not a re-encoding (the & stays, the key order stays).
const listenBody = `{"id":"evt_0123456789abcdef0123456789abcdef","type":"sale.created","created_at":"2026-11-28T09:30:15.123Z","program_id":7,"data":{"id":1,"page_url":"https://shop.example/?a=1&b=2"}}`

// svc listen with the program key: the key's program is asked with status,
// the listener started, a failed poll retried after a wait, the event's
// exact body posted to the local server with Standard Webhooks headers
// that verify under the printed secret, one line printed for it; Ctrl-C
// deletes the listener and exits 0.
func TestListenForwardsSignedBodiesAndStopsOnCtrlC(t *testing.T) {
	var mu sync.Mutex
	var got []*http.Request
	var bodies [][]byte
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, b)
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(local.Close)

	f := newFake(t)
	ctx, ctrlC := context.WithCancel(context.Background())
	defer ctrlC()
	f.on("POST /api/v1/programs/7/webhooks/listen", func(w http.ResponseWriter, r *http.Request, _ int) {
		writeJSON(w, 201, map[string]any{"data": map[string]any{"id": 5, "secret": listenSecret, "after": 40,
			"events": []string{"sale.created"}, "include_test": true, "expires_at": "2026-11-28T10:02:00Z"}})
	})
	f.on("GET /api/v1/programs/7/webhooks/listen/5/events", func(w http.ResponseWriter, r *http.Request, n int) {
		switch n {
		case 0:
			platformErr(w, 503, "Service unavailable", nil)
		case 1:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"data":[{"seq":41,"id":"evt_0123456789abcdef0123456789abcdef","type":"sale.created","body":`+listenBody+`}],"after":41}`)
		default:
			ctrlC()
			writeJSON(w, 200, map[string]any{"data": []any{}, "after": 41})
		}
	})
	f.on("DELETE /api/v1/programs/7/webhooks/listen/5", func(w http.ResponseWriter, r *http.Request, _ int) {
		w.WriteHeader(http.StatusNoContent)
	})
	c := newCLI(t, f.URL())
	c.env[app.EnvAPIKey] = fakeKey
	c.ctx = ctx
	r := c.run("listen", "--forward-to", local.URL+"/hooks", "--events", "sale.created")
	if r.code != app.ExitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "stdout", r.stdout, "Ready: forwarding program 7 events to "+local.URL+"/hooks. Signing secret: "+listenSecret+" (this session only)")
	if !regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  sale\.created\s+evt_0123456789abcdef0123456789abcdef → 202 Accepted \(`).MatchString(r.stdout) {
		t.Fatalf("no event line:\n%s", r.stdout)
	}
	mustContain(t, "stderr", r.stderr, "svc unreachable")
	if len(c.sleeps) == 0 {
		t.Fatal("the failed poll was retried without a wait")
	}

	start := f.routeRequests("POST /api/v1/programs/7/webhooks/listen")
	if len(start) != 1 || start[0].Auth != "Bearer "+fakeKey || start[0].Body != `{"events":["sale.created"]}` {
		t.Fatalf("start %+v", start)
	}
	polls := f.routeRequests("GET /api/v1/programs/7/webhooks/listen/5/events")
	if len(polls) < 3 || !strings.HasPrefix(polls[0].Query, "after=40&wait=") || !strings.HasPrefix(polls[2].Query, "after=41&") {
		t.Fatalf("polls %+v", polls)
	}
	if len(f.routeRequests("DELETE /api/v1/programs/7/webhooks/listen/5")) != 1 {
		t.Fatal("Ctrl-C did not stop the listener")
	}

	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || string(bodies[0]) != listenBody || got[0].URL.Path != "/hooks" {
		t.Fatalf("forwarded %d, body %s", len(got), bodies)
	}
	if got[0].Header.Get("webhook-id") != "evt_0123456789abcdef0123456789abcdef" || got[0].Header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", got[0].Header)
	}
	wh, _ := standardwebhooks.NewWebhook(listenSecret)
	if err := wh.Verify(bodies[0], got[0].Header); err != nil {
		t.Fatalf("signature: %v", err)
	}
	other, _ := standardwebhooks.NewWebhook("whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{4}, 32)))
	if other.Verify(bodies[0], got[0].Header) == nil {
		t.Fatal("another secret verified the signature")
	}
}

func TestListenCommandLine(t *testing.T) {
	f := newFake(t)
	for _, c := range []struct {
		name string
		args []string
		key  bool
		code int
		msg  string
	}{
		{"no --forward-to", []string{"listen"}, true, app.ExitUsage, "svc listen needs --forward-to URL"},
		{"not a URL", []string{"listen", "--forward-to", "localhost:3000"}, true, app.ExitUsage, "--forward-to must be an http:// or https:// URL"},
		{"a bad program", []string{"listen", "--forward-to", "http://localhost:3000", "--program", "x"}, true, app.ExitUsage, "--program must be a program id"},
		{"no credential", []string{"listen", "--forward-to", "http://localhost:3000"}, false, app.ExitAuth, "not logged in"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := newCLI(t, f.URL())
			if c.key {
				cl.env[app.EnvAPIKey] = fakeKey
			}
			r := cl.run(c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
				t.Fatalf("exit %d, stderr %s; want %d %q", r.code, r.stderr, c.code, c.msg)
			}
		})
	}
	t.Run("a login token with several programs needs --program", func(t *testing.T) {
		cl := newCLI(t, f.URL())
		cl.login(f.URL())
		r := cl.run("listen", "--forward-to", "http://localhost:3000")
		if r.code != app.ExitUsage || !strings.Contains(r.stderr, "choose one with --program") {
			t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
		}
	})
	t.Run("the server's refusal of a login token is an auth error", func(t *testing.T) {
		f.on("POST /api/v1/programs/9/webhooks/listen", func(w http.ResponseWriter, r *http.Request, _ int) {
			platformErr(w, 401, `This server cannot check "svc login" tokens yet; use the program's API key`, nil)
		})
		cl := newCLI(t, f.URL())
		cl.login(f.URL())
		r := cl.run("listen", "--forward-to", "http://localhost:3000", "--program", "9")
		if r.code != app.ExitAuth || !strings.Contains(r.stderr, "use the program's API key") {
			t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
		}
	})
}
