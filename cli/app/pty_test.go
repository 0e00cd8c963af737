package app_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/svc-dev/svc/cli/ptytest"

	"github.com/svc-dev/svc/cli/app"
	"github.com/svc-dev/svc/cli/internal/config"
)

// These tests run the real svc binary, built from cmd/svc, under a real
// pseudo-terminal (or with plain pipes), so terminal detection, prompts,
// the spinner and exit codes are checked as a user sees them.

// buildSVC builds the binary into a temporary directory; the build cache
// makes every build after the first quick.
func buildSVC(t *testing.T) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("pseudo-terminals are POSIX")
	}
	bin := filepath.Join(t.TempDir(), "svc")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/svc").CombinedOutput()
	if err != nil {
		t.Fatalf("build svc: %v\n%s", err, out)
	}
	return bin
}

// binEnv is a minimal environment: no inherited SVC_* settings or BROWSER.
func binEnv(configDir, base string, extra ...string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + configDir,
		"TERM=xterm-256color",
		app.EnvConfigDir + "=" + configDir,
		app.EnvBaseURL + "=" + base,
		// BROWSER=true: "opening" the link runs /usr/bin/true.
		"BROWSER=true",
	}, extra...)
}

func TestTerminalInitPromptsForMissingFlags(t *testing.T) {
	bin := buildSVC(t)
	f := newFake(t)
	dir := t.TempDir()
	st := config.Store{Dir: dir}
	if err := st.SaveCredentials(config.Credentials{BaseURL: f.URL(), Token: fakeToken}); err != nil {
		t.Fatal(err)
	}
	tm := ptytest.Start(t, bin, binEnv(dir, f.URL()), "init", "--name", "Acme")
	tm.Expect("Site domain (e.g. acme.example): ")
	tm.Send("acme.example\r")
	tm.Expect("Commission type (percent, fixed, recurring_percent, recurring_fixed): ")
	tm.Send("weekly\r")
	tm.Expect("choose one of percent, fixed, recurring_percent, recurring_fixed")
	tm.Expect("Commission type (")
	tm.Send("fixed\r")
	tm.Expect("Commission rate (percentage for percent types, amount for fixed): ")
	tm.Send("500\r")
	tm.Expect("Created program 7: Acme (acme.example)")
	tm.Expect(fakeKey)
	tm.Expect("Save this API key as the default program key for svc status and svc test? [Y/n] ")
	tm.Send("\r")
	tm.Expect("Saved as the default program key")
	if code := tm.Wait(); code != 0 {
		t.Fatalf("exit %d\n%s", code, tm.Output())
	}
	if strings.Contains(tm.Output(), "Program name") {
		t.Fatal("asked for a flag that was given")
	}
	body := f.routeRequests("POST /api/v1/cli/init")[0].Body
	if body != `{"commission_rate":500,"commission_type":"fixed","domain":"acme.example","name":"Acme"}` {
		t.Fatalf("body %s", body)
	}
	if set, _ := st.LoadSettings(); set.APIKey != fakeKey {
		t.Fatalf("settings %+v", set)
	}
}

func TestTerminalLoginShowsSpinner(t *testing.T) {
	bin := buildSVC(t)
	f := newFake(t)
	f.set(func(f *fake) { f.hold = true })
	dir := t.TempDir()
	tm := ptytest.Start(t, bin, binEnv(dir, f.URL()), "login", "--poll-interval", "20ms")
	tm.Expect("Open this link to sign in:")
	tm.Expect(f.URL() + "/cli/sign-in?state=" + fakeState)
	// The first frame, then the line redrawn in place with the next ones.
	tm.Expect("\r\x1b[2K⠋ Waiting for sign-in in the browser... (")
	tm.Expect("\r\x1b[2K⠙ Waiting for sign-in in the browser... (")
	tm.Expect("\r\x1b[2K⠹ Waiting")
	f.release()
	tm.Expect("\r\x1b[2K") // the spinner line is cleared
	tm.Expect("Signed in to " + f.URL() + " as " + fakeEmail + ".")
	if code := tm.Wait(); code != 0 {
		t.Fatalf("exit %d\n%q", code, tm.Output())
	}
	out := tm.Output()
	if strings.Contains(out, "Waiting for sign-in to complete in the browser...") {
		t.Fatal("plain waiting line printed on a terminal")
	}
	if strings.Contains(out, fakeToken) {
		t.Fatal("login token printed")
	}
	if cred, _ := (config.Store{Dir: dir}).LoadCredentials(); cred == nil || cred.Token != fakeToken {
		t.Fatalf("credentials %+v", cred)
	}
}

func TestPipedLoginIsPlain(t *testing.T) {
	bin := buildSVC(t)
	f := newFake(t)
	f.set(func(f *fake) { f.pending = 3 })
	dir := t.TempDir()
	cmd := exec.Command(bin, "login", "--poll-interval", "10ms")
	cmd.Env = binEnv(dir, f.URL())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &stdout, &stderr, strings.NewReader("")
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	mustContain(t, "stderr", stderr.String(), "Open this link to sign in:", "Waiting for sign-in to complete in the browser...\n")
	mustNotContain(t, "output", stdout.String()+stderr.String(), "\r", "\x1b", "⠋", fakeToken)
	mustContain(t, "stdout", stdout.String(), "Signed in to "+f.URL()+" as "+fakeEmail+".")
}

func TestPipedInitDoesNotPrompt(t *testing.T) {
	bin := buildSVC(t)
	f := newFake(t)
	dir := t.TempDir()
	if err := (config.Store{Dir: dir}).SaveCredentials(config.Credentials{BaseURL: f.URL(), Token: fakeToken}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "init", "--name", "Acme")
	cmd.Env = binEnv(dir, f.URL())
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader("acme.example\n"), io.Discard, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != app.ExitUsage {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	mustContain(t, "stderr", stderr.String(), "missing required flags: --domain, --commission-type, --commission-rate")
	mustNotContain(t, "stderr", stderr.String(), "Site domain")
}

func TestBinaryExitCodes(t *testing.T) {
	bin := buildSVC(t)
	f := newFake(t)
	tests := []struct {
		name string
		args []string
		env  []string
		want int
	}{
		{"ok", []string{"config", "get", "base-url"}, nil, app.ExitOK},
		{"usage", []string{"test", "refund"}, nil, app.ExitUsage},
		{"auth", []string{"status"}, nil, app.ExitAuth},
		{"auth from server", []string{"status"}, []string{app.EnvAPIKey + "=svc_live_wrong"}, app.ExitAuth},
		{"server unreachable", []string{"status", "--base-url", "http://127.0.0.1:1"}, []string{app.EnvAPIKey + "=k"}, app.ExitServer},
		{"other client error", []string{"config", "get", "api-key"}, nil, app.ExitError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = binEnv(t.TempDir(), f.URL(), tc.env...)
			out, err := cmd.CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.want {
				t.Fatalf("exit %d, want %d\n%s", code, tc.want, out)
			}
		})
	}
}

func TestBinaryJSONOutputIsParseable(t *testing.T) {
	bin := buildSVC(t)
	f := newFake(t)
	cmd := exec.Command(bin, "status", "--json")
	cmd.Env = binEnv(t.TempDir(), f.URL(), app.EnvAPIKey+"="+fakeKey)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil || v["programId"] != "7" {
		t.Fatalf("%v %s", err, out)
	}
}
