package platform_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/svc-dev/svc/libs/outbox"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

const (
	dlTopic    = "probe.deadletters.v1"
	dlConsumer = "dlprobe-applier"
	typeBad    = "probe.bad"
)

// dlSpec consumes its own topic; while broken is set its handler refuses
// every probe.bad event (a permanent error: dead-lettered after the
// retries). Each application is a row in "applied", without a unique key,
// so applying twice shows.
func dlSpec(broken *atomic.Bool) platform.Spec {
	return platform.Spec{
		Name: "dlprobe",
		Migrations: fstest.MapFS{
			"00001_applied.sql": {Data: []byte("-- +goose Up\nCREATE TABLE applied (event_id uuid NOT NULL);\n")},
		},
		Topics: []string{dlTopic},
		Wire: func(_ context.Context, p *platform.Platform) ([]platform.Route, error) {
			return nil, p.Consume(dlTopic, dlConsumer, func(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
				if env.GetType() == typeBad && broken.Load() {
					return errors.New("probe handler refuses bad events")
				}
				_, err := tx.Exec(ctx, `INSERT INTO applied VALUES ($1)`, env.GetId())
				return err
			})
		},
	}
}

type cmdResult struct {
	code           int
	stdout, stderr string
}

func runCmd(t *testing.T, spec platform.Spec, env map[string]string, args ...string) cmdResult {
	t.Helper()
	var out, errs bytes.Buffer
	code := platform.Run(ctx(t), spec, args, func(k string) string { return env[k] }, &out, platform.WithStderr(&errs))
	t.Logf("$ dlprobe %s (exit %d)\n%s", strings.Join(args, " "), code, out.String())
	return cmdResult{code: code, stdout: out.String(), stderr: errs.String()}
}

func enqueue(t *testing.T, p *platform.Platform, typ string) string {
	t.Helper()
	id := outbox.NewEventID()
	err := pg.InTx(ctx(t), p.Pool, func(tx pgx.Tx) error {
		_, err := outbox.Enqueue(ctx(t), tx, dlTopic, &eventsv1.Envelope{Id: id, Type: typ, ProgramId: 1, Source: "dlprobe"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func count(t *testing.T, p *platform.Platform, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := p.Pool.QueryRow(ctx(t), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func deadLetterID(t *testing.T, p *platform.Platform, eventID string) int64 {
	t.Helper()
	var id int64
	if err := p.Pool.QueryRow(ctx(t), `SELECT id FROM dead_letters WHERE event_id = $1`, eventID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// A consumer's handler fails for good on one event: it is dead-lettered,
// listed, and once the handler is fixed replayed through the same handler
// exactly once; a second replay, a dry run and a replay of an event applied
// meanwhile change nothing more.
func TestDeadLettersListAndReplay(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	broken.Store(true)
	spec := dlSpec(&broken)
	env := platformtest.Env(t)
	inst := platformtest.Start(t, spec, env)
	p := inst.Platform()

	bad := enqueue(t, p, typeBad)
	good := enqueue(t, p, "probe.good")
	bad2 := enqueue(t, p, typeBad)
	eventually(t, 30*time.Second, "two dead letters and the good event applied", func() bool {
		return count(t, p, `SELECT count(*) FROM dead_letters`) == 2 &&
			count(t, p, `SELECT count(*) FROM applied WHERE event_id = $1`, good) == 1
	})
	dl, dl2 := deadLetterID(t, p, bad), deadLetterID(t, p, bad2)
	appliedBad := func() int { return count(t, p, `SELECT count(*) FROM applied WHERE event_id = $1`, bad) }

	t.Run("list shows the dead letter", func(t *testing.T) {
		r := runCmd(t, spec, env, "dead-letters", "list")
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
		}
		for _, want := range []string{"ID", "CONSUMER", "PARTITION/OFFSET", "DEAD-LETTERED AT", strconv.FormatInt(dl, 10),
			dlConsumer, dlTopic, bad, typeBad, "probe handler refuses bad events", "2 dead letter(s)"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("list output lacks %q:\n%s", want, r.stdout)
			}
		}
	})
	t.Run("list --json", func(t *testing.T) {
		r := runCmd(t, spec, env, "dead-letters", "list", "--json", "--consumer", dlConsumer, "--limit", "1")
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
		}
		var got []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, r.stdout)
		}
		if len(got) != 1 || got[0]["event_id"] != bad2 || got[0]["consumer"] != dlConsumer || got[0]["topic"] != dlTopic ||
			got[0]["attempts"] != float64(5) || got[0]["dead_lettered_at"] == nil || got[0]["error"] == "" {
			t.Fatalf("list --json --limit 1 = %v; want the newest dead letter, %s", got, bad2)
		}
		r = runCmd(t, spec, env, "dead-letters", "list", "--json", "--consumer", "nobody")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
			t.Fatalf("list of another consumer: exit %d, %q", r.code, r.stdout)
		}
	})

	broken.Store(false) // the handler is fixed

	t.Run("dry run changes nothing", func(t *testing.T) {
		r := runCmd(t, spec, env, "dead-letters", "replay", "--id", strconv.FormatInt(dl, 10), "--dry-run")
		if r.code != 0 || !strings.Contains(r.stdout, "would apply") || !strings.Contains(r.stdout, "dry run, nothing changed") {
			t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
		}
		if n := appliedBad(); n != 0 {
			t.Fatalf("dry run applied the event %d times", n)
		}
		if n := count(t, p, `SELECT count(*) FROM dead_letters WHERE replayed_at IS NOT NULL`); n != 0 {
			t.Fatalf("dry run marked %d dead letters replayed", n)
		}
	})
	t.Run("replay applies once and marks the dead letter", func(t *testing.T) {
		r := runCmd(t, spec, env, "dead-letters", "replay", "--id", strconv.FormatInt(dl, 10))
		if r.code != 0 || !strings.Contains(r.stdout, ": applied\n") || !strings.Contains(r.stdout, "1 dead letter(s): 1 applied") {
			t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
		}
		if n := appliedBad(); n != 1 {
			t.Fatalf("event applied %d times, want 1", n)
		}
		if n := count(t, p, `SELECT count(*) FROM dead_letters WHERE id = $1 AND replayed_at IS NOT NULL AND replay_outcome = 'applied'`, dl); n != 1 {
			t.Fatal("dead letter not marked replayed")
		}
		if n := count(t, p, `SELECT count(*) FROM inbox WHERE consumer = $1 AND event_id = $2`, dlConsumer, bad); n != 1 {
			t.Fatalf("inbox rows for the event: %d, want 1", n)
		}
	})
	t.Run("replaying again is a no-op", func(t *testing.T) {
		r := runCmd(t, spec, env, "dead-letters", "replay", "--id", strconv.FormatInt(dl, 10))
		if r.code != 0 || !strings.Contains(r.stdout, "already replayed") || !strings.Contains(r.stdout, "1 already replayed") {
			t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
		}
		if n := appliedBad(); n != 1 {
			t.Fatalf("event applied %d times, want 1", n)
		}
		r = runCmd(t, spec, env, "dead-letters", "list", "--pending", "--json")
		var got []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 1 || got[0]["event_id"] != bad2 {
			t.Fatalf("pending after the replay = %s (%v); want only %s", r.stdout, err, bad2)
		}
	})
	t.Run("an event applied meanwhile is resolved, not applied again", func(t *testing.T) {
		// As if a copy of the message had been delivered and applied.
		if _, err := p.Pool.Exec(ctx(t), `INSERT INTO inbox (consumer, event_id) VALUES ($1, $2)`, dlConsumer, bad2); err != nil {
			t.Fatal(err)
		}
		r := runCmd(t, spec, env, "dead-letters", "replay", "--consumer", dlConsumer, "--all")
		if r.code != 0 || !strings.Contains(r.stdout, "already applied before: dead letter resolved") || !strings.Contains(r.stdout, "1 dead letter(s): 0 applied, 1 already applied") {
			t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
		}
		if n := count(t, p, `SELECT count(*) FROM applied WHERE event_id = $1`, bad2); n != 0 {
			t.Fatalf("handler ran %d times for an event already in the inbox", n)
		}
		if n := count(t, p, `SELECT count(*) FROM dead_letters WHERE id = $1 AND replay_outcome = 'already_applied'`, dl2); n != 1 {
			t.Fatal("dead letter not resolved as already applied")
		}
	})
	t.Run("an unknown id fails", func(t *testing.T) {
		r := runCmd(t, spec, env, "dead-letters", "replay", "--id", "999999")
		if r.code != 1 || !strings.Contains(r.stdout, "not found") || !strings.Contains(r.stdout, "1 failed") {
			t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// A handler still failing leaves the dead letter pending and exits 1.
func TestDeadLetterReplayOfAFailingHandlerChangesNothing(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	broken.Store(true)
	spec := dlSpec(&broken)
	env := platformtest.Env(t)
	p := platformtest.Start(t, spec, env).Platform()
	bad := enqueue(t, p, typeBad)
	eventually(t, 30*time.Second, "the dead letter", func() bool { return count(t, p, `SELECT count(*) FROM dead_letters`) == 1 })
	r := runCmd(t, spec, env, "dead-letters", "replay", "--id", strconv.FormatInt(deadLetterID(t, p, bad), 10))
	if r.code != 1 || !strings.Contains(r.stdout, "failed: ") || !strings.Contains(r.stdout, "probe handler refuses bad events") {
		t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := count(t, p, `SELECT count(*) FROM dead_letters WHERE replayed_at IS NULL`) + count(t, p, `SELECT count(*) FROM inbox`); n != 1 {
		t.Fatalf("a failed replay changed something: pending dead letters + inbox rows = %d, want 1", n)
	}
}

func TestDeadLettersUsage(t *testing.T) {
	t.Parallel()
	spec := dlSpec(new(atomic.Bool))
	env := map[string]string{"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"} // never reached
	tests := []struct {
		name string
		args []string
	}{
		{"no subcommand", []string{"dead-letters"}},
		{"unknown subcommand", []string{"dead-letters", "purge"}},
		{"unknown flag", []string{"dead-letters", "list", "--verbose"}},
		{"stray argument", []string{"dead-letters", "list", "7"}},
		{"limit not positive", []string{"dead-letters", "list", "--limit", "0"}},
		{"replay of nothing", []string{"dead-letters", "replay"}},
		{"id not a number", []string{"dead-letters", "replay", "--id", "seven"}},
		{"all without consumer", []string{"dead-letters", "replay", "--all"}},
		{"consumer without all", []string{"dead-letters", "replay", "--consumer", dlConsumer}},
		{"id with all", []string{"dead-letters", "replay", "--id", "1", "--consumer", dlConsumer, "--all"}},
		{"unknown command", []string{"dead-letter"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := runCmd(t, spec, env, tt.args...); r.code != 2 {
				t.Fatalf("%v: exit %d, want 2\n%s%s", tt.args, r.code, r.stdout, r.stderr)
			}
		})
	}
}

// The command never migrates: on a schema older than the binary it says
// what to run.
func TestDeadLettersOnAnUnmigratedSchemaNameMigrate(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "LOG_LEVEL": "error"}
	r := runCmd(t, dlSpec(new(atomic.Bool)), env, "dead-letters", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "run `dlprobe migrate` first") {
		t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
	}
}
