package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
		// The browser: follow the link to the provider's sign-in page,
		// which signs in and posts the id_token to the callback.
		OpenURL: func(ctx context.Context, u string) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			c.mu.Lock()
			c.opened = append(c.opened, fmt.Sprintf("%d %s", resp.StatusCode, b))
			c.mu.Unlock()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("sign-in page: %d %s", resp.StatusCode, b)
			}
			return nil
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
