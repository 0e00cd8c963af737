package page_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/svc-dev/svc/services/analytics/internal/page"
)

func serve(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPage(t *testing.T) {
	cfg := page.Config{SignInURL: "/api/v1/dashboard/auth/start", SignOutURL: "/api/v1/dashboard/auth/signout", ProgramsURL: "/api/v1/dashboard/me"}
	h, err := page.Handler(cfg)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("the page, its assets and config, each locked to its own origin", func(t *testing.T) {
		for path, wantType := range map[string]string{
			"/dashboard/":                                      "text/html",
			"/dashboard/config.json":                           "application/json",
			"/dashboard/assets/app.js":                         "text/javascript",
			"/dashboard/assets/app.css":                        "text/css",
			"/dashboard/assets/vendor/uplot/uPlot.iife.min.js": "text/javascript",
			"/dashboard/assets/vendor/uplot/uPlot.min.css":     "text/css",
			"/dashboard/?program=3&period=30d":                 "text/html",
		} {
			r := serve(t, h, "GET", path)
			if r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), wantType) {
				t.Fatalf("%s: %d %q", path, r.StatusCode, r.Header.Get("Content-Type"))
			}
			csp := r.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") || r.Header.Get("X-Content-Type-Options") != "nosniff" ||
				r.Header.Get("Referrer-Policy") != "no-referrer" {
				t.Fatalf("%s: headers %v", path, r.Header)
			}
		}
		var got page.Config
		if err := json.Unmarshal([]byte(body(t, serve(t, h, "GET", "/dashboard/config.json"))), &got); err != nil || got != cfg {
			t.Fatalf("config %+v %v", got, err)
		}
		page := body(t, serve(t, h, "GET", "/dashboard/"))
		// No CDN, no inline script: every script and style is an embedded file.
		for _, bad := range []string{"http://", "https://", "<script>", "style="} {
			if strings.Contains(page, bad) {
				t.Fatalf("the page contains %q", bad)
			}
		}
		// Overview's tiles include the refunds beside revenue and
		// commission (kpi-<metric> is the element the browser test reads).
		js := body(t, serve(t, h, "GET", "/dashboard/assets/app.js"))
		for _, tile := range []string{"['totalRevenue', 'Revenue'", "['totalPartnersCommission', 'Commission'", "['totalRefunds', 'Refunds', 'int'",
			"['totalRefundedAmount', 'Refunded', 'usd'", "'data-testid': 'kpi-' + k[0]"} {
			if !strings.Contains(js, tile) {
				t.Fatalf("app.js has no %s", tile)
			}
		}
		for _, label := range []string{`<label for="program">`, `<label for="period">`, `<label for="date-from">`, `<label for="date-to">`, `<label for="dimension">`} {
			if !strings.Contains(page, label) {
				t.Fatalf("control without its label: %s", label)
			}
		}
	})

	t.Run("the console: its pages, a live status region, every field labelled, no inline handlers", func(t *testing.T) {
		page := body(t, serve(t, h, "GET", "/dashboard/"))
		for _, route := range []string{"overview", "install", "partners", "commissions", "payouts", "webhooks", "settings"} {
			if !strings.Contains(page, `<a href="#`+route+`" data-route="`+route+`">`) || !strings.Contains(page, `id="page-`+route+`"`) {
				t.Fatalf("no tab or page for #%s", route)
			}
		}
		// Webhooks: every v1 event type offered, checked but the
		// high-volume click.recorded, which is opt-in.
		for _, ev := range []string{"lead.created", "sale.created", "sale.refunded", "commission.created", "commission.approved",
			"commission.reversed", "commission.paid", "partner.enrolled", "payout.paid"} {
			if !strings.Contains(page, `type="checkbox" value="`+ev+`" checked>`) {
				t.Fatalf("the webhook form does not offer %s checked", ev)
			}
		}
		if !strings.Contains(page, `type="checkbox" value="click.recorded">`) || !strings.Contains(page, "click.recorded (high volume, opt-in)") {
			t.Fatal("click.recorded is not offered unchecked and marked high volume")
		}
		if !strings.Contains(page, `role="status" aria-live="polite"`) {
			t.Fatal("no live region saying what each change did")
		}
		// The failing-endpoint banner is outside the pages (every page
		// shows it), a status region linking to Webhooks; the Webhooks page
		// lists the notifications.
		banner, first := strings.Index(page, `id="webhook-banner"`), strings.Index(page, `<section id="page-`)
		if banner < 0 || banner > first || !strings.Contains(page, `id="webhook-banner" class="warning" role="status"`) ||
			!strings.Contains(page, `<a id="webhook-banner-link" href="#webhooks">`) {
			t.Fatal("no banner for a failing webhook endpoint above the pages")
		}
		if n, w := strings.Index(page, `id="notification-list"`), strings.Index(page, `id="page-webhooks"`); n < 0 || n < w {
			t.Fatal("the Webhooks page does not list the notifications")
		}
		// CSP (script-src 'self') would refuse inline handlers anyway:
		// none may be written.
		for _, bad := range []string{" onclick=", " onsubmit=", " onchange=", " onload=", "javascript:"} {
			if strings.Contains(page, bad) {
				t.Fatalf("the page contains %q", bad)
			}
		}
		// Every input, select and textarea has a <label for> naming it.
		fields := regexp.MustCompile(`<(?:input|select|textarea) id="([^"]+)"`).FindAllStringSubmatch(page, -1)
		if len(fields) < 20 {
			t.Fatalf("only %d fields found", len(fields))
		}
		for _, f := range fields {
			if !strings.Contains(page, `<label for="`+f[1]+`">`) {
				t.Fatalf("field %s has no label", f[1])
			}
		}
	})

	t.Run("the vendored chart library is the pinned npm release", func(t *testing.T) {
		for path, want := range map[string]string{
			"/dashboard/assets/vendor/uplot/uPlot.iife.min.js": "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f",
			"/dashboard/assets/vendor/uplot/uPlot.min.css":     "df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04",
		} {
			sum := sha256.Sum256([]byte(body(t, serve(t, h, "GET", path))))
			if hex.EncodeToString(sum[:]) != want {
				t.Fatalf("%s is not uPlot 1.6.32's (see static/vendor/uplot/README.md)", path)
			}
		}
	})

	t.Run("without the slash: redirected, query kept", func(t *testing.T) {
		r := serve(t, h, "GET", "/dashboard?program=3")
		if r.StatusCode != http.StatusMovedPermanently || r.Header.Get("Location") != "/dashboard/?program=3" {
			t.Fatalf("%d %q", r.StatusCode, r.Header.Get("Location"))
		}
	})

	t.Run("nothing else: no listings, no page under assets, no writes", func(t *testing.T) {
		for _, path := range []string{"/dashboard/assets/", "/dashboard/assets/vendor/", "/dashboard/assets/index.html", "/dashboard/nope", "/dashboard/assets/nope.js", "/dashboard/assets/../dashboard.go"} {
			if r := serve(t, h, "GET", path); r.StatusCode != 404 && r.StatusCode != 301 {
				t.Fatalf("%s: %d", path, r.StatusCode)
			}
		}
		if r := serve(t, h, "POST", "/dashboard/"); r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, HEAD" {
			t.Fatalf("POST: %d", r.StatusCode)
		}
	})
}
