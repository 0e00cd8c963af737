package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
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
		"tracking":    echo(t, "tracking", trusted),
		"accounts":    echo(t, "accounts", trusted),
		"commissions": echo(t, "commissions", trusted),
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
	t.Run("commissions' admin routes go to commissions", func(t *testing.T) {
		if got := get(t, srv.URL, "127.0.0.1", "/admin/v1/partners/5/balances", ""); got.service != "commissions" {
			t.Fatalf("%+v", got)
		}
		if got := get(t, srv.URL, "127.0.0.1", "/admin/v1/partners", ""); got.service != "accounts" {
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

// The console's commissions and payouts go to commissions; every other
// path of a program (settings, keys, partners, …) and near misses stay on
// accounts. Those rules are public, and their Ingress regex matches exactly
// the paths the pattern does.
func TestRouteConsoleMoneyToCommissions(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/api/v1/programs/7/commissions", "commissions"},
		{"/api/v1/programs/7/payouts", "commissions"},
		{"/api/v1/programs/7/payouts/3/pay", "commissions"},
		{"/api/v1/programs/7/payouts/3/cancel", "commissions"},
		{"/api/v1/programs/7/settings", "accounts"},
		{"/api/v1/programs/7/partners", "accounts"},
		{"/api/v1/programs/7/commissions/", "accounts"},
		{"/api/v1/programs/7/payouts/3", "accounts"},
		{"/api/v1/programs/7/payouts/3/pay/x", "accounts"},
		{"/api/v1/programs//commissions", "accounts"},
		{"/api/v1/programs/7/commissionsX", "accounts"},
		{"/api/v1/programs/me/readiness", "analytics"},
	} {
		r, ok := gateway.Route(tc.path)
		if !ok || r.Service != tc.want {
			t.Errorf("%s -> %+v %v, want %s", tc.path, r, ok, tc.want)
		}
		if tc.want == "commissions" && !r.Public {
			t.Errorf("%s -> %+v: the console's routes are public", tc.path, r)
		}
	}
	for _, r := range gateway.Rules() {
		if r.Pattern == "" || !r.Public {
			continue
		}
		re := regexp.MustCompile(gateway.IngressRegex(r.Pattern))
		for _, p := range []string{"/api/v1/programs/7/commissions", "/api/v1/programs/7/payouts", "/api/v1/programs/7/payouts/3/pay",
			"/api/v1/programs/7/commissions/", "/api/v1/programs//payouts", "/api/v1/programs/7/payouts/3", "/x/api/v1/programs/7/payouts",
			"/api/v1/programs/7/payouts/3/pay/x"} {
			got, _ := gateway.Route(p)
			if want := got.Pattern == r.Pattern; re.MatchString(p) != want {
				t.Errorf("regex %s on %s: %v, pattern %s matches: %v", re, p, re.MatchString(p), r.Pattern, want)
			}
		}
	}
	if got := gateway.IngressRegex("/api/v1/programs/*/payouts/*/*"); got != `^/api/v1/programs/[^/]+/payouts/[^/]+/[^/]+$` {
		t.Fatalf("IngressRegex: %s", got)
	}
}

func TestRouteLongestPrefixWins(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/track/refund":          "commissions",
		"/api/v1/track/sale":            "commissions",
		"/api/v1/track/lead":            "tracking",
		"/api/v1/programs/me/readiness": "analytics",
		"/api/v1/programs/7/settings":   "accounts",
		"/api/v1/programs":              "accounts",
		"/api/v1/programs/":             "accounts",
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

// The admin API is split between accounts and commissions: commissions'
// ledger routes (services/commissions/README.md, "Admin API") go to
// commissions, everything else under /admin/v1/ stays on accounts. A
// pattern matches whole paths only: a trailing slash, an extra or empty
// segment or a longer last segment falls back to accounts (which answers
// 404), never to commissions.
func TestRouteAdminSplitBetweenAccountsAndCommissions(t *testing.T) {
	for _, tc := range []struct{ name, path, want string }{
		// Every commissions admin route.
		{"GET /admin/v1/commissions/{id}", "/admin/v1/commissions/42", "commissions"},
		{"POST /admin/v1/commissions/approve-due", "/admin/v1/commissions/approve-due", "commissions"},
		{"GET /admin/v1/sales/{transaction_id}", "/admin/v1/sales/tx-9", "commissions"},
		{"GET /admin/v1/partners/{id}/balances", "/admin/v1/partners/5/balances", "commissions"},
		{"GET|POST /admin/v1/partners/{id}/withdrawals", "/admin/v1/partners/5/withdrawals", "commissions"},
		{"POST /admin/v1/withdrawals/{id}/pay", "/admin/v1/withdrawals/3/pay", "commissions"},
		{"POST /admin/v1/withdrawals/{id}/cancel", "/admin/v1/withdrawals/3/cancel", "commissions"},
		{"GET /admin/v1/partners/{id}/notifications", "/admin/v1/partners/5/notifications", "commissions"},
		{"GET /admin/v1/advertisers/{id}/notifications", "/admin/v1/advertisers/8/notifications", "commissions"},
		// Accounts' routes sharing those prefixes.
		{"GET|POST /admin/v1/partners", "/admin/v1/partners", "accounts"},
		{"/admin/v1/partners/{id}", "/admin/v1/partners/5", "accounts"},
		{"POST /admin/v1/advertisers", "/admin/v1/advertisers", "accounts"},
		{"/admin/v1/advertisers/{id}", "/admin/v1/advertisers/8", "accounts"},
		{"GET /admin/v1/programs/{id}/partners", "/admin/v1/programs/5/partners", "accounts"},
		{"GET /admin/v1/catalog/sync", "/admin/v1/catalog/sync", "accounts"},
		{"POST /admin/v1/keys/{id}/rotation", "/admin/v1/keys/4/rotation", "accounts"},
		// Near misses of a pattern stay on accounts.
		{"longer last segment", "/admin/v1/partners/5/balancesX", "accounts"},
		{"trailing slash", "/admin/v1/partners/5/balances/", "accounts"},
		{"extra segment", "/admin/v1/partners/5/balances/usd", "accounts"},
		{"empty id segment", "/admin/v1/partners//balances", "accounts"},
		{"two id segments", "/admin/v1/partners/5/6/balances", "accounts"},
		{"no id segment", "/admin/v1/partners/balances", "accounts"},
		{"other partner sub-resource", "/admin/v1/partners/5/programs", "accounts"},
		{"advertiser balances are not a route", "/admin/v1/advertisers/8/balances", "accounts"},
		{"case differs", "/admin/v1/Partners/5/balances", "accounts"},
		// Commissions' namespaces are prefixes: the whole subtree.
		{"under /admin/v1/withdrawals/", "/admin/v1/withdrawals/3/pay/", "commissions"},
		{"bare /admin/v1/sales (no trailing slash)", "/admin/v1/sales", "accounts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := gateway.Route(tc.path)
			if !ok || r.Service != tc.want {
				t.Fatalf("%s -> %+v %v, want %s", tc.path, r, ok, tc.want)
			}
			if r.Public {
				t.Fatalf("%s -> %+v: admin rules are never public", tc.path, r)
			}
		})
	}
}

// Exactly one rule wins for any path: each rule has exactly one of Prefix
// and Pattern, prefixes are unique, no two patterns match the same path, and
// public pattern rules are /api/v1/ paths only (the regex Ingress carries
// them; admin and internal paths never).
func TestRulesAreUnambiguous(t *testing.T) {
	prefixes := map[string]bool{}
	var patterns []gateway.Rule
	for _, r := range gateway.Rules() {
		switch {
		case (r.Prefix == "") == (r.Pattern == ""):
			t.Errorf("%+v: set exactly one of Prefix and Pattern", r)
		case r.Prefix != "":
			if prefixes[r.Prefix] {
				t.Errorf("prefix %s listed twice", r.Prefix)
			}
			prefixes[r.Prefix] = true
		default:
			if r.Public && !strings.HasPrefix(r.Pattern, "/api/v1/") {
				t.Errorf("pattern %s is public: only /api/v1/ patterns may be on the Ingress", r.Pattern)
			}
			if !strings.HasPrefix(r.Pattern, "/") || strings.Contains(r.Pattern, "//") || strings.HasSuffix(r.Pattern, "/") {
				t.Errorf("pattern %s: absolute, no empty segment, no trailing slash", r.Pattern)
			}
			for _, other := range patterns {
				if overlap(r.Pattern, other.Pattern) {
					t.Errorf("patterns %s and %s match the same paths", r.Pattern, other.Pattern)
				}
			}
			patterns = append(patterns, r)
		}
		if r.Service == "" {
			t.Errorf("%+v: no service", r)
		}
	}
	if !overlap("/a/*/b", "/a/x/*") || overlap("/a/*/b", "/a/*/c") || overlap("/a/*", "/a/*/b") {
		t.Fatal("overlap is wrong")
	}
}

// overlap reports whether some path matches both patterns.
func overlap(a, b string) bool {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	if len(as) != len(bs) {
		return false
	}
	for i := range as {
		if as[i] != bs[i] && as[i] != "*" && bs[i] != "*" {
			return false
		}
	}
	return true
}

// A service given as gateway.Ports (its platform.Instance's Handler and
// OpsHandler, as stack.Handlers gives them) gets its public rules on the
// public handler and its admin rules on the ops handler, as in the cluster:
// the Ingress reaches the public port only, operators the ops port. A
// plain handler gets both.
func TestGatewaySendsAdminRulesToTheOpsHandler(t *testing.T) {
	const trusted = "127.0.0.1/32,::1/128"
	srv := httptest.NewServer(gateway.New(map[string]http.Handler{
		"accounts":    gateway.Ports{Public: echo(t, "accounts public", trusted), Ops: echo(t, "accounts ops", trusted)},
		"commissions": gateway.Ports{Public: echo(t, "commissions public", trusted), Ops: echo(t, "commissions ops", trusted)},
		"tracking":    echo(t, "tracking", trusted),
	}))
	defer srv.Close()
	for _, tc := range []struct{ path, want string }{
		{"/api/v1/cli/programs", "accounts public"},
		{"/admin/v1/programs/1", "accounts ops"},
		{"/api/v1/track/sale", "commissions public"},
		{"/admin/v1/partners/5/balances", "commissions ops"},
		{"/admin/v1/sales/tx-1", "commissions ops"},
		{"/api/v1/track/click", "tracking"},
	} {
		if got := get(t, srv.URL, "127.0.0.1", tc.path, "203.0.113.7"); got.status != 200 || got.service != tc.want || got.client != "203.0.113.7" {
			t.Errorf("%s: %+v, want %s", tc.path, got, tc.want)
		}
	}
}

// The console's webhook endpoints go to webhooks; near misses stay on
// accounts. The rules are public and their Ingress regex matches exactly
// the paths the pattern does.
func TestRouteConsoleWebhooksToWebhooks(t *testing.T) {
	paths := []struct{ path, want string }{
		{"/api/v1/programs/7/webhooks", "webhooks"},
		{"/api/v1/programs/7/webhooks/3", "webhooks"},
		{"/api/v1/programs/7/webhooks/3/secret", "webhooks"},
		{"/api/v1/programs/7/webhooks/3/test", "webhooks"},
		{"/api/v1/programs/7/webhooks/3/deliveries", "webhooks"},
		{"/api/v1/programs/7/webhooks/3/deliveries/9/retry", "webhooks"},
		{"/api/v1/programs/7/webhooks/notifications", "webhooks"},
		{"/api/v1/programs/7/webhooks/listen", "webhooks"},
		{"/api/v1/programs/7/webhooks/listen/4", "webhooks"},
		{"/api/v1/programs/7/webhooks/listen/4/events", "webhooks"},
		{"/api/v1/programs/7/webhooks/listen/4/eventsX", "accounts"},
		{"/api/v1/programs/7/webhooks/3/deliveries/events", "accounts"},
		{"/api/v1/programs/7/webhooks/", "accounts"},
		{"/api/v1/programs//webhooks", "accounts"},
		{"/api/v1/programs/7/webhooksX", "accounts"},
		{"/api/v1/programs/7/webhooks/3/deliveries/9", "accounts"},
		{"/api/v1/programs/7/webhooks/3/deliveries/9/retry/x", "accounts"},
		{"/api/v1/webhooks/processor", "commissions"},
	}
	for _, tc := range paths {
		r, ok := gateway.Route(tc.path)
		if !ok || r.Service != tc.want {
			t.Errorf("%s -> %+v %v, want %s", tc.path, r, ok, tc.want)
		}
		if tc.want == "webhooks" && !r.Public {
			t.Errorf("%s -> %+v: the console's routes are public", tc.path, r)
		}
	}
	for _, r := range gateway.Rules() {
		if r.Pattern == "" || !r.Public {
			continue
		}
		re := regexp.MustCompile(gateway.IngressRegex(r.Pattern))
		for _, p := range paths {
			got, _ := gateway.Route(p.path)
			if want := got.Pattern == r.Pattern; re.MatchString(p.path) != want {
				t.Errorf("regex %s on %s: %v, pattern %s matches: %v", re, p.path, re.MatchString(p.path), r.Pattern, want)
			}
		}
	}
}
