package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/svc-dev/svc/cli/app"
	"github.com/svc-dev/svc/cli/internal/config"
	"github.com/svc-dev/svc/cli/ptytest"
)

// initBody decodes the n-th POST init body the fake received.
func initBody(t *testing.T, f *fake, n int) map[string]any {
	t.Helper()
	reqs := f.routeRequests("POST /api/v1/cli/init")
	if len(reqs) <= n {
		t.Fatalf("%d init requests, want more than %d", len(reqs), n)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(reqs[n].Body), &body); err != nil {
		t.Fatal(err)
	}
	return body
}

func sameBody(t *testing.T, got, want map[string]any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("body %s, want %s", g, w)
	}
}

// Each typed answer is checked with the contract's rules (Resources,
// Program; Limits, Other constants) and asked again with a message, before
// anything is sent.
func TestInitPromptsCheckEachAnswer(t *testing.T) {
	tests := []struct {
		name   string
		stdin  string
		args   []string
		want   map[string]any
		stderr []string
	}{
		{
			name:  "commission_rate for percent types at most 100",
			stdin: "Acme\nacme.example\npercent\n150\n0\n20%\nn\n",
			want:  map[string]any{"commission_rate": 20.0, "commission_type": "percent", "domain": "acme.example", "name": "Acme"},
			stderr: []string{"percent is a percentage: enter a number above 0 and at most 100, e.g. 20",
				"enter a percentage above 0 and at most 100, e.g. 20"},
		},
		{
			name:   "recurring_percent at most 100, fixed types any positive amount",
			stdin:  "Acme\nacme.example\nrecurring_percent\n100.5\n100\nn\n",
			want:   map[string]any{"commission_rate": 100.0, "commission_type": "recurring_percent", "domain": "acme.example", "name": "Acme"},
			stderr: []string{"recurring_percent is a percentage: enter a number above 0 and at most 100"},
		},
		{
			name:   "fixed amount over 100 is fine, not a number is not",
			stdin:  "Acme\nacme.example\nFixed\nfive\n250\nn\n",
			want:   map[string]any{"commission_rate": 250.0, "commission_type": "fixed", "domain": "acme.example", "name": "Acme"},
			stderr: []string{"enter a positive number, e.g. 5"},
		},
		{
			name:   "commission_type from the valid list",
			stdin:  "Acme\nacme.example\nweekly\nrecurring fixed\n5\nn\n",
			want:   map[string]any{"commission_rate": 5.0, "commission_type": "recurring_fixed", "domain": "acme.example", "name": "Acme"},
			stderr: []string{"choose one of percent, fixed, recurring_percent, recurring_fixed"},
		},
		{
			name:   "domain typed as a URL uses its host",
			stdin:  "Acme\nhttps://Shop.Example/path?x=1\npercent\n20\nn\n",
			want:   map[string]any{"commission_rate": 20.0, "commission_type": "percent", "domain": "shop.example", "name": "Acme"},
			stderr: []string{"That is a URL; using its host name shop.example as the domain."},
		},
		{
			name:   "domain without scheme but with a path uses its host",
			stdin:  "Acme\nshop.example:8443/landing\npercent\n20\nn\n",
			want:   map[string]any{"commission_rate": 20.0, "commission_type": "percent", "domain": "shop.example:8443", "name": "Acme"},
			stderr: []string{"using its host name shop.example:8443"},
		},
		{
			name:   "domain that is no host name",
			stdin:  "Acme\nmy shop\nhttps://\nacme.example\npercent\n20\nn\n",
			want:   map[string]any{"commission_rate": 20.0, "commission_type": "percent", "domain": "acme.example", "name": "Acme"},
			stderr: []string{`"my shop" is not a host name: enter one like shop.example.com`, `"https://" is not a host name`},
		},
		{
			name:   "rate checked against the type given as a flag",
			args:   []string{"--name", "Acme", "--domain", "acme.example", "--commission-type", "percent"},
			stdin:  "101\n99.5\nn\n",
			want:   map[string]any{"commission_rate": 99.5, "commission_type": "percent", "domain": "acme.example", "name": "Acme"},
			stderr: []string{"percent is a percentage: enter a number above 0 and at most 100"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			c := newCLI(t, f.URL())
			c.login(f.URL())
			c.tty = true
			c.stdin = tc.stdin
			r := c.run(append([]string{"init"}, tc.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			mustContain(t, "stderr", r.stderr, tc.stderr...)
			if n := len(f.routeRequests("POST /api/v1/cli/init")); n != 1 {
				t.Fatalf("%d init requests, want 1", n)
			}
			sameBody(t, initBody(t, f, 0), tc.want)
		})
	}
}

// A 400 from the server that names a field (the messages of the spec's
// "POST init" rows) asks again for that field only, keeps every other
// answer and sends again.
func TestInitServerRefusalAsksThatFieldAgain(t *testing.T) {
	base := map[string]any{"commission_rate": 20.0, "commission_type": "percent", "domain": "acme.example", "name": "Acme"}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name     string
		args     []string
		message  string
		question string
		answer   string
		first    map[string]any
		second   map[string]any
	}{
		{
			name: "commission_type", message: "Invalid commission_type: percent. Valid: percent, fixed, recurring_percent, recurring_fixed",
			question: "Commission type (percent, fixed, recurring_percent, recurring_fixed): ", answer: "fixed",
			first: base, second: with("commission_type", "fixed"),
		},
		{
			name: "commission_rate", message: "commission_rate must have at most 4 decimal places",
			question: "Commission rate (percentage for percent types, amount for fixed): ", answer: "12.5",
			first: base, second: with("commission_rate", 12.5),
		},
		{
			name: "domain", message: "domain must be a host name like shop.example.com",
			question: "Site domain (e.g. acme.example): ", answer: "shop.example",
			first: base, second: with("domain", "shop.example"),
		},
		{
			name: "duration_months", args: []string{"--duration-months", "5000"},
			message:  "duration_months must be a whole number of months (0 = lifetime)",
			question: "Months a partner earns on a customer (0 = lifetime): ", answer: "12",
			first: with("duration_months", 5000.0), second: with("duration_months", 12.0),
		},
		{
			name: "cookie_duration", args: []string{"--cookie-duration", "400"},
			message:  "cookie_duration must be a whole number of days from 1 to 365",
			question: "Cookie duration in days, stored with the program (1 to 365): ", answer: "30",
			first: with("cookie_duration", 400.0), second: with("cookie_duration", 30.0),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.on("POST /api/v1/cli/init", func(w http.ResponseWriter, _ *http.Request, n int) {
				if n == 0 {
					platformErr(w, 400, tc.message, nil)
					return
				}
				writeJSON(w, 201, map[string]any{"data": map[string]any{"program": map[string]any{"id": 7, "name": "Acme"}, "api_key": fakeKey}})
			})
			c := newCLI(t, f.URL())
			c.login(f.URL())
			c.tty = true
			c.stdin = "Acme\nacme.example\npercent\n20\n" + tc.answer + "\nn\n"
			r := c.run(append([]string{"init"}, tc.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			mustContain(t, "stderr", r.stderr, "The server refused "+tc.name+": "+tc.message+"\n"+tc.question)
			// Asked once at first (the required fields) and once again,
			// or once for an optional field; nothing else is asked again.
			for _, q := range []string{"Program name: ", "Site domain (e.g. acme.example): ", "Commission type (", "Commission rate ("} {
				want := 1
				if strings.HasPrefix(tc.question, q) {
					want = 2
				}
				if got := strings.Count(r.stderr, q); got != want {
					t.Fatalf("%q asked %d times, want %d\n%s", q, got, want, r.stderr)
				}
			}
			mustContain(t, "stdout", r.stdout, "Created program 7")
			if n := len(f.routeRequests("POST /api/v1/cli/init")); n != 2 {
				t.Fatalf("%d init requests, want 2", n)
			}
			sameBody(t, initBody(t, f, 0), tc.first)
			sameBody(t, initBody(t, f, 1), tc.second)
		})
	}
}

// Flags, --json and pipes keep failing with the server's message and exit
// code; so does a 400 that names no field the user can answer.
func TestInitServerRefusalWithoutPromptsFails(t *testing.T) {
	flags := []string{"init", "--name", "A", "--domain", "a.example", "--commission-type", "percent", "--commission-rate", "150"}
	tests := []struct {
		name    string
		tty     bool
		args    []string
		stdin   string
		message string
	}{
		{name: "flags in a terminal", tty: true, args: flags, message: "commission_rate is a percentage for this type and cannot exceed 100"},
		{name: "flags through a pipe", args: flags, message: "commission_rate is a percentage for this type and cannot exceed 100"},
		{
			name: "--json in a terminal", tty: true, args: []string{"init", "--json", "--name", "A", "--domain", "a.example", "--commission-type", "percent"},
			stdin: "20\n20\n", message: "commission_rate must have at most 4 decimal places",
		},
		{
			name: "a message naming no field", tty: true, args: []string{"init", "--name", "A"},
			stdin: "a.example\npercent\n20\n", message: "Missing required fields: name, domain, commission_type, commission_rate",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.on("POST /api/v1/cli/init", func(w http.ResponseWriter, _ *http.Request, _ int) { platformErr(w, 400, tc.message, nil) })
			c := newCLI(t, f.URL())
			c.login(f.URL())
			c.tty = tc.tty
			c.stdin = tc.stdin
			r := c.run(tc.args...)
			if r.code != app.ExitError {
				t.Fatalf("exit %d, want %d\n%s", r.code, app.ExitError, r.stderr)
			}
			mustContain(t, "stderr", r.stderr, tc.message)
			mustNotContain(t, "stderr", r.stderr, "The server refused")
			if n := len(f.routeRequests("POST /api/v1/cli/init")); n != 1 {
				t.Fatalf("%d init requests, want 1", n)
			}
		})
	}
}

// Asked again after a refusal, end of input is still a usage error naming
// the flag, so a closed stdin never loops.
func TestInitServerRefusalThenEndOfInput(t *testing.T) {
	f := newFake(t)
	f.on("POST /api/v1/cli/init", func(w http.ResponseWriter, _ *http.Request, _ int) {
		platformErr(w, 400, "domain must be a host name like shop.example.com", nil)
	})
	c := newCLI(t, f.URL())
	c.login(f.URL())
	c.tty = true
	c.stdin = "Acme\nacme.example\npercent\n20\n"
	r := c.run("init")
	if r.code != app.ExitUsage {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	mustContain(t, "stderr", r.stderr, "The server refused domain: domain must be a host name like shop.example.com", "no answer for --domain")
}

func TestCommissionText(t *testing.T) {
	tests := []struct {
		name string
		prog map[string]any
		want string
	}{
		{"percent", map[string]any{"commission_type": "percent", "commission_rate": 20, "duration_months": 0}, "20% of each sale for life"},
		{"fixed with cents", map[string]any{"commission_type": "fixed", "commission_rate": 5.5, "duration_months": 6}, "5.50 per sale for 6 months"},
		{"fixed whole", map[string]any{"commission_type": "fixed", "commission_rate": 5, "duration_months": 1}, "5 per sale for 1 month"},
		{"fixed as a decimal string", map[string]any{"commission_type": "fixed", "commission_rate": "0.1234"}, "0.1234 per sale"},
		{"recurring_percent", map[string]any{"commission_type": "recurring_percent", "commission_rate": 20, "duration_months": 12}, "20% recurring for 12 months"},
		{"recurring_percent lifetime", map[string]any{"commission_type": "recurring_percent", "commission_rate": 12.5, "duration_months": 0}, "12.5% recurring for life"},
		{"recurring_fixed", map[string]any{"commission_type": "recurring_fixed", "commission_rate": 9.99, "duration_months": 3, "cookie_duration": 30}, "9.99 per payment, recurring for 3 months, cookie duration 30 days"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.on("GET /api/v1/cli/programs", func(w http.ResponseWriter, _ *http.Request, _ int) {
				p := map[string]any{"id": 1, "name": "A", "domain": "a.example"}
				for k, v := range tc.prog {
					p[k] = v
				}
				writeJSON(w, 200, map[string]any{"data": []any{p}})
			})
			c := newCLI(t, f.URL())
			c.login(f.URL())
			r := c.run("programs")
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if len(lines) != 2 || !strings.HasSuffix(lines[1], "a.example  "+tc.want) {
				t.Fatalf("stdout\n%s\nwant a row ending in %q", r.stdout, tc.want)
			}
		})
	}
}

// The real binary under a pseudo-terminal: a URL typed as the domain is
// taken as its host, a percentage over 100 is asked again, and the
// server's refusal of one field asks for that field only, then the
// program is created with every other answer kept.
func TestTerminalInitAsksAgain(t *testing.T) {
	bin := buildSVC(t)
	f := newFake(t)
	f.on("POST /api/v1/cli/init", func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 0 {
			platformErr(w, 400, "Invalid commission_type: percent. Valid: percent, fixed, recurring_percent, recurring_fixed", nil)
			return
		}
		writeJSON(w, 201, map[string]any{"data": map[string]any{"program": map[string]any{"id": 7, "name": "Acme", "domain": "shop.example",
			"commission_type": "recurring_percent", "commission_rate": 20, "duration_months": 0}, "api_key": fakeKey}})
	})
	dir := t.TempDir()
	if err := (config.Store{Dir: dir}).SaveCredentials(config.Credentials{BaseURL: f.URL(), Token: fakeToken}); err != nil {
		t.Fatal(err)
	}
	tm := ptytest.Start(t, bin, binEnv(dir, f.URL()), "init", "--name", "Acme")
	tm.Expect("Site domain (e.g. acme.example): ")
	tm.Send("https://shop.example/path\r")
	tm.Expect("That is a URL; using its host name shop.example as the domain.")
	tm.Expect("Commission type (")
	tm.Send("percent\r")
	tm.Expect("Commission rate (percentage for percent types, amount for fixed): ")
	tm.Send("150\r")
	tm.Expect("percent is a percentage: enter a number above 0 and at most 100, e.g. 20")
	tm.Expect("Commission rate (")
	tm.Send("20\r")
	tm.Expect("The server refused commission_type: Invalid commission_type: percent.")
	tm.Expect("Commission type (")
	tm.Send("recurring_percent\r")
	tm.Expect("Created program 7: Acme (shop.example)")
	tm.Expect("Commission: 20% recurring for life")
	tm.Expect("[Y/n] ")
	tm.Send("n\r")
	if code := tm.Wait(); code != 0 {
		t.Fatalf("exit %d\n%s", code, tm.Output())
	}
	sameBody(t, initBody(t, f, 1), map[string]any{"commission_rate": 20.0, "commission_type": "recurring_percent", "domain": "shop.example", "name": "Acme"})
}

// --cookie-duration's help says what the value does: it is stored with the
// program, and the tracker's cookie follows the attribution window (the
// spec's cookie rule), so nobody sets it expecting clicks to count longer.
func TestInitHelpSaysWhatCookieDurationDoes(t *testing.T) {
	f := newFake(t)
	c := newCLI(t, f.URL())
	r := c.run("init", "--help")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	help := strings.Join(strings.Fields(r.stdout), " ")
	mustContain(t, "svc init --help", help,
		"--cookie-duration int days, 1 to 365, stored with the program as its cookie duration;",
		"the tracker's cookie lasts the program's attribution window (60 days unless changed), not this value")
	mustNotContain(t, "svc init --help", help, "cookie lifetime")
	if n := len(f.routeRequests("POST /api/v1/cli/init")); n != 0 {
		t.Fatalf("--help sent %d init requests", n)
	}
}
