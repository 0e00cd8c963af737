package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/libs/httpkit"
)

// echo stands in for a service's handler: it resolves the client the way
// every service does (httpkit.IPResolver over TRUSTED_PROXIES) and answers
// with its name and the client it saw.
func echo(t *testing.T, name, trusted string) http.Handler {
	t.Helper()
	ips, err := httpkit.NewIPResolver(trusted)
	if err != nil {
		t.Fatal(err)
	}
	return ips.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, _ := httpkit.ClientIPFrom(r.Context())
		_ = json.NewEncoder(w).Encode(map[string]string{"service": name, "client": ip.String(), "path": r.URL.Path})
	}))
}

type seen struct {
	status                 int
	service, client, error string
}

// get sends one request to the gateway from local address from (a loopback
// address of our choosing, so the peer can be trusted or not).
func get(t *testing.T, gw, from, path, xff string) seen {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, gw+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body struct {
		Service, Client string
		Error           struct{ Message string }
	}
	_ = json.Unmarshal(raw, &body)
	return seen{resp.StatusCode, body.Service, body.Client, body.Error.Message}
}

func TestGatewayHandsRequestsToTheOwnerWithTheClientAddress(t *testing.T) {
	// The services trust 127.0.0.1 only: a request from 127.0.0.2 comes
	// from an untrusted peer, whose X-Forwarded-For must be ignored.
	const trusted = "127.0.0.1/32,::1/128"
	srv := httptest.NewServer(gateway.New(map[string]http.Handler{
		"tracking": echo(t, "tracking", trusted),
		"accounts": echo(t, "accounts", trusted),
	}))
	defer srv.Close()

	t.Run("trusted hop keeps the chain: each client its own address", func(t *testing.T) {
		for _, client := range []string{"203.0.113.7", "198.51.100.9", "2001:db8::1"} {
			got := get(t, srv.URL, "127.0.0.1", "/api/v1/track/click", client)
			if got.status != 200 || got.service != "tracking" || got.client != client {
				t.Fatalf("XFF %s: %+v", client, got)
			}
		}
	})
	t.Run("trusted hop with a chain: the rightmost untrusted address", func(t *testing.T) {
		got := get(t, srv.URL, "127.0.0.1", "/api/v1/cli/programs", "192.0.2.1, 203.0.113.7")
		if got.service != "accounts" || got.client != "203.0.113.7" {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("untrusted peer: its forwarded header is replaced by the peer", func(t *testing.T) {
		got := get(t, srv.URL, "127.0.0.2", "/api/v1/track/click", "203.0.113.7")
		if got.client != "127.0.0.2" {
			t.Fatalf("spoofed X-Forwarded-For believed: %+v", got)
		}
	})
	t.Run("no header: the peer", func(t *testing.T) {
		if got := get(t, srv.URL, "127.0.0.1", "/svc.js", ""); got.service != "tracking" || got.client != "127.0.0.1" {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("admin is routed locally", func(t *testing.T) {
		if got := get(t, srv.URL, "127.0.0.1", "/admin/v1/programs/1", ""); got.service != "accounts" {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("a service not in the stack answers 503", func(t *testing.T) {
		got := get(t, srv.URL, "127.0.0.1", "/api/tracking/performance/1", "")
		if got.status != http.StatusServiceUnavailable || got.error != "The analytics service is not part of this stack yet" {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("unknown path answers 404", func(t *testing.T) {
		got := get(t, srv.URL, "127.0.0.1", "/nope", "")
		if got.status != http.StatusNotFound || got.error != "No route for /nope" {
			t.Fatalf("%+v", got)
		}
	})
}

func TestRouteLongestPrefixWins(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/track/refund":          "commissions",
		"/api/v1/track/sale":            "tracking",
		"/api/v1/programs/me/readiness": "analytics",
		"/api/v1/programs/7/settings":   "accounts",
		"/api/openapi.json":             "accounts",
	} {
		r, ok := gateway.Route(path)
		if !ok || r.Service != want {
			t.Errorf("%s: %+v %v, want %s", path, r, ok, want)
		}
	}
	if r, _ := gateway.Route("/admin/v1/programs"); r.Public {
		t.Fatal("admin routes must never be public")
	}
}
