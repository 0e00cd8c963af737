package security_test

import "testing"

// The harness reaches the services through the gateway and the admin API
// through its in-cluster rules.
func TestHarness(t *testing.T) {
	t.Parallel()
	e := start(t, nil, "accounts")
	adv := e.id("POST", "/admin/v1/advertisers", map[string]any{"name": "Brand", "email": "b@brand.example"})
	if adv <= 0 {
		t.Fatalf("advertiser id %d", adv)
	}
	e.client("203.0.113.9").outsideTheDocument().do("GET", "/nowhere", nil).want(t, 404)
}
