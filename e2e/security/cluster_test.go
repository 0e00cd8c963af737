package security_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/deploy/devstack/stack"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// In the cluster the admin API, the service-to-service routes and /metrics
// are served on each service's operations port (OPS_HTTP_ADDR), which no
// Service behind the Ingress exposes; the public port, the only one the
// Ingress reaches, answers them 404 like any unknown path (issue 23: any
// pod reached /admin/v1/*, tracking's /internal/v1/attributions and
// /metrics on the public port). The stack runs as the chart runs it; the
// gateway's admin rules reach the operations ports, and commissions asks
// tracking for attributions on tracking's operations port.
func TestOperationsRoutesAreOnlyOnTheOperationsPort(t *testing.T) {
	e := start(t, map[string]string{"OPS_HTTP_ADDR": "127.0.0.1:0"}, "tracking", "commissions", "accounts")

	// The admin API through the gateway's in-cluster rules (on the
	// operations ports of accounts and commissions).
	adv := e.id("POST", "/admin/v1/advertisers", map[string]any{"name": "Brand", "email": "b@brand.example"})
	prog := e.id("POST", "/admin/v1/programs", map[string]any{"advertiser_id": adv, "name": "Cluster", "domain": "brand.example",
		"commission_type": "percent", "commission_rate": 10, "allowed_origins": []string{"https://shop.example"}})
	partner := e.id("POST", "/admin/v1/partners", map[string]any{"name": "P", "email": "p@partners.example"})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", prog), map[string]any{"partner_id": partner, "approved": true})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/links", prog), map[string]any{"partner_id": partner, "code": "CLUSTER", "active": true})
	key := e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/keys", prog), map[string]any{"test": false})["key"].(string)
	e.sync()
	e.admin("GET", fmt.Sprintf("/admin/v1/partners/%d/balances", partner), nil)

	t.Run("a live sale is attributed: commissions reaches tracking's internal route on its operations port", func(t *testing.T) {
		click := e.client("203.0.113.31").do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://brand.example/?via=CLUSTER"}).want(t, 200)
		clickID := click.str("click_id")
		if clickID == "" {
			t.Fatalf("click without click_id: %s", click.Raw)
		}
		txn := uniqueID("cluster")
		sale := e.client("203.0.113.31").withKey(key).do("POST", "/api/v1/track/sale",
			map[string]any{"transaction_id": txn, "amount_cents": 10000, "currency": "USD", "click_id": clickID}).want(t, 200)
		if sale.str("click_id") != clickID || sale.str("customer_status") != "conversion" || sale.get("commission") == nil {
			t.Fatalf("sale not attributed to the click: %s", sale.Raw)
		}
	})

	// Each service's two ports, called directly as a pod in the cluster
	// would: the public port (behind the Ingress's Services) and the
	// operations port.
	internalBody := `{"program_id":1,"click_id":"none","transaction_id":"t"}`
	tests := []struct {
		name, service, method, path, auth, body string
		// onOps is the operations port's status: the route exists there
		// (the public port answers 404).
		onOps       int
		opsContains string
	}{
		{"accounts' admin API", "accounts", "GET", fmt.Sprintf("/admin/v1/programs/%d", prog), "Bearer " + stacktest.AdminToken, "", 200, `"Cluster"`},
		{"accounts' admin API without a token", "accounts", "GET", "/admin/v1/programs", "", "", 401, ""},
		{"commissions' ledger admin API", "commissions", "GET", fmt.Sprintf("/admin/v1/partners/%d/balances", partner), "Bearer " + stacktest.AdminToken, "", 200, `"data"`},
		{"tracking's attributions for commissions", "tracking", "POST", "/internal/v1/attributions", "Bearer " + stacktest.InternalToken, internalBody, 0, ""},
		{"tracking's attributions without a token", "tracking", "POST", "/internal/v1/attributions", "", internalBody, 401, ""},
		{"accounts' metrics", "accounts", "GET", "/metrics", "", "", 200, "http_requests_total"},
		{"tracking's metrics", "tracking", "GET", "/metrics", "", "", 200, "http_requests_total"},
		{"commissions' metrics", "commissions", "GET", "/metrics", "", "", 200, "http_requests_total"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			public, ops := e.Stack.URL(tt.service), e.Stack.OpsURL(tt.service)
			if public == ops {
				t.Fatalf("%s has one port (%s)", tt.service, public)
			}
			got := direct(t, tt.method, public+tt.path, tt.auth, tt.body)
			if got.status != http.StatusNotFound || !strings.Contains(got.body, "No route for "+tt.method+" "+tt.path) ||
				!strings.HasPrefix(got.header.Get("Content-Type"), "application/json") {
				t.Errorf("public port: %d %s %q, want the 404 of an unknown path", got.status, got.header.Get("Content-Type"), got.body)
			}
			got = direct(t, tt.method, ops+tt.path, tt.auth, tt.body)
			switch {
			case tt.onOps == 0 && (got.status == http.StatusNotFound || got.status == http.StatusUnauthorized || got.status >= 500):
				// The route's own answer to an authenticated call (whatever
				// it decides for an unknown click), not 404 or 401.
				t.Errorf("operations port: %d %q, want the route's answer", got.status, got.body)
			case tt.onOps != 0 && (got.status != tt.onOps || !strings.Contains(got.body, tt.opsContains)):
				t.Errorf("operations port: %d %q, want %d with %q", got.status, got.body, tt.onOps, tt.opsContains)
			}
		})
	}
	t.Run("through the gateway (the Ingress's table): no route reaches internal or metrics", func(t *testing.T) {
		for _, path := range []string{"/internal/v1/attributions", "/metrics"} {
			r := e.client("203.0.113.32").outsideTheDocument().do("GET", path, nil).want(t, http.StatusNotFound)
			if !strings.Contains(r.Raw, "No route for "+path) {
				t.Errorf("%s: %s", path, r.Raw)
			}
		}
	})
	t.Run("probes answer on both ports", func(t *testing.T) {
		for _, name := range []string{"accounts", "tracking", "commissions"} {
			for _, base := range []string{e.Stack.URL(name), e.Stack.OpsURL(name)} {
				for _, path := range []string{"/healthz", "/readyz"} {
					if got := direct(t, "GET", base+path, "", ""); got.status != http.StatusOK {
						t.Errorf("%s %s%s: %d %q", name, base, path, got.status, got.body)
					}
				}
			}
		}
	})
}

type directReply struct {
	status int
	header http.Header
	body   string
}

// direct calls a service's port without the gateway, as another pod would.
func direct(t *testing.T, method, url, auth, body string) directReply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return directReply{resp.StatusCode, resp.Header, string(raw)}
}

// A service refuses to start with a shared token shorter than 32 bytes
// (a short ADMIN_TOKEN or INTERNAL_TOKEN can be guessed), and says which
// variable, never its value. Unset stays allowed where it was (tracking and
// commissions without INTERNAL_TOKEN, commissions without ADMIN_TOKEN).
func TestServicesRefuseShortTokens(t *testing.T) {
	t.Parallel()
	const short = "short-s3cret" // 12 bytes
	env := platformtest.With(platformtest.Env(t), stacktest.Defaults())
	for _, tc := range []struct {
		service, variable string
	}{
		{"accounts", "ADMIN_TOKEN"},
		{"commissions", "ADMIN_TOKEN"},
		{"commissions", "INTERNAL_TOKEN"},
		{"tracking", "INTERNAL_TOKEN"},
	} {
		t.Run(tc.service+" "+tc.variable, func(t *testing.T) {
			vars := platformtest.With(env, map[string]string{tc.variable: short})
			st, err := stack.Start(context.Background(), stack.Options{Env: func(k string) string { return vars[k] }, Only: []string{tc.service}})
			if err == nil {
				_ = st.Close()
				t.Fatalf("%s started with a %d-byte %s", tc.service, len(short), tc.variable)
			}
			if want := tc.variable + " is 12 bytes: a token must be at least 32 bytes"; !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not say %q", err, want)
			}
			if strings.Contains(err.Error(), short) {
				t.Fatalf("error %q shows the token", err)
			}
		})
	}
	t.Run("unset where optional", func(t *testing.T) {
		vars := platformtest.With(env, map[string]string{"ADMIN_TOKEN": "", "INTERNAL_TOKEN": ""})
		st, err := stack.Start(context.Background(), stack.Options{Env: func(k string) string { return vars[k] }, Only: []string{"tracking", "commissions"}})
		if err != nil {
			t.Fatalf("tracking and commissions without tokens: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
