package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// `make run` starts on a fresh database, starts again on the same machine,
// starts after `rm -rf .data` against the same database (also what a second
// clone does), always ends with the same demo program and keys, and a
// Ctrl-C stops it with exit status 0.
func TestMakeRunStartsAgainAndAfterDataIsDeleted(t *testing.T) {
	t.Parallel()
	cfg := newStackConfig(t)

	first := startStack(t, cfg)
	if !strings.Contains(first.Seeded, "created or updated") {
		t.Fatalf("first start did not seed: %q", first.Seeded)
	}
	wantTrackedClick(t, first)
	wantPrintedProcessorExample(t, first)
	// What a newcomer needs to try the tracker: the allowed origins and a
	// page that loads it from this gateway.
	for _, want := range []string{"http://localhost:3000", "http://127.0.0.1:5173", "http://localhost:8000", "http://127.0.0.1:8080",
		`<script src="` + first.Gateway + `/svc.js" data-program-id="` + first.ProgramID + `" async></script>`, "svc.lead("} {
		if !strings.Contains(first.output(), want) {
			t.Fatalf("make run did not print %q:\n%s", want, first.output())
		}
	}
	if err := first.stop(); err != nil {
		t.Fatalf("Ctrl-C: %v (a clean stop must exit 0)\n%s", err, first.output())
	}
	if out := first.output(); !strings.Contains(out, "stopping") || strings.Contains(strings.ToLower(out), "error") {
		t.Fatalf("unclean stop output:\n%s", out)
	}

	second := startStack(t, cfg)
	if !strings.HasSuffix(second.Seeded, "was already there") {
		t.Fatalf("second start seeded again: %q", second.Seeded)
	}
	sameDemo(t, first, second)
	wantTrackedClick(t, second)
	if err := second.stop(); err != nil {
		t.Fatal(err)
	}

	if err := os.RemoveAll(cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	third := startStack(t, cfg)
	if !strings.HasSuffix(third.Seeded, "was already there") {
		t.Fatalf("start after rm -rf .data seeded again: %q", third.Seeded)
	}
	sameDemo(t, first, third)
	wantTrackedClick(t, third)
	if err := third.stop(); err != nil {
		t.Fatal(err)
	}
}

func sameDemo(t *testing.T, a, b *stack) {
	t.Helper()
	if a.ProgramID != b.ProgramID || a.LinkCode != b.LinkCode || a.TestKey != b.TestKey || a.LiveKey != b.LiveKey {
		t.Fatalf("another demo: %s %s %s %s vs %s %s %s %s", a.ProgramID, a.LinkCode, a.TestKey, a.LiveKey, b.ProgramID, b.LinkCode, b.TestKey, b.LiveKey)
	}
}

// wantTrackedClick records a click through the gateway and a sale with the
// live key, which needs the catalog replicated to tracking.
func wantTrackedClick(t *testing.T, s *stack) {
	t.Helper()
	c := newClient(t, s, "198.51.100.77")
	r := c.click(map[string]any{"affiliate_url": "https://demo-brand.example/?via=" + s.LinkCode})
	r.want(t, 200)
	if r.str("click_id") == "" {
		t.Fatalf("no click_id: %s", r.raw)
	}
	c.withKey(s.LiveKey).sale(map[string]any{
		"transaction_id": uniqueID("txn"), "amount_cents": 4900, "currency": "USD", "click_id": r.str("click_id"),
	}).want(t, 200)
}

// wantPrintedProcessorExample runs, as pasted into bash, the signed payment
// and refund that make run printed, with a fresh click's id in cid: the
// payment is recorded and the refund applied.
func wantPrintedProcessorExample(t *testing.T, s *stack) {
	t.Helper()
	out := s.output()
	i := strings.Index(out, "A payment of 25.00 USD")
	if i < 0 {
		t.Fatalf("make run printed no processor example:\n%s", out)
	}
	lines := strings.SplitN(out[i:], "\n\n", 2)[0]
	script := strings.SplitN(lines, "\n", 2)[1]
	c := newClient(t, s, "198.51.100.78")
	r := c.click(map[string]any{"affiliate_url": "https://demo-brand.example/?via=" + s.LinkCode})
	r.want(t, 200)
	script = strings.Replace(script, "<click_id>", r.str("click_id"), 1)
	got, err := exec.Command("bash", "-c", script).CombinedOutput()
	if err != nil || !strings.Contains(string(got), `"outcome":"sale_recorded"`) || !strings.Contains(string(got), `"outcome":"refund_applied"`) {
		t.Fatalf("the printed processor example (%v):\n%s\nanswered:\n%s", err, script, got)
	}
}
