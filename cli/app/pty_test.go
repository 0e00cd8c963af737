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
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/svc-dev/svc/cli/app"
	"github.com/svc-dev/svc/cli/internal/config"
)

// These tests run the real svc binary, built from cmd/svc, under a real
// pseudo-terminal (or with plain pipes), so terminal detection, prompts,
// the spinner and exit codes are checked as a user sees them.

const expectTimeout = 30 * time.Second

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

// terminal is a process attached to a pseudo-terminal.
type terminal struct {
	t       *testing.T
	ptmx    *os.File
	cmd     *exec.Cmd
	mu      sync.Mutex
	buf     bytes.Buffer
	seen    int // expect consumed output up to here
	changed chan struct{}
	done    chan struct{}
}

func startTerminal(t *testing.T, bin string, env []string, args ...string) *terminal {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatalf("start under a pty: %v", err)
	}
	tm := &terminal{t: t, ptmx: ptmx, cmd: cmd, changed: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(tm.done)
		b := make([]byte, 4096)
		for {
			n, err := ptmx.Read(b)
			if n > 0 {
				tm.mu.Lock()
				tm.buf.Write(b[:n])
				tm.mu.Unlock()
				select {
				case tm.changed <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return // EIO once the child has exited and output is drained
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = ptmx.Close()
	})
	return tm
}

func (tm *terminal) output() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.buf.String()
}

// expect waits until s appears in output not yet consumed by an earlier
// expect, and consumes through it.
func (tm *terminal) expect(s string) {
	tm.t.Helper()
	deadline := time.NewTimer(expectTimeout)
	defer deadline.Stop()
	for {
		tm.mu.Lock()
		out := tm.buf.String()
		if i := strings.Index(out[tm.seen:], s); i >= 0 {
			tm.seen += i + len(s)
			tm.mu.Unlock()
			return
		}
		tm.mu.Unlock()
		select {
		case <-tm.changed:
		case <-tm.done:
			if strings.Contains(tm.output()[tm.seen:], s) {
				continue
			}
			tm.t.Fatalf("process ended before %q appeared; output:\n%q", s, tm.output())
		case <-deadline.C:
			tm.t.Fatalf("%q did not appear within %s; output:\n%q", s, expectTimeout, tm.output())
		}
	}
}

func (tm *terminal) send(s string) {
	tm.t.Helper()
	if _, err := tm.ptmx.Write([]byte(s)); err != nil {
		tm.t.Fatal(err)
	}
}

// wait returns the exit code once the process has ended and its output
// has been read.
func (tm *terminal) wait() int {
	tm.t.Helper()
	err := tm.cmd.Wait()
	select {
	case <-tm.done:
	case <-time.After(expectTimeout):
		tm.t.Fatal("pty output not drained")
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		tm.t.Fatal(err)
	}
	return 0
}

func TestTerminalInitPromptsForMissingFlags(t *testing.T) {
	bin := buildSVC(t)
	f := newFake(t)
	dir := t.TempDir()
	st := config.Store{Dir: dir}
	if err := st.SaveCredentials(config.Credentials{BaseURL: f.URL(), Token: fakeToken}); err != nil {
		t.Fatal(err)
	}
	tm := startTerminal(t, bin, binEnv(dir, f.URL()), "init", "--name", "Acme")
	tm.expect("Site domain (e.g. acme.example): ")
	tm.send("acme.example\r")
	tm.expect("Commission type (percent, fixed, recurring_percent, recurring_fixed): ")
	tm.send("weekly\r")
	tm.expect("choose one of percent, fixed, recurring_percent, recurring_fixed")
	tm.expect("Commission type (")
	tm.send("fixed\r")
	tm.expect("Commission rate (percentage for percent types, amount for fixed): ")
	tm.send("500\r")
	tm.expect("Created program 7: Acme (acme.example)")
	tm.expect(fakeKey)
	tm.expect("Save this API key as the default program key for svc status and svc test? [Y/n] ")
	tm.send("\r")
	tm.expect("Saved as the default program key")
	if code := tm.wait(); code != 0 {
		t.Fatalf("exit %d\n%s", code, tm.output())
	}
	if strings.Contains(tm.output(), "Program name") {
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
	tm := startTerminal(t, bin, binEnv(dir, f.URL()), "login", "--poll-interval", "20ms")
	tm.expect("Open this link to sign in:")
	tm.expect(f.URL() + "/cli/sign-in?state=" + fakeState)
	// The first frame, then the line redrawn in place with the next ones.
	tm.expect("\r\x1b[2K⠋ Waiting for sign-in in the browser... (")
	tm.expect("\r\x1b[2K⠙ Waiting for sign-in in the browser... (")
	tm.expect("\r\x1b[2K⠹ Waiting")
	f.release()
	tm.expect("\r\x1b[2K") // the spinner line is cleared
	tm.expect("Signed in to " + f.URL() + " as " + fakeEmail + ".")
	if code := tm.wait(); code != 0 {
		t.Fatalf("exit %d\n%q", code, tm.output())
	}
	out := tm.output()
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
