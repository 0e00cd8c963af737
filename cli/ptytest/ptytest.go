// Package ptytest runs a program under a real pseudo-terminal for tests, so
// terminal detection, prompts and spinners are checked as a user sees them.
package ptytest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// Timeout bounds every wait on the terminal.
const Timeout = 30 * time.Second

// Terminal is a process attached to a pseudo-terminal.
type Terminal struct {
	t       testing.TB
	ptmx    *os.File
	cmd     *exec.Cmd
	mu      sync.Mutex
	buf     bytes.Buffer
	seen    int // Expect consumed output up to here
	changed chan struct{}
	done    chan struct{}
}

// Start runs bin with env and args under a 160x40 pseudo-terminal; the
// process is killed when the test ends.
func Start(t testing.TB, bin string, env []string, args ...string) *Terminal {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatalf("start under a pty: %v", err)
	}
	tm := &Terminal{t: t, ptmx: ptmx, cmd: cmd, changed: make(chan struct{}, 1), done: make(chan struct{})}
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

// Output is everything the process has written so far.
func (tm *Terminal) Output() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.buf.String()
}

// Expect waits until s appears in output not yet consumed by an earlier
// Expect, and consumes through it.
func (tm *Terminal) Expect(s string) {
	tm.t.Helper()
	deadline := time.NewTimer(Timeout)
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
			if strings.Contains(tm.Output()[tm.seen:], s) {
				continue
			}
			tm.t.Fatalf("process ended before %q appeared; output:\n%q", s, tm.Output())
		case <-deadline.C:
			tm.t.Fatalf("%q did not appear within %s; output:\n%q", s, Timeout, tm.Output())
		}
	}
}

// Send types s into the terminal.
func (tm *Terminal) Send(s string) {
	tm.t.Helper()
	if _, err := tm.ptmx.Write([]byte(s)); err != nil {
		tm.t.Fatal(err)
	}
}

// Wait returns the exit code once the process has ended and its output has
// been read.
func (tm *Terminal) Wait() int {
	tm.t.Helper()
	err := tm.cmd.Wait()
	select {
	case <-tm.done:
	case <-time.After(Timeout):
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
