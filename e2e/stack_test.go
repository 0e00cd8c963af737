package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/pg/pgtest"
)

const adminToken = "e2e-admin-token-0123456789abcdef0123456"

// repoRoot is where `make run` runs: the seed file and the devstack
// package are found from there.
var repoRoot = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Dir(wd)
}()

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// devstackBinary builds the devstack command once per test binary, as
// `make run` does (a built binary, not go run).
func devstackBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "e2e-devstack-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "devstack")
		cmd := exec.Command("go", "build", "-o", binPath, "./deploy/devstack")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./deploy/devstack: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// stackConfig is one machine's view of the stack: its database and its
// local state directory (.data).
type stackConfig struct {
	DatabaseURL string
	DataDir     string
	// Env is more of the stack's environment (NAME=value), after the
	// suite's own, so it wins (DEV_LOGIN_EMAIL: who the dev provider
	// signs in).
	Env []string
}

func newStackConfig(t *testing.T) stackConfig {
	return stackConfig{DatabaseURL: pgtest.NewDatabase(t), DataDir: t.TempDir()}
}

// stack is a running `devstack run`.
type stack struct {
	t       *testing.T
	cmd     *exec.Cmd
	out     *strings.Builder
	mu      *sync.Mutex
	done    chan error
	Gateway string
	// From what it printed.
	ProgramID string
	LinkCode  string
	TestKey   string
	LiveKey   string
	Seeded    string
}

var (
	reProgram = regexp.MustCompile(`^demo\s+program (\d+), partner \d+, link code "([^"]+)"`)
	reKey     = regexp.MustCompile(`^(test|live) key\s+(\S+)`)
	reGateway = regexp.MustCompile(`^gateway\s+(http://\S+)`)
)

// startStack runs the devstack binary the way `make run` does, with its
// own ports, and waits until it says the stack is up. The gateway's port
// is picked here and bound only once the services are up (the services
// are told its URL first), so another test's listener can take it in
// between ("bind: address already in use", seen in CI): then the stack is
// started again on the same database and data, with new ports, as a
// person would run `make run` again.
func startStack(t *testing.T, cfg stackConfig) *stack {
	t.Helper()
	for attempt := 1; ; attempt++ {
		s, taken := launch(t, cfg)
		if !taken {
			return s
		}
		if attempt == 3 {
			t.Fatalf("devstack found its ports taken 3 times:\n%s", s.output())
		}
		t.Logf("devstack's port was taken before it bound it; starting again:\n%s", s.output())
	}
}

// launch is one start of the stack; taken reports that it exited because
// a port it was given was taken meanwhile.
func launch(t *testing.T, cfg stackConfig) (_ *stack, taken bool) {
	t.Helper()
	cmd := exec.Command(devstackBinary(t), "run")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+cfg.DatabaseURL,
		"DEVSTACK_DATA="+cfg.DataDir,
		"GATEWAY_ADDR="+freeAddr(t),
		"DEVSTACK_KAFKA_ADDR="+freeAddr(t),
		"DEV_OIDC_ADDR=127.0.0.1:0",
		"ADMIN_TOKEN="+adminToken,
		"KAFKA_BROKERS=", "SESSION_SIGNING_KEY=", "OIDC_ISSUER=", "LOG_LEVEL=info",
		// The local stack trusts loopback hops, like a production ingress
		// behind its load balancer: the suite's clients come through one.
		"TRUSTED_PROXIES=127.0.0.0/8,::1/128",
		// Small pools, as stacktest's: the suite runs several stacks
		// beside other packages' against one Postgres.
		"DB_MAX_CONNS=6", "DB_MAX_CONN_IDLE=500ms",
	)
	cmd.Env = append(cmd.Env, cfg.Env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	s := &stack{t: t, cmd: cmd, out: &strings.Builder{}, mu: &sync.Mutex{}, done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.out.WriteString(line + "\n")
			switch m := reProgram.FindStringSubmatch(line); {
			case m != nil:
				s.ProgramID, s.LinkCode = m[1], m[2]
			}
			if m := reKey.FindStringSubmatch(line); m != nil {
				if m[1] == "test" {
					s.TestKey = m[2]
				} else {
					s.LiveKey = m[2]
				}
			}
			if m := reGateway.FindStringSubmatch(line); m != nil {
				s.Gateway = m[1]
			}
			if strings.HasPrefix(line, "seeded ") {
				s.Seeded = line
			}
			s.mu.Unlock()
			if strings.HasPrefix(line, "stack is up") {
				close(up)
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		pw.Close()
		s.done <- err
	}()
	t.Cleanup(func() { s.stop() })
	select {
	case <-up:
	case err := <-s.done:
		s.done <- err
		if strings.Contains(s.output(), "address already in use") {
			return s, true
		}
		t.Fatalf("devstack exited before the stack was up (%v):\n%s", err, s.output())
	case <-time.After(3 * time.Minute):
		t.Fatalf("devstack not up after 3 minutes:\n%s", s.output())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Gateway == "" || s.ProgramID == "" || s.TestKey == "" || s.LiveKey == "" {
		t.Fatalf("devstack did not print the gateway, demo program and both keys:\n%s", s.out.String())
	}
	return s, false
}

func (s *stack) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// stop sends Ctrl-C's signal and returns the exit error (nil for a clean
// exit 0). Safe to call twice.
func (s *stack) stop() error {
	select {
	case err := <-s.done: // already stopped
		s.done <- err
		return err
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		return errors.New("devstack did not stop within a minute of SIGINT")
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %s", what, within)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
