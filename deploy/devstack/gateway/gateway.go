// Package gateway is the local stand-in for the production ingress: it routes
// request paths to the service that owns them, with the same public table the
// Helm umbrella chart's Ingress uses (charts/lint.sh checks that the two
// agree), plus the admin rules that are never on the Ingress.
package gateway

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/svc-dev/svc/libs/httpkit"
)

// Rule sends paths matching Prefix or Pattern (exactly one is set) to
// Service.
//
// A Prefix matches every path that starts with it (a plain string prefix:
// "/api/v1/track/" matches /api/v1/track/click). A Pattern matches one
// whole path: the same number of "/"-separated segments, each literal
// segment equal, and each "*" any one non-empty segment
// ("/admin/v1/partners/*/balances" matches
// /admin/v1/partners/5/balances, not .../partners//balances,
// .../partners/5/balances/ nor .../partners/5/balancesX).
//
// Precedence (Route): a matching Pattern beats every Prefix; among Prefixes
// the longest wins. Patterns may not overlap (no path matches two) and
// Prefixes are unique, so exactly one rule wins; the tests check both.
// Patterns exist for paths that share a prefix with another owner
// (commissions' /admin/v1/partners/{id}/balances under accounts'
// /admin/v1/partners; the console's /api/v1/programs/{id}/commissions and
// …/payouts under accounts' /api/v1/programs). A Public Pattern is on the
// Ingress as a regular expression (IngressRegex) in the chart's second,
// regex Ingress (charts/svc/templates/ingress.yaml); only /api/v1/ paths
// may be Public Patterns (tested; charts/lint.sh and deploy/manifestcheck
// compare them with the chart).
type Rule struct {
	Prefix  string
	Pattern string
	Service string
	// Public rules are on the production ingress; the others (admin) are
	// reachable only inside the cluster and on this local gateway.
	Public bool
}

// Rules is the routing table, by owning service.
func Rules() []Rule {
	return []Rule{
		// Money routes are commissions': sale and refund share one rate
		// limit per API key, so they live in one service.
		{Prefix: "/api/v1/track/sale", Service: "commissions", Public: true},
		{Prefix: "/api/v1/track/refund", Service: "commissions", Public: true},
		{Prefix: "/api/v1/track/", Service: "tracking", Public: true},
		// The payment processor calls it from the internet; the signature,
		// not the network, is what authenticates it. Its payments are money:
		// commissions records them like the sale route.
		{Prefix: "/api/v1/webhooks/processor", Service: "commissions", Public: true},
		{Prefix: "/svc.js", Service: "tracking", Public: true},
		{Prefix: "/api/v1/cli/", Service: "accounts", Public: true},
		// The dashboard's browser sign-in and the signed-in user's
		// programs (accounts issues dashboard sessions).
		{Prefix: "/api/v1/dashboard/", Service: "accounts", Public: true},
		// The payment processor sends the console's connecting person back
		// here (accounts owns the connection).
		{Prefix: "/api/v1/processor/", Service: "accounts", Public: true},
		// The integrator's API reference (api/openapi.yaml as JSON).
		{Prefix: "/api/openapi.json", Service: "accounts", Public: true},
		{Prefix: "/api/v1/programs/me/", Service: "analytics", Public: true},
		// No trailing slash: the console's POST and GET /api/v1/programs
		// are accounts' too (as the Ingress's Prefix /api/v1/programs routes
		// them).
		{Prefix: "/api/v1/programs", Service: "accounts", Public: true},
		{Prefix: "/api/tracking/", Service: "analytics", Public: true},
		// The brand dashboard page (analytics serves it and its assets).
		{Prefix: "/dashboard", Service: "analytics", Public: true},
		// Admin API: accounts' unless listed below.
		{Prefix: "/admin/v1/", Service: "accounts", Public: false},
		// Commissions' ledger (services/commissions/README.md, "Admin API"):
		// whole namespaces accounts does not use...
		{Prefix: "/admin/v1/commissions/", Service: "commissions", Public: false},
		{Prefix: "/admin/v1/sales/", Service: "commissions", Public: false},
		{Prefix: "/admin/v1/withdrawals/", Service: "commissions", Public: false},
		// ...and sub-resources of partners and advertisers, which accounts
		// owns (/admin/v1/partners, /admin/v1/advertisers).
		{Pattern: "/admin/v1/partners/*/balances", Service: "commissions", Public: false},
		{Pattern: "/admin/v1/partners/*/withdrawals", Service: "commissions", Public: false},
		{Pattern: "/admin/v1/partners/*/notifications", Service: "commissions", Public: false},
		{Pattern: "/admin/v1/advertisers/*/notifications", Service: "commissions", Public: false},
		// The console's commissions and payouts (issue 21) are commissions',
		// under accounts' /api/v1/programs: GET …/commissions, GET|POST
		// …/payouts, POST …/payouts/{payoutId}/pay|cancel.
		{Pattern: "/api/v1/programs/*/commissions", Service: "commissions", Public: true},
		{Pattern: "/api/v1/programs/*/payouts", Service: "commissions", Public: true},
		{Pattern: "/api/v1/programs/*/payouts/*/*", Service: "commissions", Public: true},
		// The console's webhook endpoints (issue 22) are webhooks', under
		// accounts' /api/v1/programs: GET|POST …/webhooks, PATCH|DELETE
		// …/webhooks/{webhookId}, POST …/secret and …/test, GET
		// …/deliveries, POST …/deliveries/{deliveryId}/retry, GET
		// …/webhooks/notifications.
		{Pattern: "/api/v1/programs/*/webhooks", Service: "webhooks", Public: true},
		{Pattern: "/api/v1/programs/*/webhooks/*", Service: "webhooks", Public: true},
		{Pattern: "/api/v1/programs/*/webhooks/*/*", Service: "webhooks", Public: true},
		{Pattern: "/api/v1/programs/*/webhooks/*/deliveries/*/retry", Service: "webhooks", Public: true},
		// `svc listen` (issue 22): POST …/webhooks/listen and DELETE
		// …/webhooks/listen/{listenerId} match the rules above; its poll,
		// GET …/webhooks/listen/{listenerId}/events, is one segment longer.
		{Pattern: "/api/v1/programs/*/webhooks/listen/*/events", Service: "webhooks", Public: true},
	}
}

// Route picks the rule for path, or false (precedence: see Rule).
func Route(path string) (Rule, bool) { return newRouter().route(path) }

// router is the table with each Pattern split into its segments once: the
// gateway routes every request, and building the table and splitting the
// patterns per request was a tenth of its own cost.
type router struct {
	rules    []Rule
	segments [][]string // of rules[i].Pattern; nil for a Prefix
}

func newRouter() router {
	rt := router{rules: Rules()}
	rt.segments = make([][]string, len(rt.rules))
	for i, r := range rt.rules {
		if r.Pattern != "" {
			rt.segments[i] = strings.Split(r.Pattern, "/")
		}
	}
	return rt
}

func (rt router) route(path string) (Rule, bool) {
	best := -1
	for i, r := range rt.rules {
		switch {
		case r.Pattern != "":
			if match(rt.segments[i], path) {
				return r, true
			}
		case strings.HasPrefix(path, r.Prefix) && (best < 0 || len(r.Prefix) > len(rt.rules[best].Prefix)):
			best = i
		}
	}
	if best < 0 {
		return Rule{}, false
	}
	return rt.rules[best], true
}

// match reports whether path matches the pattern split into want: as many
// "/"-separated segments, literal segments equal, "*" any one non-empty
// segment.
func match(want []string, path string) bool {
	for i, w := range want {
		seg, rest, found := strings.Cut(path, "/")
		if found != (i < len(want)-1) || w == "*" && seg == "" || w != "*" && w != seg {
			return false
		}
		path = rest
	}
	return true
}

// IngressRegex is the regular expression the chart's regex Ingress carries
// for a Public Pattern: each "*" one non-empty segment ([^/]+), anchored at
// both ends, so it matches exactly the paths match does.
func IngressRegex(pattern string) string {
	segs := strings.Split(pattern, "/")
	for i, s := range segs {
		if s == "*" {
			segs[i] = "[^/]+"
		} else {
			segs[i] = regexp.QuoteMeta(s)
		}
	}
	return "^" + strings.Join(segs, "/") + "$"
}

// Ports is a service whose operations routes are served apart from its
// public ones, as platform.Instance serves them with OPS_HTTP_ADDR set:
// Public is what its public port serves (Instance.Handler), Ops what its
// operations port serves (Instance.OpsHandler). The gateway sends a
// service's Public rules to Public and its other (admin) rules to Ops, as
// the cluster does: the Ingress reaches the public port only, operators the
// operations port. Serving a Ports directly serves Public.
type Ports struct {
	Public, Ops http.Handler
}

func (p Ports) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.Public.ServeHTTP(w, r) }

// New returns the gateway handler. services maps a service name to its
// HTTP handler (a Ports, or one handler serving every route:
// platform.Instance.Handler without an operations port), run in this process: the
// gateway hands each request to its owner as it arrived, with the client's
// own address and X-Forwarded-For chain, so the service resolves the client
// exactly as it does behind the production ingress (the chain is believed
// only when the peer is in TRUSTED_PROXIES, replaced by the peer otherwise),
// and no second HTTP hop over loopback halves the click path. Services not
// running are answered 503. The gateway answers /healthz and /readyz
// itself (health.go).
func New(services map[string]http.Handler, opts ...Option) http.Handler {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	rt := newRouter()
	return withProbes(services, o, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rule, ok := rt.route(r.URL.Path)
		if !ok {
			_ = httpkit.WritePlatformError(w, http.StatusNotFound, "No route for "+r.URL.Path)
			return
		}
		h, ok := services[rule.Service]
		if !ok {
			_ = httpkit.WritePlatformError(w, http.StatusServiceUnavailable, "The "+rule.Service+" service is not part of this stack yet")
			return
		}
		if p, split := h.(Ports); split && !rule.Public {
			h = p.Ops
		}
		h.ServeHTTP(w, r)
	}))
}
