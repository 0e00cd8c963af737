package e2e

import (
	"bytes"
	"errors"
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
)

const expectTimeout = 30 * time.Second

// terminal is the svc binary attached to a pseudo-terminal.
type terminal struct {
	t       *testing.T
	ptmx    *os.File
	cmd     *exec.Cmd
	mu      sync.Mutex
	buf     bytes.Buffer
	seen    int
	changed chan struct{}
	done    chan struct{}
}

func startTerminal(t *testing.T, bin string, env []string, args ...string) *terminal {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 200})
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
				return
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

// TestCLIInATerminal runs the real binary under a pseudo-terminal against
// the stack: `svc login` opens the link with $BROWSER (curl, which follows
// it to the provider's sign-in page, which posts the id_token to the
// callback) and shows a spinner while it waits; `svc init` without flags
// asks for each required value; `svc status` piped prints plain text.
func TestCLIInATerminal(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("pseudo-terminals are POSIX")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl plays the browser here and is not installed")
	}
	bin := buildSVC(t)
	s := startStack(t, true, nil)
	const email = "terminal@brand.example"
	s.account(email)
	dir := t.TempDir()
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TERM=xterm-256color",
		app.EnvConfigDir + "=" + dir, app.EnvBaseURL + "=" + s.accounts, app.EnvPollInterval + "=50ms",
		"BROWSER=" + curl + " -fsS -o /dev/null",
	}

	// Sign-in is held back until the spinner has been seen, so the test
	// does not depend on how fast the "browser" is.
	s.oidc.SetSignIn(nil)
	tm := startTerminal(t, bin, env, "login")
	tm.expect("Open this link to sign in:")
	tm.expect(s.oidc.AuthURL())
	tm.expect("\x1b[2K⠋ Waiting for sign-in in the browser... (")
	tm.expect("\x1b[2K⠙ Waiting for sign-in in the browser... (")
	// curl's visit was refused (nobody signed in to the provider yet);
	// follow the link again now, as a user would.
	s.signInAs(email)
	link := linkFrom(t, tm.output(), s.oidc.AuthURL())
	if out, err := exec.Command(curl, "-fsS", "-o", "/dev/null", link).CombinedOutput(); err != nil {
		t.Fatalf("sign-in page: %v %s", err, out)
	}
	tm.expect("Signed in to " + s.accounts + " as " + email + ".")
	if code := tm.wait(); code != 0 {
		t.Fatalf("login exit %d\n%q", code, tm.output())
	}
	if strings.Contains(tm.output(), "Waiting for sign-in to complete in the browser...") {
		t.Fatal("plain waiting line on a terminal")
	}
	token, _ := readCredentials(t, dir)["token"].(string)
	if token == "" || strings.Contains(tm.output(), token) {
		t.Fatal("no token stored, or the token was printed")
	}

	tm = startTerminal(t, bin, env, "init")
	tm.expect("Program name: ")
	tm.send("Terminal brand\r")
	tm.expect("Site domain (e.g. acme.example): ")
	tm.send("terminal.example\r")
	tm.expect("Commission type (percent, fixed, recurring_percent, recurring_fixed): ")
	tm.send("percent\r")
	tm.expect("Commission rate (percentage for percent types, amount for fixed): ")
	tm.send("250\r")
	// Local checks only make sure it is a number; the server's rule
	// answers, exactly as the spec words it.
	tm.expect("commission_rate is a percentage for this type and cannot exceed 100")
	if code := tm.wait(); code != app.ExitError {
		t.Fatalf("init exit %d\n%q", code, tm.output())
	}

	tm = startTerminal(t, bin, env, "init", "--name", "Terminal brand", "--domain", "terminal.example")
	tm.expect("Commission type (")
	tm.send("recurring_percent\r")
	tm.expect("Commission rate (")
	tm.send("15\r")
	tm.expect("Created program ")
	tm.expect("Save this API key as the default program key for svc status and svc test? [Y/n] ")
	tm.send("y\r")
	tm.expect("Saved as the default program key")
	if code := tm.wait(); code != 0 {
		t.Fatalf("init exit %d\n%q", code, tm.output())
	}

	cmd := exec.Command(bin, "status")
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("status: %v\n%s", err, stderr.String())
	}
	mustContain(t, "status", stdout.String(), "integration status", "Page views (test click)  pending")
	mustNotContain(t, "status", stdout.String()+stderr.String(), "\x1b", "\r")
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Fatal(err)
	}
}

// linkFrom finds the sign-in link printed by svc login.
func linkFrom(t *testing.T, out, prefix string) string {
	t.Helper()
	i := strings.Index(out, prefix)
	if i < 0 {
		t.Fatalf("no link in %q", out)
	}
	return strings.Fields(out[i:])[0]
}
