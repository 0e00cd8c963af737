package app_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/svc-dev/svc/cli/app"
)

// Bad command lines are told in the client's words, once, with the valid
// choices and the help of the command concerned, and exit 2; never
// cobra's "Error:" line or pflag's strconv internals.
func TestUsageErrorMessages(t *testing.T) {
	tests := []struct {
		args []string
		want string
		help string
	}{
		{[]string{"test"}, "error: svc test needs a test event: click, lead, sale or chain\n", "svc test --help"},
		{[]string{"test", "foo"}, "error: unknown test event \"foo\": choose click, lead, sale or chain\n", "svc test --help"},
		{[]string{"test", "click", "lead"}, "error: svc test takes one test event, got 2 arguments (click lead)\n", "svc test --help"},
		{[]string{"init", "--commission-rate", "ten"}, "error: --commission-rate must be a number, e.g. 20 (got \"ten\")\n", "svc init --help"},
		{[]string{"init", "--cookie-duration", "1.5"}, "error: --cookie-duration must be a whole number, e.g. 30 (got \"1.5\")\n", "svc init --help"},
		{[]string{"init", "--duration-months", "a year"}, "error: --duration-months must be a whole number, e.g. 12 (got \"a year\")\n", "svc init --help"},
		{[]string{"init", "--save-key=maybe"}, "error: --save-key must be true or false, e.g. --save-key=false (got \"maybe\")\n", "svc init --help"},
		{[]string{"init", "--name"}, "error: --name needs a value: program name (required)\n", "svc init --help"},
		{[]string{"login", "--timeout", "soon"}, "error: --timeout must be a duration such as 30s, 2m or 1h30m (got \"soon\")\n", "svc login --help"},
		{[]string{"status", "--bogus"}, "error: unknown flag --bogus for svc status\n", "svc status --help"},
		{[]string{"tset"}, "error: unknown command \"tset\" for svc; commands: completion, config, init, listen, login, logout, programs, status, test (did you mean \"test\"?)\n", "svc --help"},
		{[]string{"programs", "all"}, "error: svc programs takes no arguments (got \"all\")\n", "svc programs --help"},
		{[]string{"config", "get"}, "error: svc config get needs a setting: base-url or api-key\n", "svc config get --help"},
		{[]string{"config", "get", "colour"}, "error: unknown setting \"colour\": choose base-url or api-key\n", "svc config get --help"},
		{[]string{"config", "bogus"}, "error: unknown command \"bogus\" for svc config; commands: get, set, unset\n", "svc config --help"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			c := newCLI(t, "http://127.0.0.1:1")
			r := c.run(tc.args...)
			if r.code != app.ExitUsage {
				t.Fatalf("exit %d, want %d\n%s", r.code, app.ExitUsage, r.stderr)
			}
			want := tc.want + "run \"" + tc.help + "\" for usage\n"
			if r.stderr != want {
				t.Fatalf("stderr\n%s\nwant\n%s", r.stderr, want)
			}
			if r.stdout != "" {
				t.Fatalf("stdout %q", r.stdout)
			}
		})
	}
}

func TestUsageErrorJSON(t *testing.T) {
	c := newCLI(t, "http://127.0.0.1:1")
	r := c.run("test", "purchase", "--json")
	if r.code != app.ExitUsage {
		t.Fatalf("exit %d", r.code)
	}
	var e struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stderr), &e); err != nil {
		t.Fatalf("%v %q", err, r.stderr)
	}
	if e.Error["message"] != `unknown test event "purchase": choose click, lead, sale or chain` || e.Error["exit_code"] != 2.0 {
		t.Fatalf("%v", e.Error)
	}
}
