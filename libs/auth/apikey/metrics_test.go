package apikey_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/svc-dev/svc/libs/auth/apikey"
)

func TestLookupCounterCountsByOutcomeAndSharesRegistration(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c1, err := apikey.NewLookupCounter(reg)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := apikey.NewLookupCounter(reg)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := fixture(t, t0)
	a.OnLookup = c1.Observe
	for _, h := range []string{"", "Bearer svc_live_nope", "Bearer svc_live_nope2", "Bearer " + validKey} {
		_, _, _ = a.AuthenticateHeader(context.Background(), h)
	}
	c2.Observe(apikey.OutcomeError)
	want := `# HELP apikey_lookups_total Program API key store lookups, by outcome.
# TYPE apikey_lookups_total counter
apikey_lookups_total{outcome="error"} 1
apikey_lookups_total{outcome="invalid"} 2
apikey_lookups_total{outcome="ok"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "apikey_lookups_total"); err != nil {
		t.Fatal(err)
	}
}
