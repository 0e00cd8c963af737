// Package gateway is the local stand-in for the production ingress: it routes
// request paths to the service that owns them, with the same table the Helm
// umbrella chart's Ingress uses (charts/lint.sh checks that the two agree).
package gateway

import (
	"net/http"
	"strings"

	"github.com/svc-dev/svc/libs/httpkit"
)

// Rule sends paths starting with Prefix to Service. Longest prefix wins.
type Rule struct {
	Prefix  string
	Service string
	// Public rules are on the production ingress; the others (admin) are
	// reachable only inside the cluster and on this local gateway.
	Public bool
}

// Rules is the routing table, by owning service.
func Rules() []Rule {
	return []Rule{
		// Sales are recorded by tracking (under /api/v1/track/); only refunds
		// wait for commissions.
		{Prefix: "/api/v1/track/refund", Service: "commissions", Public: true},
		{Prefix: "/api/v1/track/", Service: "tracking", Public: true},
		// The payment processor calls it from the internet; the signature,
		// not the network, is what authenticates it.
		{Prefix: "/api/v1/webhooks/processor", Service: "tracking", Public: true},
		{Prefix: "/svc.js", Service: "tracking", Public: true},
		{Prefix: "/api/v1/cli/", Service: "accounts", Public: true},
		// The integrator's API reference (api/openapi.yaml as JSON).
		{Prefix: "/api/openapi.json", Service: "accounts", Public: true},
		{Prefix: "/api/v1/programs/me/", Service: "analytics", Public: true},
		{Prefix: "/api/v1/programs/", Service: "accounts", Public: true},
		{Prefix: "/api/tracking/", Service: "analytics", Public: true},
		{Prefix: "/admin/v1/", Service: "accounts", Public: false},
	}
}

// Route picks the rule for path, or false.
func Route(path string) (Rule, bool) {
	var best Rule
	found := false
	for _, r := range Rules() {
		if strings.HasPrefix(path, r.Prefix) && len(r.Prefix) > len(best.Prefix) {
			best, found = r, true
		}
	}
	return best, found
}

// New returns the gateway handler. services maps a service name to its
// whole HTTP handler (platform.Instance.Handler), run in this process: the
// gateway hands each request to its owner as it arrived, with the client's
// own address and X-Forwarded-For chain, so the service resolves the client
// exactly as it does behind the production ingress (the chain is believed
// only when the peer is in TRUSTED_PROXIES, replaced by the peer otherwise),
// and no second HTTP hop over loopback halves the click path. Services not
// running are answered 503.
func New(services map[string]http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rule, ok := Route(r.URL.Path)
		if !ok {
			_ = httpkit.WritePlatformError(w, http.StatusNotFound, "No route for "+r.URL.Path)
			return
		}
		h, ok := services[rule.Service]
		if !ok {
			_ = httpkit.WritePlatformError(w, http.StatusServiceUnavailable, "The "+rule.Service+" service is not part of this stack yet")
			return
		}
		h.ServeHTTP(w, r)
	})
}
