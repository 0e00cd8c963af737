package security_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// `svc listen` through the front door (issue 22): a program's key starts a
// listener and long-polls; a live sale through the gateway comes out as
// sale.created and commission.created with the exact bodies endpoints
// receive; another program's key, a dashboard session and a login token
// are refused, and nothing of program A leaks to program B's listener.
func TestWebhooksListen(t *testing.T) {
	t.Parallel()
	e := start(t, nil, "accounts", "tracking", "commissions", "webhooks")
	f := e.consoleMoney()
	a, b := f.a, f.b
	listen := func(prog int64, suffix string) string {
		return fmt.Sprintf("/api/v1/programs/%d/webhooks/listen%s", prog, suffix)
	}
	c := func(key string) *client { return e.client("203.0.113.130").withKey(key) }
	// The replica has the keys once the catalog barrier says so.
	e.sync()

	started := c(a.key).do("POST", listen(a.id, ""), map[string]any{}).want(t, 201)
	id := int64(started.get("data", "id").(float64))
	after := int64(started.get("data", "after").(float64))
	if !strings.HasPrefix(started.str("data", "secret"), "whsec_") {
		t.Fatalf("start: %s", started.Raw)
	}
	// Limited per key (120 a minute, the three routes together).
	if started.Header.Get("X-RateLimit-Limit") != "120" || started.Header.Get("X-RateLimit-Remaining") != "119" {
		t.Fatalf("rate headers %v", started.Header)
	}
	other := c(b.key).do("POST", listen(b.id, ""), map[string]any{"events": []string{"sale.created"}}).want(t, 201)
	otherID := int64(other.get("data", "id").(float64))

	t.Run("refused: another program's key, a dashboard session, a login token, no credential", func(t *testing.T) {
		for _, path := range []string{listen(a.id, ""), listen(a.id, fmt.Sprintf("/%d/events?after=0", id))} {
			method := "POST"
			if strings.Contains(path, "events") {
				method = "GET"
			}
			var body any
			if method == "POST" {
				body = map[string]any{}
			}
			if r := c(b.key).do(method, path, body).want(t, 403); r.str("error", "message") != "This API key belongs to another program" {
				t.Fatal(r.Raw)
			}
			c(f.owner).do(method, path, body).want(t, 401)
			c("svc_cli_"+strings.Repeat("x", 43)).do(method, path, body).want(t, 401)
			e.client("203.0.113.131").do(method, path, body).want(t, 401)
		}
		c(b.key).do("DELETE", listen(a.id, fmt.Sprintf("/%d", id)), nil).want(t, 403)
		// B's own program does not have A's listener.
		c(b.key).do("GET", listen(b.id, fmt.Sprintf("/%d/events?after=0", id)), nil).want(t, 404)
	})

	// A live sale through the gateway, with a partner's click: tracking
	// attributes it, the ledger records the sale and its commission, and
	// webhooks writes the events for the listener.
	f.sale(a, "MONEYPA", "listen-tx-1", 12000)
	seen := map[string]map[string]any{}
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < 2 && time.Now().Before(deadline) {
		p := c(a.key).do("GET", listen(a.id, fmt.Sprintf("/%d/events?after=%d&wait=5", id, after)), nil).want(t, 200)
		items, _ := p.get("data").([]any)
		for _, it := range items {
			ev := it.(map[string]any)
			body := ev["body"].(map[string]any)
			if body["id"] != ev["id"] || body["type"] != ev["type"] || body["program_id"] != float64(a.id) {
				t.Fatalf("event %v: its body does not match", ev)
			}
			seen[ev["type"].(string)] = body
		}
		after = int64(p.get("after").(float64))
	}
	sale, ok := seen["sale.created"]
	if !ok || seen["commission.created"] == nil {
		t.Fatalf("polled %v, want sale.created and commission.created", seen)
	}
	if d := sale["data"].(map[string]any); d["transaction_id"] != "listen-tx-1" || d["amount_cents"] != float64(12000) || d["currency"] != "USD" {
		t.Fatalf("sale.created data %v", d)
	}

	t.Run("program B's listener got nothing of A's", func(t *testing.T) {
		p := c(b.key).do("GET", listen(b.id, fmt.Sprintf("/%d/events?after=%d", otherID, int64(other.get("data", "after").(float64)))), nil).want(t, 200)
		if items, _ := p.get("data").([]any); len(items) != 0 {
			t.Fatalf("B's listener: %s", p.Raw)
		}
	})

	t.Run("stop", func(t *testing.T) {
		c(a.key).do("DELETE", listen(a.id, fmt.Sprintf("/%d", id)), nil).want(t, 204)
		c(a.key).do("GET", listen(a.id, fmt.Sprintf("/%d/events?after=0", id)), nil).want(t, 404)
	})
}
