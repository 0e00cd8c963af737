package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/svc-dev/svc/cli/app"
	"github.com/svc-dev/svc/cli/internal/config"
)

func TestLoginStoresTokenAndNeverPrintsIt(t *testing.T) {
	f := newFake(t)
	f.set(func(f *fake) { f.pending = 3 })
	c := newCLI(t, f.URL())
	r := c.run("login")
	if r.code != app.ExitOK {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	link := f.URL() + "/cli/sign-in?state=" + fakeState
	mustContain(t, "stderr", r.stderr, "Open this link to sign in:", link, "Your code: "+fakeUserCode,
		"confirm on the page only if it shows this same code", "Waiting for sign-in to complete in the browser...")
	mustContain(t, "stdout", r.stdout, "Signed in to "+f.URL()+" as "+fakeEmail+".", "credentials.json")
	mustNotContain(t, "output", r.stdout+r.stderr, fakeToken, "\r", "\x1b")
	if len(c.opened) != 1 || c.opened[0] != link {
		t.Fatalf("opened %v", c.opened)
	}
	if got := len(f.routeRequests("GET /api/v1/cli/auth/poll")); got != 4 {
		t.Fatalf("polls %d, want 4", got)
	}
	cred, err := c.store().LoadCredentials()
	if err != nil || cred == nil || cred.Token != fakeToken || cred.BaseURL != f.URL() || cred.ExpiresAt.IsZero() {
		t.Fatalf("credentials %+v %v", cred, err)
	}
	if m := fileMode(t, c.store().Path(config.CredentialsFile)); m != 0o600 {
		t.Fatalf("credentials mode %o", m)
	}
	if m := fileMode(t, c.dir); m != 0o700 {
		t.Fatalf("dir mode %o", m)
	}
}

func TestLoginJSONLeavesTokenOut(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	r := c.run("login", "--json", "--no-browser")
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("stdout not JSON: %v\n%s", err, r.stdout)
	}
	if out["status"] != "complete" || out["user"].(map[string]any)["email"] != fakeEmail || out["expires_at"] == nil {
		t.Fatalf("%v", out)
	}
	mustNotContain(t, "output", r.stdout+r.stderr, fakeToken)
	if len(c.opened) != 0 {
		t.Fatalf("--no-browser opened %v", c.opened)
	}
}

func TestLoginBrowserFailureDoesNotFail(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	c.openFn = func(string) error { return errors.New("exec: \"xdg-open\": not found") }
	r := c.run("login")
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	mustContain(t, "stderr", r.stderr, "Could not open a browser", "open the link yourself")
}

func TestLoginFailures(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(f *fake, c *cli)
		args     []string
		wantCode int
		wantErr  []string
	}{
		{
			name:     "link expired",
			setup:    func(f *fake, c *cli) { f.set(func(f *fake) { f.pending, f.final = 2, "expired" }) },
			wantCode: app.ExitAuth, wantErr: []string{"error: the sign-in link expired before sign-in completed", `hint: run "svc login" again`},
		},
		{
			name:     "timeout",
			setup:    func(f *fake, c *cli) { f.set(func(f *fake) { f.hold = true }) },
			args:     []string{"--timeout", "100ms"},
			wantCode: app.ExitAuth, wantErr: []string{"error: timed out waiting for sign-in"},
		},
		{
			name: "session not found",
			setup: func(f *fake, c *cli) {
				f.on("GET /api/v1/cli/auth/poll", func(w http.ResponseWriter, r *http.Request, n int) { platformErr(w, 404, "Session not found", nil) })
			},
			wantCode: app.ExitError, wantErr: []string{"error: sign-in: Session not found", "request id: req-2"},
		},
		{
			name: "start fails with the request id",
			setup: func(f *fake, c *cli) {
				f.on("POST /api/v1/cli/auth/start", func(w http.ResponseWriter, r *http.Request, n int) {
					w.Header().Del("X-Request-ID")
					platformErr(w, 500, "Failed to start auth session (request_id: r-9)", map[string]any{"request_id": "r-9"})
				})
			},
			wantCode: app.ExitServer, wantErr: []string{"error: start sign-in: Failed to start auth session (request_id: r-9)", "request id: r-9"},
		},
		{
			name: "three server errors in a row",
			setup: func(f *fake, c *cli) {
				f.on("GET /api/v1/cli/auth/poll", func(w http.ResponseWriter, r *http.Request, n int) {
					platformErr(w, 500, "Failed to poll auth session (request_id: x)", nil)
				})
			},
			wantCode: app.ExitServer, wantErr: []string{"Failed to poll auth session"},
		},
		{
			name:     "bad poll interval",
			args:     []string{"--poll-interval", "0s"},
			wantCode: app.ExitUsage, wantErr: []string{"--poll-interval must be positive"},
		},
		{
			name:     "bad poll interval env",
			setup:    func(f *fake, c *cli) { c.env[app.EnvPollInterval] = "soon" },
			wantCode: app.ExitUsage, wantErr: []string{app.EnvPollInterval},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			c := newCLI(t, f.URL())
			if tc.setup != nil {
				tc.setup(f, c)
			}
			r := c.run(append([]string{"login"}, tc.args...)...)
			if r.code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.wantCode, r.stderr)
			}
			mustContain(t, "stderr", r.stderr, tc.wantErr...)
			if cred, _ := c.store().LoadCredentials(); cred != nil {
				t.Fatal("credentials stored after a failed login")
			}
		})
	}
}

func TestLoginSurvivesOneServerError(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	f.on("GET /api/v1/cli/auth/poll", func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 0 {
			platformErr(w, 503, "unavailable", nil)
			return
		}
		f.poll(w, r)
	})
	if r := c.run("login"); r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
}

func TestLogout(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	c.login(f.URL())
	r := c.run("logout")
	if r.code != 0 || !strings.Contains(r.stdout, "Logged out") {
		t.Fatalf("%+v", r)
	}
	if cred, _ := c.store().LoadCredentials(); cred != nil {
		t.Fatal("credentials remain")
	}
	r = c.run("logout", "--json")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "{\n  \"logged_out\": false\n}" {
		t.Fatalf("%+v", r)
	}
	if len(f.requests()) != 0 {
		t.Fatal("logout called the server")
	}
}

func TestInitWithFlags(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	c.login(f.URL())
	r := c.run("init", "--name", "Acme", "--domain", "acme.example", "--commission-type", "percent", "--commission-rate", "12.5",
		"--duration-months", "0", "--cookie-duration", "30", "--advertiser-id", "42", "--save-key")
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	reqs := f.routeRequests("POST /api/v1/cli/init")
	if len(reqs) != 1 || reqs[0].Auth != "Bearer "+fakeToken {
		t.Fatalf("%+v", reqs)
	}
	var body map[string]any
	_ = json.Unmarshal([]byte(reqs[0].Body), &body)
	want := map[string]any{"name": "Acme", "domain": "acme.example", "commission_type": "percent", "commission_rate": 12.5,
		"duration_months": 0.0, "cookie_duration": 30.0, "advertiser_id": 42.0}
	if len(body) != len(want) {
		t.Fatalf("body %v", body)
	}
	for k, v := range want {
		if body[k] != v {
			t.Fatalf("body[%s] = %v, want %v (%s)", k, body[k], v, reqs[0].Body)
		}
	}
	mustContain(t, "stdout", r.stdout, "Created program 7: Acme (acme.example)", "Commission: 12.5% of each sale for life, cookie duration 60 days", fakeKey)
	if strings.Count(r.stdout+r.stderr, fakeKey) != 1 {
		t.Fatalf("key shown more than once:\n%s%s", r.stdout, r.stderr)
	}
	mustContain(t, "stderr", r.stderr, "Saved as the default program key")
	set, _ := c.store().LoadSettings()
	if set.APIKey != fakeKey {
		t.Fatalf("settings %+v", set)
	}
	if m := fileMode(t, c.store().Path(config.ConfigFile)); m != 0o600 {
		t.Fatalf("config mode %o", m)
	}
}

func TestInitOptionalFlagsLeftOut(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	c.login(f.URL())
	r := c.run("init", "--name", "A", "--domain", "a.example", "--commission-type", "fixed", "--commission-rate", "5")
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	body := f.routeRequests("POST /api/v1/cli/init")[0].Body
	if body != `{"commission_rate":5,"commission_type":"fixed","domain":"a.example","name":"A"}` {
		t.Fatalf("body %s", body)
	}
	// Not a terminal and no --save-key: not saved, and told how.
	mustContain(t, "stderr", r.stderr, "Not saved. To use it by default: svc config set api-key")
	if set, _ := c.store().LoadSettings(); set.APIKey != "" {
		t.Fatal("key saved without asking")
	}
}

func TestInitMissingFlagsWithoutTerminalIsUsage(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	c.login(f.URL())
	r := c.run("init", "--name", "Acme")
	if r.code != app.ExitUsage {
		t.Fatalf("exit %d", r.code)
	}
	mustContain(t, "stderr", r.stderr, "missing required flags: --domain, --commission-type, --commission-rate")
	if len(f.requests()) != 0 {
		t.Fatal("called the server")
	}
}

func TestInitPromptsInTerminal(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	c.login(f.URL())
	c.tty = true
	c.stdin = "Acme\n\nacme.example\nbogus\nrecurring_percent\nabc\n-1\n20\ny\n"
	r := c.run("init")
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	mustContain(t, "stderr", r.stderr, "Program name: ", "Site domain (e.g. acme.example): ", "a value is required",
		"Commission type (percent, fixed, recurring_percent, recurring_fixed): ", "choose one of",
		"Commission rate", "enter a percentage above 0 and at most 100, e.g. 20", "Save this API key as the default program key", "[Y/n]")
	body := f.routeRequests("POST /api/v1/cli/init")[0].Body
	if body != `{"commission_rate":20,"commission_type":"recurring_percent","domain":"acme.example","name":"Acme"}` {
		t.Fatalf("body %s", body)
	}
	if set, _ := c.store().LoadSettings(); set.APIKey != fakeKey {
		t.Fatal("key not saved after yes")
	}
}

func TestInitPromptEndOfInputIsUsage(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	c.login(f.URL())
	c.tty = true
	c.stdin = "Acme\n"
	r := c.run("init")
	if r.code != app.ExitUsage {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	mustContain(t, "stderr", r.stderr, "no answer for --domain")
}

func TestInitDeclineSave(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	c.login(f.URL())
	c.tty = true
	c.stdin = "n\n"
	r := c.run("init", "--name", "A", "--domain", "a.example", "--commission-type", "fixed", "--commission-rate", "5")
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	if set, _ := c.store().LoadSettings(); set.APIKey != "" {
		t.Fatal("saved after no")
	}
}

func TestInitJSONPrintsData(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	c.login(f.URL())
	r := c.run("init", "--json", "--name", "A", "--domain", "a.example", "--commission-type", "fixed", "--commission-rate", "5", "--save-key=false")
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	var out struct {
		Program map[string]any `json:"program"`
		APIKey  string         `json:"api_key"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.APIKey != fakeKey || out.Program["id"] != 7.0 {
		t.Fatalf("%v %s", err, r.stdout)
	}
}

func TestInitErrors(t *testing.T) {
	flags := []string{"init", "--name", "A", "--domain", "a.example", "--commission-type", "percent", "--commission-rate", "150"}
	tests := []struct {
		name     string
		login    bool
		reply    func(w http.ResponseWriter)
		wantCode int
		wantErr  []string
		notErr   []string
	}{
		{name: "not logged in", wantCode: app.ExitAuth, wantErr: []string{"error: not logged in", `hint: run "svc login"`}},
		{
			name: "validation message", login: true,
			reply: func(w http.ResponseWriter) {
				platformErr(w, 400, "commission_rate is a percentage for this type and cannot exceed 100", nil)
			},
			wantCode: app.ExitError, wantErr: []string{"error: commission_rate is a percentage for this type and cannot exceed 100", "request id: req-1"},
		},
		{
			name: "token refused", login: true,
			reply:    func(w http.ResponseWriter) { platformErr(w, 401, "Invalid or expired token", nil) },
			wantCode: app.ExitAuth, wantErr: []string{"error: Invalid or expired token", `hint: run "svc login" to sign in again`},
		},
		{
			name: "advertiser mismatch", login: true,
			reply: func(w http.ResponseWriter) {
				platformErr(w, 403, "advertiser_id does not match the authenticated account", nil)
			},
			wantCode: app.ExitAuth, wantErr: []string{"error: advertiser_id does not match the authenticated account"},
		},
		{
			name: "server prompts to log in", login: true,
			reply: func(w http.ResponseWriter) {
				platformErr(w, 401, `Invalid or expired token. Run "svc login" and try again.`, nil)
			},
			wantCode: app.ExitAuth, wantErr: []string{`error: Invalid or expired token. Run "svc login" and try again.`},
			notErr: []string{"hint:"},
		},
		{
			name: "server error", login: true,
			reply: func(w http.ResponseWriter) {
				platformErr(w, 500, "Failed to create program (request_id: req-1)", map[string]any{"request_id": "req-1"})
			},
			wantCode: app.ExitServer, wantErr: []string{"error: Failed to create program (request_id: req-1)", "request id: req-1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			c := newCLI(t, f.URL())
			if tc.login {
				c.login(f.URL())
			}
			if tc.reply != nil {
				f.on("POST /api/v1/cli/init", func(w http.ResponseWriter, _ *http.Request, _ int) { tc.reply(w) })
			}
			r := c.run(flags...)
			if r.code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s", r.code, tc.wantCode, r.stderr)
			}
			mustContain(t, "stderr", r.stderr, tc.wantErr...)
			mustNotContain(t, "stderr", r.stderr, tc.notErr...)
		})
	}
}

func TestLoginTokenChecks(t *testing.T) {
	f := newFake(t)
	tests := []struct {
		name string
		cred config.Credentials
		want string
	}{
		{"other server", config.Credentials{BaseURL: "http://other.example", Token: fakeToken}, "logged in to http://other.example, not " + f.URL()},
		{"expired", config.Credentials{BaseURL: f.URL(), Token: fakeToken, ExpiresAt: mustTime("2001-01-01T00:00:00Z")}, "login expired"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t, f.URL())
			if err := c.store().SaveCredentials(tc.cred); err != nil {
				t.Fatal(err)
			}
			r := c.run("programs")
			if r.code != app.ExitAuth {
				t.Fatalf("exit %d", r.code)
			}
			mustContain(t, "stderr", r.stderr, tc.want)
		})
	}
	if len(f.requests()) != 0 {
		t.Fatal("called the server")
	}
}

func TestPrograms(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	c.login(f.URL())
	r := c.run("programs")
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	want := "ID  NAME  DOMAIN        COMMISSION\n" +
		"7   Acme  acme.example  12.5% of each sale for life\n" +
		"9   Beta  beta.example  500 per sale for 6 months\n"
	if r.stdout != want {
		t.Fatalf("stdout\n%s\nwant\n%s", r.stdout, want)
	}
	if f.routeRequests("GET /api/v1/cli/programs")[0].Auth != "Bearer "+fakeToken {
		t.Fatal("no login token sent")
	}
	r = c.run("programs", "--json")
	var progs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &progs); err != nil || len(progs) != 2 {
		t.Fatalf("%v %s", err, r.stdout)
	}
}

func TestProgramsEmpty(t *testing.T) {
	f := newFake(t)
	f.on("GET /api/v1/cli/programs", func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeJSON(w, 200, map[string]any{"data": []any{}})
	})
	c := newCLI(t, f.URL())
	c.login(f.URL())
	r := c.run("programs")
	if r.code != 0 || !strings.Contains(r.stdout, `No programs yet. Create one with "svc init".`) {
		t.Fatalf("%+v", r)
	}
}

func TestStatus(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	c.env[app.EnvAPIKey] = fakeKey
	r := c.run("status")
	if r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	mustContain(t, "stdout", r.stdout, "Program 7 integration status",
		"Page views (test click)  complete  2 test events, latest 2030-01-01T00:00:00.000Z",
		"Referrals (test lead)    pending   no test events yet",
		"Payments                 pending   mode processor_connect, processor not connected",
		"Partners                           none approved yet",
		`"svc test lead" sends a test lead`,
		// The payments step names where a person completes it: the
		// dashboard, signed in as the svc login account.
		"connect your payment processor, or switch program 7 to server-to-server sale tracking (s2s),\n",
		`in the dashboard's Settings (sign in with the account you used for "svc login"):`,
		"\n      "+f.URL()+"/dashboard/\n",
		`then "svc test sale" sends a test sale`)
	// No request needing a credential svc never gave the person.
	mustNotContain(t, "stdout", r.stdout, `"svc test click"`, "curl", "PATCH", "DASHBOARD_SESSION_TOKEN", "session token")
	if f.routeRequests("GET /api/v1/cli/status")[0].Auth != "Bearer "+fakeKey {
		t.Fatal("key not sent")
	}
	r = c.run("status", "--json")
	var got map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(statusBody())
	gotJSON, _ := json.Marshal(got)
	if string(gotJSON) != string(wantJSON) {
		t.Fatalf("json\n%s\nwant\n%s", gotJSON, wantJSON)
	}
}

func TestProgramKeySources(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	r := c.run("status")
	if r.code != app.ExitAuth {
		t.Fatalf("exit %d", r.code)
	}
	mustContain(t, "stderr", r.stderr, "error: no program API key", "svc config set api-key")

	// The config file's key is used; SVC_API_KEY overrides it.
	if err := c.store().SaveSettings(config.Settings{APIKey: "svc_live_fromfile"}); err != nil {
		t.Fatal(err)
	}
	r = c.run("status")
	if r.code != app.ExitAuth || !strings.Contains(r.stderr, "error: Invalid API token") {
		t.Fatalf("%+v", r)
	}
	mustContain(t, "stderr", r.stderr, "signing in again does not fix a key")
	c.env[app.EnvAPIKey] = fakeKey
	if r = c.run("status"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	got := f.routeRequests("GET /api/v1/cli/status")
	if got[0].Auth != "Bearer svc_live_fromfile" || got[1].Auth != "Bearer "+fakeKey {
		t.Fatalf("%+v", got)
	}
}

func TestRotationWarningsGoToStderr(t *testing.T) {
	f := newFake(t)
	f.on("GET /api/v1/cli/status", func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeJSON(w, 200, map[string]any{"data": statusBody(), "warnings": []any{map[string]any{
			"code": "api_key_rotation_required", "message": "This API key must be rotated.", "hint": "Create a new key.",
			"rotate_by": "2030-02-01T00:00:00Z", "docs_url": "https://docs.svc.dev/api-keys/rotation",
		}}})
	})
	c := newCLI(t, f.URL())
	c.env[app.EnvAPIKey] = fakeKey
	r := c.run("status", "--json")
	if r.code != 0 {
		t.Fatalf("%+v", r)
	}
	mustContain(t, "stderr", r.stderr, "warning: api_key_rotation_required: This API key must be rotated. (rotate by 2030-02-01T00:00:00Z)",
		"Create a new key.", "https://docs.svc.dev/api-keys/rotation")
	mustNotContain(t, "stdout", r.stdout, "warnings")
}

func TestRetiredKey(t *testing.T) {
	f := newFake(t)
	f.on("GET /api/v1/cli/status", func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeJSON(w, 401, map[string]any{"error": map[string]any{"code": "api_key_rotation_required",
			"message": "This API key is past its rotation deadline and no longer works.", "hint": "Create a new API key.", "docs_url": "https://d.example"}})
	})
	c := newCLI(t, f.URL())
	c.env[app.EnvAPIKey] = fakeKey
	r := c.run("status")
	if r.code != app.ExitAuth {
		t.Fatalf("%+v", r)
	}
	mustContain(t, "stderr", r.stderr, "error: api_key_rotation_required: This API key is past its rotation deadline and no longer works.",
		"hint: Create a new API key.", "docs: https://d.example")
}

func TestTestEvents(t *testing.T) {
	tests := []struct {
		arg, body, out string
	}{
		{"click", `{"event_type":"click"}`, "Test click sent to program 7 (event 12).\n  Test click recorded\n"},
		{"lead", `{"event_type":"lead"}`, "Test lead sent to program 7 (event 12).\n  Test lead recorded\n"},
		{"sale", `{"event_type":"sale"}`, "Test sale sent to program 7 (event 12).\n  Test sale recorded\n"},
		{"chain", `{"type":"chain"}`, "Synthetic chain ran for program 7 (click → lead → sale):\n  click: recorded (event 21)\n  lead: recorded (event 22)\n  sale: recorded (event 23)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.arg, func(t *testing.T) {
			f := newFake(t)
			c := newCLI(t, f.URL())
			c.env[app.EnvAPIKey] = fakeKey
			r := c.run("test", tc.arg)
			if r.code != 0 {
				t.Fatalf("%+v", r)
			}
			got := f.routeRequests("POST /api/v1/cli/test-event")
			if len(got) != 1 || got[0].Body != tc.body || got[0].Auth != "Bearer "+fakeKey {
				t.Fatalf("%+v", got)
			}
			if r.stdout != tc.out {
				t.Fatalf("stdout %q, want %q", r.stdout, tc.out)
			}
		})
	}
}

func TestSaleNotDeployed(t *testing.T) {
	f := newFake(t)
	f.on("POST /api/v1/cli/test-event", func(w http.ResponseWriter, _ *http.Request, _ int) {
		writeJSON(w, 501, map[string]any{"data": nil, "error": map[string]any{"status": 501, "name": "NotImplementedError",
			"message": "Synthetic chain stopped at the sale step", "code": "sale_tracking_unavailable",
			"details": map[string]any{"chain": []any{
				map[string]any{"step": "click", "status": "recorded", "eventId": 1},
				map[string]any{"step": "sale", "status": "not_available", "eventId": nil},
			}}}})
	})
	c := newCLI(t, f.URL())
	c.env[app.EnvAPIKey] = fakeKey
	r := c.run("test", "chain")
	if r.code != app.ExitError {
		t.Fatalf("%+v", r)
	}
	mustContain(t, "stderr", r.stderr, "error: sale_tracking_unavailable: Synthetic chain stopped at the sale step\n", "  click: recorded (event 1)\n  sale: not_available\n")
	r = c.run("test", "chain", "--json")
	var e struct {
		Error struct {
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || len(e.Error.Details["chain"].([]any)) != 2 {
		t.Fatalf("%v %s", err, r.stderr)
	}
}

func TestChainCapFailsWithoutWaiting(t *testing.T) {
	f := newFake(t)
	f.on("POST /api/v1/cli/test-event", func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Retry-After", "1800")
		writeJSON(w, 429, map[string]any{"error": map[string]any{"code": "rate_limited", "message": "Too many synthetic chains (max 10/program/hour).", "retry_after_seconds": 1800}})
	})
	c := newCLI(t, f.URL())
	c.env[app.EnvAPIKey] = fakeKey
	r := c.run("test", "chain")
	if r.code != app.ExitError {
		t.Fatalf("%+v", r)
	}
	mustContain(t, "stderr", r.stderr, "error: rate_limited: Too many synthetic chains (max 10/program/hour).", "request id: req-1")
	if len(c.sleeps) != 0 || len(f.requests()) != 1 {
		t.Fatalf("waited %v, %d requests", c.sleeps, len(f.requests()))
	}
	r = c.run("test", "chain", "--json")
	var e struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stderr), &e); err != nil {
		t.Fatalf("%v %q", err, r.stderr)
	}
	if e.Error["code"] != "rate_limited" || e.Error["retry_after_seconds"] != 1800.0 || e.Error["status"] != 429.0 || e.Error["exit_code"] != 1.0 || r.stdout != "" {
		t.Fatalf("%+v", e)
	}
}

func TestRateLimitRetriesThenSucceeds(t *testing.T) {
	f := newFake(t)
	f.on("GET /api/v1/cli/status", func(w http.ResponseWriter, r *http.Request, n int) {
		if n < 2 {
			w.Header().Set("Retry-After", "7")
			writeJSON(w, 429, map[string]any{"error": map[string]any{"status": 429, "code": "rate_limited", "message": "Too many requests. Retry after 7 seconds.", "retry_after_seconds": 7}})
			return
		}
		writeJSON(w, 200, map[string]any{"data": statusBody()})
	})
	c := newCLI(t, f.URL())
	c.env[app.EnvAPIKey] = fakeKey
	r := c.run("status")
	if r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if len(c.sleeps) != 2 || c.sleeps[0].Seconds() != 7 {
		t.Fatalf("sleeps %v", c.sleeps)
	}
	mustContain(t, "stderr", r.stderr, "rate limited; retrying in 7s (1/3)", "rate limited; retrying in 7s (2/3)")
}

func TestRateLimitGivesUp(t *testing.T) {
	f := newFake(t)
	f.on("GET /api/v1/cli/programs", func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, 429, map[string]any{"error": map[string]any{"status": 429, "code": "rate_limited", "message": "Too many requests. Retry after 1 seconds.", "retry_after_seconds": 1}})
	})
	c := newCLI(t, f.URL())
	c.login(f.URL())
	r := c.run("programs")
	if r.code != app.ExitError || len(f.requests()) != 4 || len(c.sleeps) != 3 {
		t.Fatalf("exit %d, %d requests, sleeps %v", r.code, len(f.requests()), c.sleeps)
	}
	mustContain(t, "stderr", r.stderr, "error: rate_limited: Too many requests.")
}

func TestUsageErrors(t *testing.T) {
	tests := [][]string{
		{"nope"},
		{"test"},
		{"test", "purchase"},
		{"test", "click", "extra"},
		{"status", "--bogus"},
		{"init", "--commission-rate", "ten"},
		{"init", "--cookie-duration", "1.5"},
		{"config", "get", "colour"},
		{"config", "set", "base-url"},
		{"config", "set", "base-url", "ftp://x"},
		{"login", "--timeout", "-1s"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			c := newCLI(t, "http://127.0.0.1:1")
			r := c.run(args...)
			if r.code != app.ExitUsage {
				t.Fatalf("exit %d, want 2\n%s", r.code, r.stderr)
			}
			mustContain(t, "stderr", r.stderr, "error: ")
			mustNotContain(t, "stderr", r.stderr, "Error:", "strconv", "arg(s)", "invalid argument")
			if strings.Count(r.stderr, "error: ") != 1 {
				t.Fatalf("the error printed more than once:\n%s", r.stderr)
			}
		})
	}
}

func TestUnreachableServerIsServerError(t *testing.T) {
	c := newCLI(t, "http://127.0.0.1:1")
	c.env[app.EnvAPIKey] = fakeKey
	r := c.run("status")
	if r.code != app.ExitServer {
		t.Fatalf("%+v", r)
	}
	mustContain(t, "stderr", r.stderr, "error: cannot reach http://127.0.0.1:1")
}

func TestBadBaseURLFromEnvIsUsage(t *testing.T) {
	c := newCLI(t, "localhost:8080")
	c.env[app.EnvAPIKey] = fakeKey
	r := c.run("status")
	if r.code != app.ExitUsage {
		t.Fatalf("%+v", r)
	}
	mustContain(t, "stderr", r.stderr, "base URL from SVC_BASE_URL")
}

func TestConfig(t *testing.T) {
	c := newCLI(t, "")
	delete(c.env, app.EnvBaseURL)
	steps := []struct {
		args     []string
		stdin    string
		wantCode int
		wantOut  string
	}{
		{[]string{"config", "get", "base-url"}, "", 0, app.DefaultBaseURL + "\n"},
		{[]string{"config", "get", "api-key"}, "", app.ExitError, ""},
		{[]string{"config", "set", "base-url", "https://api.svc.example/"}, "", 0, "Saved base-url https://api.svc.example in "},
		{[]string{"config", "get", "base-url"}, "", 0, "https://api.svc.example\n"},
		{[]string{"config", "set", "api-key", "svc_live_ABCDsecretsecretsecretWXYZ"}, "", 0, "Saved api-key svc_live_ABCD…WXYZ in "},
		{[]string{"config", "get", "api-key"}, "", 0, "svc_live_ABCD…WXYZ\n"},
		{[]string{"config", "set", "api-key"}, "svc_test_EFGHfromstdinfromstdin1234\n", 0, "Saved api-key svc_test_EFGH…1234"},
		{[]string{"config"}, "", 0, "api-key   svc_test_EFGH…1234  (" + c.dir + "/config.json)"},
		{[]string{"config", "unset", "api-key"}, "", 0, "Removed api-key."},
		{[]string{"config", "get", "api-key"}, "", app.ExitError, ""},
	}
	for _, s := range steps {
		c.stdin = s.stdin
		r := c.run(s.args...)
		if r.code != s.wantCode || !strings.Contains(r.stdout, s.wantOut) {
			t.Fatalf("%v: exit %d stdout %q stderr %q", s.args, r.code, r.stdout, r.stderr)
		}
		mustNotContain(t, "output", r.stdout+r.stderr, "secretsecretsecret", "fromstdinfromstdin")
	}
	set, _ := c.store().LoadSettings()
	if set.BaseURL != "https://api.svc.example" || set.APIKey != "" {
		t.Fatalf("%+v", set)
	}
}

func TestConfigShowsSources(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	c.env[app.EnvAPIKey] = "svc_live_ABCDfromenvfromenvfromenvWXYZ"
	c.login(f.URL())
	r := c.run("config")
	mustContain(t, "stdout", r.stdout, "base-url  "+f.URL()+"  (SVC_BASE_URL)", "api-key   svc_live_ABCD…WXYZ  (SVC_API_KEY)", "login     logged in as "+fakeEmail)
	r = c.run("--base-url", "http://other.example", "config", "--json")
	var out map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out["base_url"] != "http://other.example" || out["base_url_source"] != "--base-url" || out["logged_in"] != false || out["api_key"] != "svc_live_ABCD…WXYZ" {
		t.Fatalf("%v", out)
	}
	mustNotContain(t, "output", r.stdout+r.stderr, "fromenvfromenv", fakeToken)
}

func TestExitCodesOfStatuses(t *testing.T) {
	tests := []struct {
		status, want int
	}{
		{400, app.ExitError}, {401, app.ExitAuth}, {403, app.ExitAuth}, {404, app.ExitError}, {410, app.ExitError},
		{422, app.ExitError}, {501, app.ExitError}, {500, app.ExitServer}, {502, app.ExitServer}, {503, app.ExitServer},
	}
	for _, tc := range tests {
		f := newFake(t)
		f.on("POST /api/v1/cli/test-event", func(w http.ResponseWriter, _ *http.Request, _ int) { platformErr(w, tc.status, "m", nil) })
		c := newCLI(t, f.URL())
		c.env[app.EnvAPIKey] = fakeKey
		if r := c.run("test", "click"); r.code != tc.want {
			t.Errorf("status %d: exit %d, want %d", tc.status, r.code, tc.want)
		}
	}
}

func TestHTTPTimeoutEnv(t *testing.T) {
	tests := []struct {
		value string
		code  int
	}{
		{"5", app.ExitOK}, {"2s", app.ExitOK}, {"never", app.ExitUsage}, {"-1s", app.ExitUsage},
	}
	for _, tc := range tests {
		f := newFake(t)
		c := newCLI(t, f.URL())
		c.noHTTPClient = true
		c.env[app.EnvAPIKey] = fakeKey
		c.env[app.EnvHTTPTimeout] = tc.value
		if r := c.run("status"); r.code != tc.code {
			t.Errorf("%s=%q: exit %d, want %d\n%s", app.EnvHTTPTimeout, tc.value, r.code, tc.code, r.stderr)
		}
	}
}

func TestInterruptedLogin(t *testing.T) {
	f := newFake(t)
	f.set(func(f *fake) { f.hold = true })
	c := newCLI(t, f.URL())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.ctx = ctx
	// Interrupt once the client is polling.
	f.on("GET /api/v1/cli/auth/poll", func(w http.ResponseWriter, r *http.Request, n int) {
		cancel()
		f.poll(w, r)
	})
	r := c.run("login")
	if r.code != app.ExitInterrupted {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	mustContain(t, "stderr", r.stderr, "interrupted")
	if cred, _ := c.store().LoadCredentials(); cred != nil {
		t.Fatal("credentials stored")
	}
}
