package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The newcomer's path, in real Chromium (Debian's, driven by
// playwright-core): `make run`, a few clicks on the demo link, a lead and a
// sale, then the printed dashboard link. The page signs the demo owner in
// through the dev provider, and the figures it shows for the demo program
// are the ones the performance and status routes answer. Before that, a
// link carrying a session the tab did not ask for (login CSRF) is refused
// and the sign-in still works. Screenshots at
// 1440 and 390 px are kept as test artifacts (TEST_ARTIFACTS_DIR, default
// .artifacts/ at the repository root, ignored by git).
func TestDashboardInRealBrowser(t *testing.T) {
	t.Parallel()
	node, chromium, driverDir := requireDashboardBrowser(t)
	s := startStack(t, newStackConfig(t))

	c := newClient(t, s, "198.51.100.90")
	var clickIDs []string
	for i := 0; i < 3; i++ {
		r := c.click(map[string]any{"affiliate_url": "https://demo-brand.example/pricing?via=" + s.LinkCode + "&utm_source=newsletter"})
		r.want(t, 200)
		clickIDs = append(clickIDs, r.str("click_id"))
	}
	c.withKey(s.LiveKey).lead(map[string]any{"click_id": clickIDs[0], "customer_key": uniqueID("newcomer")}).want(t, 200)
	c.withKey(s.LiveKey).sale(map[string]any{
		"transaction_id": uniqueID("order"), "amount_cents": 4900, "currency": "USD", "click_id": clickIDs[0],
	}).want(t, 200)
	// A euro sale: converted at the newest shipped rate, earlier than
	// today, so the page says one day's money used an earlier rate.
	c.withKey(s.LiveKey).sale(map[string]any{
		"transaction_id": uniqueID("order"), "amount_cents": 2000, "currency": "EUR", "click_id": clickIDs[1],
	}).want(t, 200)

	token := signInForToken(t, s)
	api := newClient(t, s, "198.51.100.91").withKey(token)
	var perf reply
	waitFor(t, "the clicks, the lead and the sale in the performance route", time.Minute, func() bool {
		perf = api.do("GET", "/api/tracking/performance/"+s.ProgramID+"?period=7d", nil).want(t, 200)
		m, _ := perf.get("metrics").(map[string]any)
		return num(m["totalClicks"]) >= 3 && num(m["totalLeads"]) >= 1 && num(m["totalConversions"]) >= 2 && num(m["totalSales"]) >= 2 && num(m["totalRevenue"]) >= 69
	})
	status := api.do("GET", "/api/tracking/status/"+s.ProgramID, nil).want(t, 200)
	var sources, partners reply
	waitFor(t, "the sale under its source and its partner", time.Minute, func() bool {
		sources = api.do("GET", "/api/tracking/sources/"+s.ProgramID+"?period=7d", nil).want(t, 200)
		partners = api.do("GET", "/api/tracking/partners/"+s.ProgramID+"?period=7d", nil).want(t, 200)
		refs, _ := sources.get("data", "referrers").([]any)
		tops, _ := partners.get("data").([]any)
		return len(refs) > 0 && num(refs[0].(map[string]any)["revenue"]) >= 69 && len(tops) > 0 && num(tops[0].(map[string]any)["revenue"]) >= 69 &&
			num(tops[0].(map[string]any)["commission"]) >= 6.9
	})
	// The key route answers the same figures for the key's program.
	c.withKey(s.LiveKey).do("GET", "/api/v1/programs/me/analytics/sources?period=7d", nil).want(t, 200)
	// A time zone's own days (documented beyond the spec).
	api.do("GET", "/api/tracking/performance/"+s.ProgramID+"?period=7d&timezone=Asia/Kolkata", nil).want(t, 200)
	topSource := sources.get("data", "referrers").([]any)[0].(map[string]any)
	topPartner := partners.get("data").([]any)[0].(map[string]any)

	m := perf.get("metrics").(map[string]any)
	days, _ := perf.get("data").([]any)
	steps := map[string]string{}
	for _, step := range []string{"pageview", "referrals", "payments"} {
		steps[step] = status.str("data", "stepStatuses", step)
	}
	estimated, _ := perf.get("meta").(map[string]any)["fxEstimatedDays"].(float64)
	expect := map[string]any{
		"period":    "7d",
		"days":      len(days),
		"steps":     steps,
		"estimated": int(estimated), // days converted at an earlier rate (0: none)
		"text": map[string]string{
			"kpi-totalClicks":             integer(m["totalClicks"]),
			"kpi-totalLeads":              integer(m["totalLeads"]),
			"kpi-totalConversions":        integer(m["totalConversions"]),
			"kpi-totalRevenue":            dollars(m["totalRevenue"]),
			"kpi-totalPartnersCommission": dollars(m["totalPartnersCommission"]),
			"kpi-conversionRate":          fmt.Sprintf("%.2f%%", num(m["conversionRate"])),
			"kpi-averageOrderValue":       dollars(m["averageOrderValue"]),
			"kpi-totalSales":              integer(m["totalSales"]),
			"sources-0-name":              fmt.Sprint(topSource["name"]),
			"sources-0-clicks":            integer(topSource["clicks"]),
			"sources-0-revenue":           dollars(topSource["revenue"]),
			"partners-0-name":             fmt.Sprint(topPartner["name"]),
			"partners-0-revenue":          dollars(topPartner["revenue"]),
			"partners-0-commission":       dollars(topPartner["commission"]),
		},
	}
	expectJSON, _ := json.Marshal(expect)
	shots := os.Getenv("TEST_ARTIFACTS_DIR")
	if shots == "" {
		shots = filepath.Join(repoRoot, ".artifacts")
	}
	shots = filepath.Join(shots, "dashboard")

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// The foreign session: a real one (the owner's, signed in outside this
	// tab), which the page must refuse to take from a link.
	cmd := exec.CommandContext(ctx, node, "dashboard.spec.mjs", "--base="+s.Gateway, "--program-id="+s.ProgramID,
		"--expect="+string(expectJSON), "--shots="+shots, "--chromium="+chromium, "--foreign-session="+token)
	cmd.Dir = driverDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		t.Fatalf("browser driver failed (%v) expecting %s:\n%s", err, expectJSON, stderr.String())
	}
	t.Logf("dashboard driver: %s (expected %s)", strings.TrimSpace(stdout.String()), expectJSON)
	for _, f := range []string{"dashboard-1440.png", "dashboard-390.png"} {
		if st, err := os.Stat(filepath.Join(shots, f)); err != nil || st.Size() == 0 {
			t.Fatalf("screenshot %s not saved: %v", f, err)
		}
	}
}

// The brand's console in real Chromium, signed in through the page as the
// demo owner of `make run`'s stack: the flows whose routes are live (create
// a program, create a key and see it masked, allow an origin, invite a
// partner and disable its link, add a team member) and every page at 1440
// and 390 px, each audited with axe-core (no serious or critical
// violation). Screenshots <page>-<width>.png under .artifacts/console/
// (TEST_ARTIFACTS_DIR to move them).
func TestConsoleInRealBrowser(t *testing.T) {
	t.Parallel()
	node, chromium, driverDir := requireDashboardBrowser(t)
	if _, err := os.Stat(filepath.Join(driverDir, "node_modules", "axe-core", "axe.min.js")); err != nil {
		t.Fatalf("axe-core is missing: make test-deps (npm ci in services/analytics/browsertest)")
	}
	s := startStack(t, newStackConfig(t))
	// A click on the demo link, so Overview has a figure to draw.
	newClient(t, s, "198.51.100.92").click(map[string]any{"affiliate_url": "https://demo-brand.example/?via=" + s.LinkCode}).want(t, 200)

	shots := os.Getenv("TEST_ARTIFACTS_DIR")
	if shots == "" {
		shots = filepath.Join(repoRoot, ".artifacts")
	}
	shots = filepath.Join(shots, "console")
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "console.spec.mjs", "--base="+s.Gateway, "--program-id="+s.ProgramID,
		"--shots="+shots, "--chromium="+chromium)
	cmd.Dir = driverDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("console driver failed (%v):\n%s", err, stderr.String())
	}
	t.Logf("console driver: %s", strings.TrimSpace(stdout.String()))
	var ran struct {
		Program string `json:"program"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &ran); err != nil || ran.Program == "" {
		t.Fatalf("driver output %q: %v", stdout.String(), err)
	}
	// What the page changed is what the routes now answer: one live key
	// (the test key was revoked), the one origin added (the refused one
	// not stored), the colleague gone from the team and the owner kept.
	api := newClient(t, s, "198.51.100.93").withKey(signInForToken(t, s))
	keys, _ := api.do("GET", "/api/v1/programs/"+ran.Program+"/keys", nil).want(t, 200).get("data").([]any)
	if len(keys) != 1 || keys[0].(map[string]any)["mode"] != "live" {
		t.Fatalf("keys after the console: %v", keys)
	}
	origins, _ := api.do("GET", "/api/v1/programs/"+ran.Program+"/settings", nil).want(t, 200).get("data", "allowed_origins").([]any)
	if len(origins) != 1 || origins[0] != "http://localhost:8000" {
		t.Fatalf("allowed origins after the console: %v", origins)
	}
	members, _ := api.do("GET", "/api/v1/programs/"+ran.Program+"/members", nil).want(t, 200).get("data").([]any)
	active := 0
	for _, m := range members {
		m := m.(map[string]any)
		if m["active"] == true {
			active++
			if !strings.HasPrefix(fmt.Sprint(m["email"]), "owner@") {
				t.Fatalf("an active member the console removed: %v", m)
			}
		}
	}
	if active != 1 || len(members) != 2 {
		t.Fatalf("team after the console: %v", members)
	}
	for _, p := range []string{"overview", "install", "partners", "commissions", "payouts", "webhooks", "settings"} {
		for _, w := range []string{"1440", "390"} {
			f := filepath.Join(shots, p+"-"+w+".png")
			if st, err := os.Stat(f); err != nil || st.Size() == 0 {
				t.Fatalf("screenshot %s not saved: %v", f, err)
			}
		}
	}
}

// signInForToken runs the dashboard sign-in as a browser would (start,
// the dev provider's form, the callback) and returns the session token
// from the fragment of the callback's redirect.
func signInForToken(t *testing.T, s *stack) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(method, u string, body io.Reader) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, u, body)
		if body != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := get("GET", s.Gateway+"/api/v1/dashboard/auth/start?return_to=/dashboard/", nil)
	resp.Body.Close()
	resp = get("GET", resp.Header.Get("Location"), nil)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := formAction.FindStringSubmatch(string(page))
	if m == nil {
		t.Fatalf("provider page: %s", page)
	}
	form := url.Values{}
	for _, f := range formField.FindAllStringSubmatch(string(page), -1) {
		form.Set(html.UnescapeString(f[1]), html.UnescapeString(f[2]))
	}
	resp = get("POST", html.UnescapeString(m[1]), strings.NewReader(form.Encode()))
	resp.Body.Close()
	_, frag, _ := strings.Cut(resp.Header.Get("Location"), "#")
	q, _ := url.ParseQuery(frag)
	if q.Get("session") == "" {
		t.Fatalf("callback %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return q.Get("session")
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

// integer and dollars format as the page does (en-US grouping).
func integer(v any) string { return group(strconv.FormatInt(int64(num(v)), 10)) }

func dollars(v any) string {
	s := strconv.FormatFloat(num(v), 'f', 2, 64)
	whole, cents, _ := strings.Cut(s, ".")
	return "$" + group(whole) + "." + cents
}

func group(digits string) string {
	neg := strings.HasPrefix(digits, "-")
	digits = strings.TrimPrefix(digits, "-")
	var b strings.Builder
	for i, r := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// requireDashboardBrowser fails (never skips: CI must not pass without the
// browser test) when a tool is missing, naming the fix.
func requireDashboardBrowser(t *testing.T) (node, chromium, driverDir string) {
	t.Helper()
	var missing []string
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node is not on PATH: apt-get install -y nodejs npm")
	}
	driverDir = filepath.Join(repoRoot, "services", "analytics", "browsertest")
	if _, err := os.Stat(filepath.Join(driverDir, "node_modules", "playwright-core", "package.json")); err != nil {
		missing = append(missing, "playwright-core is missing: make test-deps (npm ci in services/analytics/browsertest)")
	}
	chromium = os.Getenv("CHROMIUM_PATH")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		missing = append(missing, chromium+" is missing: apt-get install -y chromium (or set CHROMIUM_PATH)")
	}
	if len(missing) > 0 {
		t.Fatalf("the dashboard's real-browser test needs:\n  %s", strings.Join(missing, "\n  "))
	}
	return node, chromium, driverDir
}
