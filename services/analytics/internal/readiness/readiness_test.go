package readiness_test

import (
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/services/analytics/internal/readiness"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func statuses(r readiness.Readiness) string {
	var out []string
	for _, c := range r.Checks {
		out = append(out, c.Name+"="+c.Status)
	}
	return strings.Join(out, " ")
}

func TestEvaluate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    readiness.Inputs
		ready bool
		want  string
	}{
		{"a new program: nothing seen, processor not connected", readiness.Inputs{Now: now}, false,
			"api_key=pass tracker=fail leads=fail payment_tracking=fail sales=warn event_freshness=warn"},
		{"wired, no sale yet (s2s), traffic today", readiness.Inputs{Clicks: 3, Leads: 1, PaymentTrackingMode: "s2s", LastEvent: now.Add(-time.Hour), Now: now}, true,
			"api_key=pass tracker=pass leads=pass payment_tracking=pass sales=warn event_freshness=pass"},
		{"everything, processor connected, but quiet for two days", readiness.Inputs{Clicks: 3, Leads: 2, Sales: 1, PaymentTrackingMode: "processor_connect",
			ProcessorStatus: "connected", LastEvent: now.Add(-48 * time.Hour), Now: now}, true,
			"api_key=pass tracker=pass leads=pass payment_tracking=pass sales=pass event_freshness=warn"},
		{"processor pending onboarding", readiness.Inputs{Clicks: 1, Leads: 1, PaymentTrackingMode: "processor_connect", ProcessorStatus: "pending", LastEvent: now, Now: now}, false,
			"api_key=pass tracker=pass leads=pass payment_tracking=fail sales=warn event_freshness=pass"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readiness.Evaluate(tc.in)
			if got.Ready != tc.ready || statuses(got) != tc.want {
				t.Fatalf("ready %v, %s; want %v, %s", got.Ready, statuses(got), tc.ready, tc.want)
			}
			for _, c := range got.Checks {
				if c.Detail == "" || !strings.HasSuffix(c.Detail, ".") {
					t.Fatalf("check %s without a sentence: %q", c.Name, c.Detail)
				}
			}
		})
	}
	t.Run("details name what was seen and what to do", func(t *testing.T) {
		got := readiness.Evaluate(readiness.Inputs{TestKey: true, Clicks: 1, Leads: 2, ProcessorStatus: "pending", LastEvent: now, Now: now})
		want := []string{"The test API key is valid.", "1 click recorded.", "2 leads recorded.",
			"Payment processor pending: connect it, or set paymentTrackingMode to s2s and report sales from your server.",
			"No sale recorded yet: sales appear once a referred customer pays.", "The latest event was at 2026-11-23T12:00:00Z."}
		for i, c := range got.Checks {
			if c.Detail != want[i] {
				t.Fatalf("%s: %q, want %q", c.Name, c.Detail, want[i])
			}
		}
	})
}
