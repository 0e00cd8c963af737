package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A new brand's whole journey in real Chromium, from `make run`'s binary
// and without the admin token (issue 21): a person the stack has never
// seen signs up through the stand-in identity provider, creates a program
// holding commissions 0 days, a live key, allows the origin of a shop page
// the driver serves, invites a partner (approved at once), opens the shop
// through the partner's link (the tracker records the click), connects
// the stand-in processor and sends a test payment from its own form, sees
// the sale and its commission (approved by the hold rule) on Overview and
// Commissions, opens a payout of it and marks it paid. Every console page
// at 1440 and 390 px, audited with axe-core, kept as
// journey-<page>-<width>.png under .artifacts/console/ (TEST_ARTIFACTS_DIR
// to move them). Then the public API, with the new person's own session,
// answers what the pages did. Its own stack: the dev provider signs in one
// person per stack (DEV_LOGIN_EMAIL), and this one must be new.
func TestConsoleJourneyInRealBrowser(t *testing.T) {
	t.Parallel()
	node, chromium, driverDir := requireDashboardBrowser(t)
	if _, err := os.Stat(filepath.Join(driverDir, "node_modules", "axe-core", "axe.min.js")); err != nil {
		t.Fatalf("axe-core is missing: make test-deps (npm ci in services/analytics/browsertest)")
	}
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	email := "newbrand-" + hex.EncodeToString(nonce[:]) + "@example.com"
	cfg := newStackConfig(t)
	cfg.Env = []string{"DEV_LOGIN_EMAIL=" + email}
	s := startStack(t, cfg)
	reference := "tr_journey_" + hex.EncodeToString(nonce[:])

	shots := os.Getenv("TEST_ARTIFACTS_DIR")
	if shots == "" {
		shots = filepath.Join(repoRoot, ".artifacts")
	}
	shots = filepath.Join(shots, "console")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "journey.spec.mjs", "--base="+s.Gateway, "--email="+email,
		"--reference="+reference, "--shots="+shots, "--chromium="+chromium)
	cmd.Dir = driverDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("journey driver failed (%v):\n%s", err, stderr.String())
	}
	t.Logf("journey driver: %s", strings.TrimSpace(stdout.String()))
	var ran struct {
		Program string `json:"program"`
		Partner string `json:"partner"`
		ClickID string `json:"click_id"`
		Origin  string `json:"origin"`
		Payout  string `json:"payout"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &ran); err != nil || ran.Program == "" || ran.Partner == "" || ran.ClickID == "" || ran.Payout == "" {
		t.Fatalf("driver output %q: %v", stdout.String(), err)
	}

	// The new person's own session: the program is theirs alone, held 0
	// days, with the one live key and the shop's origin.
	api := newClient(t, s, "198.51.100.94").withKey(signInForToken(t, s))
	progs, _ := api.do("GET", "/api/v1/programs", nil).want(t, 200).get("data").([]any)
	if len(progs) != 1 {
		t.Fatalf("the new person's programs: %v", progs)
	}
	if p := progs[0].(map[string]any); fmt.Sprint(p["id"]) != ran.Program || num(p["hold_days"]) != 0 {
		t.Fatalf("the program the console made: %v", p)
	}
	base := "/api/v1/programs/" + ran.Program
	keys, _ := api.do("GET", base+"/keys", nil).want(t, 200).get("data").([]any)
	if len(keys) != 1 || keys[0].(map[string]any)["mode"] != "live" {
		t.Fatalf("keys after the journey: %v", keys)
	}
	origins, _ := api.do("GET", base+"/settings", nil).want(t, 200).get("data", "allowed_origins").([]any)
	if len(origins) != 1 || origins[0] != ran.Origin {
		t.Fatalf("allowed origins after the journey: %v (the shop is %s)", origins, ran.Origin)
	}

	// One sale commission, of the partner and the shop's click, approved
	// by the hold rule: 10 % of 49.00 USD.
	comms, _ := api.do("GET", base+"/commissions", nil).want(t, 200).get("data").([]any)
	if len(comms) != 1 {
		t.Fatalf("commissions after the journey: %v", comms)
	}
	c := comms[0].(map[string]any)
	if c["kind"] != "sale" || c["status"] != "approved" || num(c["amount"]) != 490 || c["currency"] != "USD" || c["test"] != false ||
		fmt.Sprint(c["partner_id"]) != ran.Partner || c["customer_click_id"] != ran.ClickID || c["approved_at"] == nil || c["transaction_id"] == nil {
		t.Fatalf("the journey's commission: %v", c)
	}

	// The payout, paid with its reference; the partner's money all paid
	// out: available 0.
	payouts := api.do("GET", base+"/payouts", nil).want(t, 200)
	balances, _ := payouts.get("data", "balances").([]any)
	paid, _ := payouts.get("data", "payouts").([]any)
	if len(balances) != 1 || len(paid) != 1 {
		t.Fatalf("payouts after the journey: %s", payouts.raw)
	}
	b := balances[0].(map[string]any)
	if fmt.Sprint(b["partner_id"]) != ran.Partner || b["currency"] != "USD" || num(b["earned"]) != 490 || num(b["paid"]) != 490 ||
		num(b["open_payouts"]) != 0 || num(b["balance"]) != 0 || num(b["available"]) != 0 {
		t.Fatalf("the partner's money after the payout: %v", b)
	}
	p := paid[0].(map[string]any)
	if fmt.Sprint(p["id"]) != ran.Payout || fmt.Sprint(p["partner_id"]) != ran.Partner || p["status"] != "paid" || num(p["amount"]) != 490 || p["reference"] != reference {
		t.Fatalf("the payout: %v (reference %s)", p, reference)
	}

	for _, page := range []string{"create", "overview", "install", "partners", "commissions", "payouts", "settings"} {
		for _, w := range []string{"1440", "390"} {
			f := filepath.Join(shots, "journey-"+page+"-"+w+".png")
			if st, err := os.Stat(f); err != nil || st.Size() == 0 {
				t.Fatalf("screenshot %s not saved: %v", f, err)
			}
		}
	}
}
