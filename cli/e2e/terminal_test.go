package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/cli/ptytest"

	"github.com/svc-dev/svc/cli/app"
)

// TestCLIInATerminal runs the real binary under a pseudo-terminal against
// the stack: `svc login` prints its code and opens the link with $BROWSER
// (curl, whose visit is refused: nobody is signed in to the provider yet)
// and shows a spinner while it waits; the test then signs in as a person
// would, confirming on the landing page that its code is the terminal's; `svc init` without flags
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
	// The "browser" visits the link with curl and then leaves a mark, so
	// the test knows its visit is over before anyone signs in (otherwise a
	// late visit could complete the sign-in the test means to do itself).
	visited := filepath.Join(dir, "browser-visited")
	browser := filepath.Join(dir, "browser")
	script := "#!/bin/sh\n" + curl + " -fsS -o /dev/null \"$1\"\necho done > " + visited + "\n"
	if err := os.WriteFile(browser, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TERM=xterm-256color",
		app.EnvConfigDir + "=" + dir, app.EnvBaseURL + "=" + s.accounts, app.EnvPollInterval + "=50ms",
		"BROWSER=" + browser,
	}

	// Sign-in is held back until the spinner has been seen, so the test
	// does not depend on how fast the "browser" is.
	s.oidc.SetSignIn(nil)
	tm := ptytest.Start(t, bin, env, "login")
	tm.Expect("Open this link to sign in:")
	tm.Expect(s.oidc.AuthURL())
	tm.Expect("After signing in, confirm on the page only if it shows this same code.")
	tm.Expect("\x1b[2K⠋ Waiting for sign-in in the browser... (")
	tm.Expect("\x1b[2K⠙ Waiting for sign-in in the browser... (")
	// curl's visit was refused (nobody signed in to the provider yet);
	// once it is over, follow the link again, as a user would.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(visited); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the browser never visited the sign-in link")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.signInAs(email)
	link := linkFrom(t, tm.Output(), s.oidc.AuthURL())
	code := codeIn(tm.Output())
	if code == "" {
		t.Fatalf("no code in %q", tm.Output())
	}
	if status, page, err := confirmInBrowser(t.Context(), link, code); err != nil {
		t.Fatalf("sign-in in the browser: %d %v\n%s", status, err, page)
	}
	tm.Expect("Signed in to " + s.accounts + " as " + email + ".")
	if code := tm.Wait(); code != 0 {
		t.Fatalf("login exit %d\n%q", code, tm.Output())
	}
	if strings.Contains(tm.Output(), "Waiting for sign-in to complete in the browser...") {
		t.Fatal("plain waiting line on a terminal")
	}
	token, _ := readCredentials(t, dir)["token"].(string)
	if token == "" || strings.Contains(tm.Output(), token) {
		t.Fatal("no token stored, or the token was printed")
	}

	tm = ptytest.Start(t, bin, env, "init", "--cookie-duration", "400")
	tm.Expect("Program name: ")
	tm.Send("Terminal brand\r")
	tm.Expect("Site domain (e.g. acme.example): ")
	tm.Send("https://terminal.example/shop\r")
	tm.Expect("That is a URL; using its host name terminal.example as the domain.")
	tm.Expect("Commission type (percent, fixed, recurring_percent, recurring_fixed): ")
	tm.Send("percent\r")
	tm.Expect("Commission rate (percentage for percent types, amount for fixed): ")
	tm.Send("250\r")
	// Typed answers are checked as they are typed.
	tm.Expect("percent is a percentage: enter a number above 0 and at most 100")
	tm.Expect("Commission rate (")
	tm.Send("20\r")
	// The flag's value is the server's to judge: its message, exactly as
	// the spec words it, and only that field is asked again.
	tm.Expect("The server refused cookie_duration: cookie_duration must be a whole number of days from 1 to 365")
	tm.Expect("Cookie duration in days, stored with the program (1 to 365): ")
	tm.Send("30\r")
	tm.Expect("Created program ")
	tm.Expect("Commission: 20% of each sale for life, cookie duration 30 days")
	tm.Expect("[Y/n] ")
	tm.Send("n\r")
	if code := tm.Wait(); code != 0 {
		t.Fatalf("init exit %d\n%q", code, tm.Output())
	}

	tm = ptytest.Start(t, bin, env, "init", "--name", "Terminal brand", "--domain", "terminal.example")
	tm.Expect("Commission type (")
	tm.Send("recurring_percent\r")
	tm.Expect("Commission rate (")
	tm.Send("15\r")
	tm.Expect("Created program ")
	tm.Expect("Save this API key as the default program key for svc status and svc test? [Y/n] ")
	tm.Send("y\r")
	tm.Expect("Saved as the default program key")
	if code := tm.Wait(); code != 0 {
		t.Fatalf("init exit %d\n%q", code, tm.Output())
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
