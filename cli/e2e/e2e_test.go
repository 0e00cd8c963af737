package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/cli/app"
)

// TestCLIAgainstTheRunningStack drives the client through the documented
// happy path and its main refusals against the real accounts and tracking
// services: login (the sign-in completed by the test OpenID provider's page,
// as a browser would), init, programs, status, test click and lead, status
// again once tracking's events have reached accounts, test sale and the
// synthetic chain, logout.
func TestCLIAgainstTheRunningStack(t *testing.T) {
	s := startStack(t, true, nil)
	const email = "owner@brand.example"
	advertiser := s.account(email)
	s.signInAs(email)
	c := s.newCLI(t)

	var token string
	t.Run("login", func(t *testing.T) {
		r := c.mustRun("login")
		mustContain(t, "stderr", r.stderr, "Open this link to sign in:", s.oidc.AuthURL(), "Your code: ", "Waiting for sign-in to complete in the browser...")
		mustContain(t, "stdout", r.stdout, "Signed in to "+s.accounts+" as "+email+".")
		// The person confirmed the terminal's code on the landing page.
		if len(c.opened) != 1 || !strings.HasPrefix(c.opened[0], "200 ") || !strings.Contains(c.opened[0], codeIn(r.stderr)) ||
			!strings.Contains(c.opened[0], "Return to your terminal") {
			t.Fatalf("the sign-in pages answered %v", c.opened)
		}
		cred := readCredentials(t, c.dir)
		token, _ = cred["token"].(string)
		if !strings.HasPrefix(token, "svc_cli_") || cred["base_url"] != s.accounts {
			t.Fatalf("credentials %v", cred)
		}
		mustNotContain(t, "output", r.stdout+r.stderr, token)
		fi, err := os.Stat(filepath.Join(c.dir, "credentials.json"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("credentials file %v %v", fi, err)
		}
	})
	if token == "" {
		t.FailNow()
	}

	var programID int64
	var key string
	t.Run("init", func(t *testing.T) {
		r := c.mustRun("init", "--name", "Acme partners", "--domain", "acme.example", "--commission-type", "percent",
			"--commission-rate", "20", "--cookie-duration", "30", "--advertiser-id", fmt.Sprint(advertiser), "--save-key")
		m := regexp.MustCompile(`Created program (\d+): Acme partners \(acme\.example\)`).FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("stdout:\n%s", r.stdout)
		}
		fmt.Sscan(m[1], &programID)
		mustContain(t, "stdout", r.stdout, "Commission: 20% of each sale for life, cookie duration 30 days")
		key = regexp.MustCompile(`svc_(live|test)_[A-Za-z0-9]+`).FindString(r.stdout)
		if key == "" || strings.Count(r.stdout+r.stderr, key) != 1 {
			t.Fatalf("the key must be shown exactly once:\n%s%s", r.stdout, r.stderr)
		}
		mustContain(t, "stderr", r.stderr, "Saved as the default program key")
		b, _ := os.ReadFile(filepath.Join(c.dir, "config.json"))
		if !strings.Contains(string(b), key) {
			t.Fatalf("config.json: %s", b)
		}
		// The program exists in the catalog, owned by the advertiser.
		p := s.admin("GET", fmt.Sprintf("/admin/v1/programs/%d", programID), nil)
		if p["name"] != "Acme partners" || p["advertiser_id"] != float64(advertiser) {
			t.Fatalf("program %v", p)
		}
	})
	if key == "" {
		t.FailNow()
	}

	t.Run("init refusals", func(t *testing.T) {
		tests := []struct {
			args    []string
			code    int
			message string
		}{
			{[]string{"--commission-rate", "150"}, app.ExitError, "error: commission_rate is a percentage for this type and cannot exceed 100"},
			{[]string{"--commission-rate", "10", "--cookie-duration", "400"}, app.ExitError, "error: cookie_duration must be a whole number of days from 1 to 365"},
			{[]string{"--commission-rate", "10", "--advertiser-id", "999999"}, app.ExitAuth, "error: advertiser_id does not match the authenticated account"},
		}
		for _, tc := range tests {
			r := c.run(append([]string{"init", "--name", "X", "--domain", "x.example", "--commission-type", "percent"}, tc.args...)...)
			if r.code != tc.code {
				t.Fatalf("%v: exit %d, want %d\n%s", tc.args, r.code, tc.code, r.stderr)
			}
			mustContain(t, "stderr", r.stderr, tc.message, "request id: ")
		}
	})

	t.Run("programs", func(t *testing.T) {
		r := c.mustRun("programs")
		mustContain(t, "stdout", r.stdout, "ID", "NAME", fmt.Sprintf("%d", programID), "Acme partners", "acme.example", "20% of each sale")
		r = c.mustRun("programs", "--json")
		var progs []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &progs); err != nil || len(progs) != 1 || progs[0]["id"] != float64(programID) {
			t.Fatalf("%v %s", err, r.stdout)
		}
	})

	t.Run("status before any test event", func(t *testing.T) {
		r := c.mustRun("status")
		mustContain(t, "stdout", r.stdout, fmt.Sprintf("Program %d integration status", programID),
			"Page views (test click)  pending", "Referrals (test lead)    pending", `"svc test click" sends a test click`)
		st := statusJSON(t, c)
		if st.StepStatuses["pageview"] != "pending" || st.ProgramID != fmt.Sprint(programID) {
			t.Fatalf("%+v", st)
		}
	})

	t.Run("wrong program key", func(t *testing.T) {
		c.env[app.EnvAPIKey] = "svc_live_doesnotexistdoesnotexistdoesnotexist0000"
		defer delete(c.env, app.EnvAPIKey)
		r := c.run("status")
		if r.code != app.ExitAuth {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		mustContain(t, "stderr", r.stderr, "error: Invalid API token", "signing in again does not fix a key")
		// CLI status 401s carry no X-Request-ID, so none is shown.
		mustNotContain(t, "stderr", r.stderr, "request id:")
		r = c.run("test", "click")
		if r.code != app.ExitAuth {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		mustContain(t, "stderr", r.stderr, "error: Invalid API token", "request id: ")
	})

	t.Run("rotating and retired keys", func(t *testing.T) {
		issue := func(deadline time.Time) string {
			d := s.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/keys", programID), map[string]any{"test": false})
			s.admin("POST", fmt.Sprintf("/admin/v1/keys/%d/rotation", int64(d["id"].(float64))), map[string]any{"deadline": deadline.UTC().Format(time.RFC3339)})
			return d["key"].(string)
		}
		defer delete(c.env, app.EnvAPIKey)
		rotateBy := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
		c.env[app.EnvAPIKey] = issue(rotateBy)
		r := c.mustRun("status", "--json")
		mustContain(t, "stderr", r.stderr, "warning: api_key_rotation_required: ", "(rotate by "+rotateBy.Format("2006-01-02T15:04:05"))
		mustNotContain(t, "stdout", r.stdout, "warnings")
		c.env[app.EnvAPIKey] = issue(time.Now().Add(-time.Minute))
		r = c.run("status")
		if r.code != app.ExitAuth {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		mustContain(t, "stderr", r.stderr, "error: api_key_rotation_required: ", "hint: ", "docs: https://")
	})

	t.Run("test click and lead", func(t *testing.T) {
		r := c.mustRun("test", "click")
		mustContain(t, "stdout", r.stdout, fmt.Sprintf("Test click sent to program %d (event ", programID))
		r = c.mustRun("test", "lead")
		mustContain(t, "stdout", r.stdout, fmt.Sprintf("Test lead sent to program %d (event ", programID))
	})

	t.Run("status after the test events", func(t *testing.T) {
		eventually(t, 30*time.Second, func() error {
			st := statusJSON(t, c)
			if st.StepStatuses["pageview"] != "complete" || st.StepStatuses["referrals"] != "complete" {
				return fmt.Errorf("steps %v", st.StepStatuses)
			}
			return nil
		})
		r := c.mustRun("status")
		mustContain(t, "stdout", r.stdout, "Page views (test click)  complete  1 test event, latest ", "Referrals (test lead)    complete  1 test event, latest ")
		mustNotContain(t, "stdout", r.stdout, `"svc test click"`, `"svc test lead"`)
	})

	t.Run("test sale and chain", func(t *testing.T) {
		r := c.mustRun("test", "sale")
		mustContain(t, "stdout", r.stdout, fmt.Sprintf("Test sale sent to program %d (event ", programID), "  Test sale recorded\n")
		r = c.mustRun("test", "chain")
		mustContain(t, "stdout", r.stdout, fmt.Sprintf("Synthetic chain ran for program %d (click → lead → sale):\n", programID),
			"  click: recorded (event ", "  lead: recorded (event ", "  sale: recorded (event ")
	})

	t.Run("logout", func(t *testing.T) {
		r := c.mustRun("logout")
		mustContain(t, "stdout", r.stdout, "Logged out")
		r = c.run("programs")
		if r.code != app.ExitAuth {
			t.Fatalf("exit %d", r.code)
		}
		mustContain(t, "stderr", r.stderr, "error: not logged in", `hint: run "svc login"`)
		// A token the server does not know: its own 401 and login prompt.
		bogus := fmt.Sprintf(`{"base_url":%q,"token":"svc_cli_unknowntoken"}`, s.accounts)
		if err := os.WriteFile(filepath.Join(c.dir, "credentials.json"), []byte(bogus), 0o600); err != nil {
			t.Fatal(err)
		}
		r = c.run("programs")
		if r.code != app.ExitAuth {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		mustContain(t, "stderr", r.stderr, "error: Invalid or expired token", "svc login", "request id: ")
	})
}

type cliStatus struct {
	ProgramID    string            `json:"programId"`
	StepStatuses map[string]string `json:"stepStatuses"`
}

func statusJSON(t *testing.T, c *cli) cliStatus {
	t.Helper()
	r := c.mustRun("status", "--json")
	var st cliStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	return st
}

// TestCLIRateLimitedByTheServer checks the client against the server's
// limits: a refused call is retried after Retry-After at most three times,
// then fails with the typed envelope's code. The key is invalid, so the
// limit that refuses it is the failed-auth one per client IP (an invalid
// key gets no bucket of the shared CLI limiter).
func TestCLIRateLimitedByTheServer(t *testing.T) {
	s := startStack(t, false, map[string]string{"CLI_RATE_LIMIT": "2", "FAILED_AUTH_RATE_LIMIT": "2"})
	c := s.newCLI(t)
	c.env[app.EnvAPIKey] = "svc_live_ratelimitratelimitratelimitratelimit00"
	// Windows are aligned to the minute: if one ends between two calls the
	// count restarts, so call until one is refused.
	var r result
	for i := 0; i < 6; i++ {
		r = c.run("status")
		if r.code != app.ExitAuth {
			break
		}
	}
	if r.code != app.ExitError {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	mustContain(t, "stderr", r.stderr, "rate limited; retrying in", "(1/3)", "(3/3)", "error: rate_limited: Too many requests.")
	// CLI status 429s carry no X-Request-ID.
	mustNotContain(t, "stderr", r.stderr, "request id:")
	if len(c.waits) != 3 {
		t.Fatalf("waits %v", c.waits)
	}
	for _, w := range c.waits {
		if w <= 0 || w > time.Minute {
			t.Fatalf("wait %s outside (0, 60s]", w)
		}
	}
}
