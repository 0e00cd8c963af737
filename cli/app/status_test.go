package app_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/svc-dev/svc/cli/app"
)

// Every recommendation of status names the command that does it (the
// payments step also the dashboard link where it is done); a complete
// program gets none.
func TestStatusNextStepsNameCommands(t *testing.T) {
	complete := statusBody()
	complete["stepStatuses"] = map[string]any{"pageview": "complete", "referrals": "complete", "payments": "complete"}
	pending := statusBody()
	pending["stepStatuses"] = map[string]any{"pageview": "pending", "referrals": "pending", "payments": "pending"}
	for name, body := range map[string]map[string]any{"complete": complete, "pending": pending} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t)
			f.on("GET /api/v1/cli/status", func(w http.ResponseWriter, _ *http.Request, _ int) {
				writeJSON(w, 200, map[string]any{"data": body})
			})
			c := newCLI(t, f.URL())
			c.env[app.EnvAPIKey] = fakeKey
			r := c.run("status")
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			if name == "complete" {
				mustNotContain(t, "stdout", r.stdout, "Next:", "curl")
				return
			}
			items := strings.Split(r.stdout[strings.Index(r.stdout, "Next:\n"):], "\n  - ")[1:]
			if len(items) != 3 {
				t.Fatalf("%d next steps, want 3\n%s", len(items), r.stdout)
			}
			for _, it := range items {
				if !strings.Contains(it, `"svc `) {
					t.Fatalf("next step names no command:\n%s", it)
				}
			}
			// The payments step is done in the dashboard, whose link is
			// printed; no curl needing a dashboard session token.
			if !strings.Contains(items[2], f.URL()+"/dashboard/") {
				t.Fatalf("payments step names no dashboard link:\n%s", items[2])
			}
			mustNotContain(t, "stdout", r.stdout, "curl", "DASHBOARD_SESSION_TOKEN")
		})
	}
}
