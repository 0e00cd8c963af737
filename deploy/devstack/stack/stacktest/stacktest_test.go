package stacktest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/svc-dev/svc/deploy/devstack/stack"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
)

// The real services start with the test's variables and the stack's wiring:
// accounts knows tracking's URL and that tracking and commissions replicate
// the catalog.
func TestStartRunsTheStack(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t, map[string]string{"ADMIN_RATE_LIMIT": "7"})
	var want []string
	for _, svc := range stack.Services() {
		want = append(want, svc.Spec.Name)
	}
	if got := strings.Join(s.Names(), ","); got != strings.Join(want, ",") {
		t.Fatalf("started %s, want %s", got, strings.Join(want, ","))
	}
	for _, name := range s.Names() {
		resp, err := http.Get(s.URL(name) + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s /healthz: %d", name, resp.StatusCode)
		}
	}
	read := s.Instance("accounts").Platform().Env.Values()
	if read["TRACKING_URL"] != s.URL("tracking") || read["CATALOG_CONSUMERS"] != "tracking,commissions,analytics,webhooks" ||
		read["ADMIN_TOKEN"] != stacktest.AdminToken || read["ADMIN_RATE_LIMIT"] != "7" {
		t.Fatalf("accounts read TRACKING_URL %q (tracking is %s), CATALOG_CONSUMERS %q, ADMIN_TOKEN %q, ADMIN_RATE_LIMIT %q",
			read["TRACKING_URL"], s.URL("tracking"), read["CATALOG_CONSUMERS"], read["ADMIN_TOKEN"], read["ADMIN_RATE_LIMIT"])
	}
	// Commissions asks tracking for attribution decisions with the
	// internal token tracking holds.
	c, tr := s.Instance("commissions").Platform().Env.Values(), s.Instance("tracking").Platform().Env.Values()
	if c["TRACKING_URL"] != s.URL("tracking") || c["INTERNAL_TOKEN"] != stacktest.InternalToken || tr["INTERNAL_TOKEN"] != stacktest.InternalToken {
		t.Fatalf("commissions read TRACKING_URL %q (tracking is %s), INTERNAL_TOKEN set %v; tracking's INTERNAL_TOKEN set %v",
			c["TRACKING_URL"], s.URL("tracking"), c["INTERNAL_TOKEN"] == stacktest.InternalToken, tr["INTERNAL_TOKEN"] == stacktest.InternalToken)
	}
}

// A subset starts alone, without the wiring to services left out.
func TestStartOnly(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t, nil, "accounts")
	if got := strings.Join(s.Names(), ","); got != "accounts" || s.Instance("tracking") != nil {
		t.Fatalf("started %s", got)
	}
	read := s.Instance("accounts").Platform().Env.Values()
	if read["TRACKING_URL"] != "" || read["CATALOG_CONSUMERS"] != "" {
		t.Fatalf("accounts alone read TRACKING_URL %q, CATALOG_CONSUMERS %q", read["TRACKING_URL"], read["CATALOG_CONSUMERS"])
	}
}

// A service left elsewhere is not started; its environment is the one
// Start would have given it: the shared database and tokens, its schema
// and the URLs of the services it calls.
func TestStartElsewhere(t *testing.T) {
	t.Parallel()
	s, envs := stacktest.StartElsewhere(t, map[string]string{"DELIVERY_TIMEOUT": "3s"}, []string{"webhooks"}, "accounts", "webhooks")
	if got := strings.Join(s.Names(), ","); got != "accounts" || s.Instance("webhooks") != nil {
		t.Fatalf("started %s", got)
	}
	accounts := s.Instance("accounts").Platform().Env.Values()
	w := envs["webhooks"]
	if len(envs) != 1 || w["DATABASE_URL"] == "" || w["DATABASE_URL"] != accounts["DATABASE_URL"] || w["DB_SCHEMA"] != "webhooks" ||
		w["ACCOUNTS_URL"] != s.OpsURL("accounts") || w["INTERNAL_TOKEN"] != stacktest.InternalToken || w["DELIVERY_TIMEOUT"] != "3s" ||
		w["CATALOG_CONSUMERS"] != "webhooks" || accounts["CATALOG_CONSUMERS"] != "webhooks" {
		t.Fatalf("webhooks' environment %v; accounts read DATABASE_URL %q, CATALOG_CONSUMERS %q", w, accounts["DATABASE_URL"], accounts["CATALOG_CONSUMERS"])
	}
}
