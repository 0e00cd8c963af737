package plans_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// receiver is a brand's webhook endpoint: it answers every delivery with
// status and counts the event types it was sent.
type receiver struct {
	url   string
	mu    sync.Mutex
	types map[string]int
}

func (c *client) receiver(status int) *receiver {
	r := &receiver{types: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		var ev struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(raw, &ev)
		r.mu.Lock()
		r.types[ev.Type]++
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	c.t.Cleanup(srv.Close)
	r.url = srv.URL + "/hooks"
	return r
}

// missing are the types of want r was never sent.
func (r *receiver) missing(want []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, typ := range want {
		if r.types[typ] == 0 {
			out = append(out, typ)
		}
	}
	return out
}

func (r *receiver) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for typ, n := range r.types {
		out = append(out, fmt.Sprintf("%s x%d", typ, n))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// hooks is the world program's webhook setup: an endpoint answering 200
// with every type, one answering 500 (its retries, backoff and disabling
// run), and a `svc listen` listener started with the program key.
type hooks struct {
	w               world
	owner, key      []string
	ok, failing     *receiver
	okID, failingID int64
	listener, after int64
}

// allTypes are the subscribable v1 types (api/openapi.yaml): the brand's
// main endpoint lists them all, click.recorded included.
var allTypes = []string{"lead.created", "sale.created", "sale.refunded", "commission.created", "commission.approved",
	"commission.reversed", "commission.paid", "partner.enrolled", "payout.paid", "click.recorded"}

func (h *hooks) path(format string, args ...any) string {
	return fmt.Sprintf("/api/v1/programs/%d/webhooks", h.w.program) + fmt.Sprintf(format, args...)
}

// webhooksStart does what a brand does in the console before its traffic
// comes (create, list, edit, rotate, test, delete an endpoint) and starts
// `svc listen`, so the events the routes cause next are written, queued
// for the listener and delivered.
func (c *client) webhooksStart(w world, owner []string) *hooks {
	h := &hooks{w: w, owner: owner, key: bearer(w.live), ok: c.receiver(200), failing: c.receiver(500)}
	id := func(r reply) int64 {
		v, _ := r.body["data"].(map[string]any)["id"].(float64)
		if v == 0 {
			c.t.Fatalf("no id: %s", r.raw)
		}
		return int64(v)
	}
	h.okID = id(c.want(201, "POST", h.path(""), map[string]any{"url": h.ok.url, "events": allTypes, "description": "CRM", "include_test": true}, owner...))
	h.failingID = id(c.want(201, "POST", h.path(""), map[string]any{"url": h.failing.url, "events": []string{"lead.created", "sale.created"}}, owner...))
	spare := id(c.want(201, "POST", h.path(""), map[string]any{"url": h.ok.url, "events": []string{"payout.paid"}}, owner...))
	c.want(204, "DELETE", h.path("/%d", spare), nil, owner...)
	if l := c.want(200, "GET", h.path(""), nil, owner...); len(l.body["data"].([]any)) != 2 {
		c.t.Fatalf("endpoints: %s", l.raw)
	}
	c.want(200, "PATCH", h.path("/%d", h.okID), map[string]any{"description": "CRM (prod)"}, owner...)
	// Rotated: the deliveries are signed with both secrets.
	c.want(200, "POST", h.path("/%d/secret", h.okID), nil, owner...)
	c.want(202, "POST", h.path("/%d/test", h.okID), nil, owner...)

	l := c.want(201, "POST", h.path("/listen"), map[string]any{}, h.key...)
	d, _ := l.body["data"].(map[string]any)
	lid, _ := d["id"].(float64)
	after, _ := d["after"].(float64)
	h.listener, h.after = int64(lid), int64(after)
	return h
}

// webhooksFinish waits for the events the routes caused to reach the
// receivers and the listener, then reads and retries deliveries as the
// console does, and stops the listener.
func (c *client) webhooksFinish(h *hooks) {
	t := c.t
	want := []string{"ping", "click.recorded", "lead.created", "sale.created", "sale.refunded", "commission.created",
		"commission.approved", "commission.reversed", "payout.paid"}
	c.await("every event type delivered to the brand's endpoint", func() (bool, string) {
		return len(h.ok.missing(want)) == 0 && len(c.deliveries(h, h.okID, "status=pending")) == 0, h.ok.String()
	})

	// The delivery log: pages with a cursor, with and without a status.
	for _, q := range []string{"limit=2", "status=delivered&limit=2"} {
		page := c.want(200, "GET", h.path("/%d/deliveries?%s", h.okID, q), nil, h.owner...)
		next, _ := page.body["next_cursor"].(string)
		if next == "" {
			t.Fatalf("no next page of deliveries: %s", page.raw)
		}
		c.want(200, "GET", h.path("/%d/deliveries?%s&cursor=%s", h.okID, q, url.QueryEscape(next)), nil, h.owner...)
	}
	c.want(200, "GET", h.path("/%d/deliveries?status=failed", h.okID), nil, h.owner...)

	// A delivered one retried: claimed and delivered again.
	last := c.deliveries(h, h.okID, "limit=1")[0]
	retried := last["id"].(float64)
	c.want(202, "POST", h.path("/%d/deliveries/%d/retry", h.okID, int64(retried)), nil, h.owner...)
	c.await("the retried delivery delivered again", func() (bool, string) {
		for _, d := range c.deliveries(h, h.okID, "limit=10") {
			if d["id"] == retried {
				return d["status"] == "delivered" && d["attempts"] == last["attempts"].(float64)+1, fmt.Sprint(d)
			}
		}
		return false, "not listed"
	})

	// The failing endpoint: its first attempts failed (retried with
	// backoff); one retried now fails again, past DISABLE_AFTER, and the
	// dispatcher disables the endpoint (and notifies); the brand turns it
	// on again.
	var failed map[string]any
	c.await("a failed attempt at the failing endpoint", func() (bool, string) {
		ds := c.deliveries(h, h.failingID, "status=pending")
		for _, d := range ds {
			if d["last_status"] == 500.0 {
				failed = d
				return true, ""
			}
		}
		return false, fmt.Sprint(ds)
	})
	c.want(202, "POST", h.path("/%d/deliveries/%d/retry", h.failingID, int64(failed["id"].(float64))), nil, h.owner...)
	c.await("the failing endpoint disabled", func() (bool, string) {
		l := c.want(200, "GET", h.path(""), nil, h.owner...)
		for _, e := range l.body["data"].([]any) {
			if e := e.(map[string]any); e["id"] == float64(h.failingID) {
				return e["enabled"] == false && e["disabled_reason"] == "failing", fmt.Sprint(e)
			}
		}
		return false, l.raw
	})
	// The brand is told: the notifications page, and the next one.
	n := c.want(200, "GET", h.path("/notifications"), nil, h.owner...)
	if next, _ := n.body["next_cursor"].(string); next != "" {
		c.want(200, "GET", h.path("/notifications?cursor=%s", url.QueryEscape(next)), nil, h.owner...)
	}
	c.want(200, "PATCH", h.path("/%d", h.failingID), map[string]any{"enabled": true}, h.owner...)

	// `svc listen`: the events queued for the listener, polled without
	// waiting, then stopped.
	seen := map[string]bool{}
	c.await("the listener's events", func() (bool, string) {
		p := c.want(200, "GET", h.path("/listen/%d/events?after=%d&wait=0", h.listener, h.after), nil, h.key...)
		for _, e := range p.body["data"].([]any) {
			seen[e.(map[string]any)["type"].(string)] = true
		}
		after, _ := p.body["after"].(float64)
		h.after = int64(after)
		return seen["sale.created"] && seen["commission.created"], fmt.Sprint(seen)
	})
	c.want(204, "DELETE", h.path("/listen/%d", h.listener), nil, h.key...)
}

// deliveries is a page of an endpoint's delivery log.
func (c *client) deliveries(h *hooks, endpoint int64, q string) []map[string]any {
	c.t.Helper()
	r := c.want(200, "GET", h.path("/%d/deliveries?%s", endpoint, q), nil, h.owner...)
	var out []map[string]any
	for _, d := range r.body["data"].([]any) {
		out = append(out, d.(map[string]any))
	}
	return out
}

// await polls cond until it holds, for at most 30 s; what it says last is
// the failure's message.
func (c *client) await(what string, cond func() (bool, string)) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, got := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: never; last %s", what, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
