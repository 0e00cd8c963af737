package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/cli/app"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/auth/oidctest"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	accounts "github.com/svc-dev/svc/services/accounts/server"
	tracking "github.com/svc-dev/svc/services/tracking/server"
)

const adminToken = "cli-e2e-admin-token-0123456789abcdef"

// stack is the real accounts and tracking services in-process on a fresh
// database and an embedded Kafka broker, with a test OpenID provider.
type stack struct {
	t        *testing.T
	accounts string
	tracking string
	oidc     *oidctest.Provider
}

// startStack starts the stack's services (tracking first: it creates every
// topic it consumes and produces; then accounts, pointed at tracking and at
// the provider). withTracking false starts accounts alone.
func startStack(t *testing.T, withTracking bool, accountsEnv map[string]string) *stack {
	t.Helper()
	s := &stack{t: t, oidc: oidctest.Start(t)}
	env := platformtest.With(map[string]string{
		"ADMIN_TOKEN":         adminToken,
		"SESSION_SIGNING_KEY": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, ed25519.SeedSize)),
		// The in-process clients all come from 127.0.0.1; the spec's 60 a
		// minute per token or IP would throttle a test that runs many
		// commands. The rate-limit test sets its own.
		"CLI_RATE_LIMIT": "100000",
	}, platformtest.With(s.oidc.Env(), accountsEnv))
	var only []string
	if !withTracking {
		only = []string{accounts.Name}
	}
	st := stacktest.Start(t, env, only...)
	s.accounts, s.tracking = st.URL(accounts.Name), st.URL(tracking.Name)
	return s
}

// admin calls the accounts admin API and returns data.
func (s *stack) admin(method, path string, body any) map[string]any {
	s.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, s.accounts+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		s.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	var out struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		s.t.Fatal(err)
	}
	return out.Data
}

// account creates an advertiser and a user of it with email.
func (s *stack) account(email string) int64 {
	s.t.Helper()
	adv := int64(s.admin("POST", "/admin/v1/advertisers", map[string]any{"name": "Brand " + email, "email": email})["id"].(float64))
	s.admin("POST", "/admin/v1/users", map[string]any{"email": email, "name": "Owner", "advertiser_id": adv})
	return adv
}

// signInAs makes the provider's sign-in page sign email in and deliver
// the id_token to the accounts callback, as the browser page does.
func (s *stack) signInAs(email string) {
	s.oidc.SetSignIn(&oidctest.SignIn{Email: email, EmailVerified: true, CallbackURL: s.accounts + "/api/v1/cli/auth/callback"})
}

// cli runs the client in-process against the stack.
type cli struct {
	t   *testing.T
	dir string
	env map[string]string
	// opened records each sign-in link and the answer the callback gave
	// when the "browser" followed it.
	mu     sync.Mutex
	opened []string
	// waits records the client's waits after 429; they return at once.
	waits []time.Duration
}

type result struct {
	code           int
	stdout, stderr string
}

func (s *stack) newCLI(t *testing.T) *cli {
	dir := t.TempDir()
	return &cli{t: t, dir: dir, env: map[string]string{
		app.EnvConfigDir: dir, app.EnvBaseURL: s.accounts, app.EnvPollInterval: "20ms",
	}}
}

func (c *cli) run(args ...string) result {
	c.t.Helper()
	var out, errb bytes.Buffer
	code := app.Run(context.Background(), args, app.Options{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return c.env[k] },
		// The person at the browser: follow the link to the provider's
		// sign-in page, which posts the id_token to the callback; read the
		// code on the page it lands on and confirm it only if it is the
		// one the terminal printed (the client prints it before opening
		// the link, on this goroutine).
		OpenURL: func(ctx context.Context, u string) error {
			status, page, err := confirmInBrowser(ctx, u, codeIn(errb.String()))
			c.mu.Lock()
			c.opened = append(c.opened, fmt.Sprintf("%d %s", status, page))
			c.mu.Unlock()
			return err
		},
		Sleep: func(ctx context.Context, d time.Duration) error {
			c.mu.Lock()
			c.waits = append(c.waits, d)
			c.mu.Unlock()
			return ctx.Err()
		},
		UserConfigDir: func() (string, error) { return "", errors.New("tests set SVC_CONFIG_DIR") },
		Version:       "e2e",
	})
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func (c *cli) mustRun(args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("svc %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Fatalf("%s does not contain %q:\n%s", what, w, got)
		}
	}
}

func mustNotContain(t *testing.T, what, got string, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(got, b) {
			t.Fatalf("%s contains %q:\n%s", what, b, got)
		}
	}
}

var (
	terminalCode = regexp.MustCompile(`Your code: ([A-Z]{4}-[A-Z]{4})`)
	pageCode     = regexp.MustCompile(`data-testid="user-code">([A-Z]{4}-[A-Z]{4})<`)
	confirmField = regexp.MustCompile(`<input type="hidden" name="confirm_token" value="([^"]*)">`)
	confirmForm  = regexp.MustCompile(`<form method="post" action="([^"]*)">`)
)

// codeIn is the code svc login printed ("" if none).
func codeIn(out string) string {
	if m := terminalCode.FindStringSubmatch(out); m != nil {
		return m[1]
	}
	return ""
}

// confirmInBrowser does what a person does with the sign-in link: opens it
// (a browser navigation), lets the provider's page post to the callback,
// compares the code on the page the sign-in lands on with the terminal's
// (want), and presses the confirm button only when they match. It answers
// the last page's status and text.
func confirmInBrowser(ctx context.Context, link, want string) (int, string, error) {
	nav := func(method, u string, form url.Values) (int, string, error) {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(ctx, method, u, body)
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, string(b), fmt.Errorf("%s %s: %d %s", method, u, resp.StatusCode, b)
		}
		return resp.StatusCode, string(b), nil
	}
	status, page, err := nav(http.MethodGet, link, nil)
	if err != nil {
		return status, page, fmt.Errorf("sign-in page: %w", err)
	}
	action, fields, err := oidctest.FormPost(page)
	if err != nil {
		return status, page, err
	}
	status, page, err = nav(http.MethodPost, action, fields)
	if err != nil {
		return status, page, fmt.Errorf("callback: %w", err)
	}
	shown, tok, form := pageCode.FindStringSubmatch(page), confirmField.FindStringSubmatch(page), confirmForm.FindStringSubmatch(page)
	if shown == nil || tok == nil || form == nil {
		return status, page, fmt.Errorf("the landing page has no code or confirm form:\n%s", page)
	}
	if want == "" || shown[1] != want {
		return status, page, fmt.Errorf("the page shows code %s, the terminal %q: not confirming", shown[1], want)
	}
	target, err := url.Parse(action)
	if err != nil {
		return status, page, err
	}
	ref, err := url.Parse(html.UnescapeString(form[1]))
	if err != nil {
		return status, page, err
	}
	return nav(http.MethodPost, target.ResolveReference(ref).String(), url.Values{"confirm_token": {html.UnescapeString(tok[1])}})
}

// eventually retries check until it returns nil or the deadline passes.
func eventually(t *testing.T, within time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %v", within, err)
		}
		<-tick.C
	}
}

// buildSVC builds the real binary for the terminal tests.
func buildSVC(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "svc")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/svc-dev/svc/cli/cmd/svc").CombinedOutput()
	if err != nil {
		t.Fatalf("build svc: %v\n%s", err, out)
	}
	return bin
}

func readCredentials(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
