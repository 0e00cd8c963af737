package platform

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/outbox/inbox"
	"github.com/svc-dev/svc/libs/pg"
)

// WithStderr is where Run's `dead-letters` writes its log lines and usage
// errors (default os.Stderr), so stdout carries only the command's output
// (--json stays parseable).
func WithStderr(w io.Writer) Option {
	return func(o *options) { o.stderr = w }
}

const deadLettersUsage = `usage:
  %[1]s dead-letters list [--consumer NAME] [--pending] [--limit N] [--json]
  %[1]s dead-letters replay (--id ID ... | --consumer NAME --all) [--dry-run]
`

// idList is a repeatable --id flag.
type idList []int64

func (l *idList) String() string { return fmt.Sprint(*l) }
func (l *idList) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
		if err != nil || id <= 0 {
			return fmt.Errorf("%q is not a dead-letter id", part)
		}
		*l = append(*l, id)
	}
	return nil
}

// deadLetters runs `<service> dead-letters list|replay`: 0 done, 1 failed
// (or a dead letter could not be replayed), 2 usage.
func deadLetters(ctx context.Context, spec Spec, args []string, getenv func(string) string, stdout io.Writer, opts []Option) int {
	o := options{stderr: os.Stderr}
	for _, opt := range opts {
		opt(&o)
	}
	stderr := o.stderr
	usage := func(format string, a ...any) int {
		if format != "" {
			fmt.Fprintf(stderr, "%s dead-letters: %s\n", spec.Name, fmt.Sprintf(format, a...))
		}
		fmt.Fprintf(stderr, deadLettersUsage, spec.Name)
		return 2
	}
	if len(args) == 0 {
		return usage("list or replay?")
	}
	fs := flag.NewFlagSet(spec.Name+" dead-letters "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	consumer := fs.String("consumer", "", "only this consumer's dead letters")
	switch args[0] {
	case "list":
		limit := fs.Int("limit", 50, "at most N dead letters, newest first")
		asJSON := fs.Bool("json", false, "one JSON array instead of a table")
		pending := fs.Bool("pending", false, "only dead letters not replayed yet")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		if fs.NArg() > 0 {
			return usage("unexpected argument %q", fs.Arg(0))
		}
		if *limit <= 0 {
			return usage("--limit must be positive")
		}
		return listDeadLetters(ctx, spec, getenv, stdout, stderr, inbox.DeadLetterFilter{Consumer: *consumer, Pending: *pending, Limit: *limit}, *asJSON)
	case "replay":
		var ids idList
		fs.Var(&ids, "id", "dead-letter id (repeatable, or comma-separated)")
		all := fs.Bool("all", false, "every pending dead letter of --consumer")
		dryRun := fs.Bool("dry-run", false, "run each replay and roll it back: report, change nothing")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		switch {
		case fs.NArg() > 0:
			return usage("unexpected argument %q", fs.Arg(0))
		case len(ids) > 0 && (*all || *consumer != ""):
			return usage("--id does not go with --consumer or --all")
		case len(ids) == 0 && !*all:
			return usage("name the dead letters: --id ID ... or --consumer NAME --all")
		case *all && *consumer == "":
			return usage("--all needs --consumer NAME")
		}
		return replayDeadLetters(ctx, spec, getenv, stdout, stderr, opts, ids, *consumer, *dryRun)
	default:
		return usage("unknown command %q", args[0])
	}
}

func listDeadLetters(ctx context.Context, spec Spec, getenv func(string) string, stdout, stderr io.Writer, f inbox.DeadLetterFilter, asJSON bool) int {
	env := obs.NewEnv(getenv)
	cfg := LoadConfig(spec.Name, env)
	logger := obs.NewLogger(stderr, cfg.LogLevel).With("service", spec.Name)
	if err := env.Err(); err != nil {
		logger.Error("dead-letters list failed", "err", fmt.Errorf("config: %w", err))
		return 1
	}
	pool, err := pg.NewPool(ctx, cfg.DatabaseURL, pg.Options{Schema: cfg.Schema, MaxConns: 2, AppName: spec.Name + "-dead-letters"})
	if err != nil {
		logger.Error("dead-letters list failed", "err", fmt.Errorf("postgres: %w", err))
		return 1
	}
	defer pool.Close()
	list, err := inbox.ListDeadLetters(ctx, pool, cfg.Schema, f)
	if err != nil {
		logger.Error("dead-letters list failed", "err", schemaHint(spec, err))
		return 1
	}
	if asJSON {
		if list == nil {
			list = []inbox.DeadLetter{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(list); err != nil {
			logger.Error("dead-letters list failed", "err", err)
			return 1
		}
		return 0
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tCONSUMER\tTOPIC\tPARTITION/OFFSET\tEVENT ID\tEVENT TYPE\tATTEMPTS\tDEAD-LETTERED AT\tREPLAYED\tERROR")
	for _, d := range list {
		replayed := "-"
		if d.ReplayedAt != nil {
			replayed = d.ReplayedAt.UTC().Format(time.RFC3339) + " " + d.ReplayOutcome
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d/%d\t%s\t%s\t%d\t%s\t%s\t%s\n", d.ID, d.Consumer, d.Topic, d.Partition, d.Offset,
			orDash(d.EventID), orDash(d.EventType), d.Attempts, d.CreatedAt.UTC().Format(time.RFC3339), replayed, oneLine(d.Error))
	}
	if err := w.Flush(); err != nil {
		return 1
	}
	fmt.Fprintf(stdout, "%d dead letter(s)\n", len(list))
	return 0
}

// schemaHint names the cure when the schema predates the command (the
// replay columns, or the tables, are missing): the command never migrates.
func schemaHint(spec Spec, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42703" || pgErr.Code == "42P01") {
		return fmt.Errorf("%w (the schema is older than this binary: run `%s migrate` first)", err, spec.Name)
	}
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps an error on its table row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// replayDeadLetters opens the platform and wires the service without
// serving (no migrations, no topics, nothing started: Wire only builds
// things and adds runners, which start in serve), then replays each dead
// letter through the consumer Wire added under its name.
func replayDeadLetters(ctx context.Context, spec Spec, getenv func(string) string, stdout, stderr io.Writer, opts []Option,
	ids []int64, consumer string, dryRun bool) int {
	p, _, err := wired(ctx, spec, getenv, stderr, false, opts)
	if err != nil {
		fmt.Fprintf(stderr, `{"level":"ERROR","msg":"dead-letters replay failed","service":%q,"err":%q}`+"\n", spec.Name, err.Error())
		return 1
	}
	defer p.close(context.WithoutCancel(ctx))
	if consumer != "" {
		if _, ok := p.consumers[consumer]; !ok {
			fmt.Fprintf(stdout, "no consumer %q in %s (consumers: %s)\n", consumer, spec.Name, p.consumerNames())
			return 1
		}
		pending, err := p.pendingDeadLetters(ctx, consumer)
		if err != nil {
			p.Logger.Error("dead-letters replay failed", "err", schemaHint(spec, err))
			return 1
		}
		ids = pending
	}
	verb := map[string]string{inbox.ReplayApplied: "applied", inbox.ReplayAlreadyApplied: "already applied before: dead letter resolved"}
	if dryRun {
		verb = map[string]string{inbox.ReplayApplied: "would apply", inbox.ReplayAlreadyApplied: "already applied before: would resolve the dead letter"}
	}
	counts := map[string]int{}
	for _, id := range ids {
		res, err := p.replayOne(ctx, id, dryRun)
		d := res.DeadLetter
		what := fmt.Sprintf("dead letter %d", id)
		if d.ID != 0 {
			what = fmt.Sprintf("dead letter %d (%s, event %s %s)", id, d.Consumer, orDash(d.EventID), orDash(d.EventType))
		}
		switch {
		case errors.Is(err, inbox.ErrNotFound):
			counts["failed"]++
			fmt.Fprintf(stdout, "dead letter %d: failed: not found\n", id)
		case err != nil:
			counts["failed"]++
			fmt.Fprintf(stdout, "%s: failed: %v\n", what, schemaHint(spec, err))
		case res.AlreadyReplayed:
			counts["already replayed"]++
			fmt.Fprintf(stdout, "%s: already replayed at %s (%s): nothing done\n", what,
				d.ReplayedAt.UTC().Format(time.RFC3339), res.Outcome)
		default:
			counts[res.Outcome]++
			fmt.Fprintf(stdout, "%s: %s\n", what, verb[res.Outcome])
		}
	}
	summary := fmt.Sprintf("%d dead letter(s): %d applied, %d already applied, %d already replayed, %d failed",
		len(ids), counts[inbox.ReplayApplied], counts[inbox.ReplayAlreadyApplied], counts["already replayed"], counts["failed"])
	if dryRun {
		summary = "dry run, nothing changed: " + strings.Replace(summary, " applied,", " would apply,", 1)
	}
	fmt.Fprintln(stdout, summary)
	if counts["failed"] > 0 {
		return 1
	}
	return 0
}

func (p *Platform) replayOne(ctx context.Context, id int64, dryRun bool) (inbox.ReplayResult, error) {
	d, err := inbox.GetDeadLetter(ctx, p.Pool, p.Config.Schema, id)
	if err != nil {
		return inbox.ReplayResult{}, err
	}
	c, ok := p.consumers[d.Consumer]
	if !ok {
		return inbox.ReplayResult{DeadLetter: d}, fmt.Errorf("no consumer %q in %s (consumers: %s)", d.Consumer, p.Name, p.consumerNames())
	}
	return c.Replay(ctx, id, dryRun)
}

// pendingDeadLetters are the ids of consumer's dead letters not replayed
// yet, oldest first (the order they were dead-lettered in).
func (p *Platform) pendingDeadLetters(ctx context.Context, consumer string) ([]int64, error) {
	var ids []int64
	for {
		list, err := inbox.ListDeadLetters(ctx, p.Pool, p.Config.Schema, inbox.DeadLetterFilter{
			Consumer: consumer, Pending: true, Limit: 1000, BeforeID: lastOr(ids)})
		if err != nil {
			return nil, err
		}
		for _, d := range list {
			ids = append(ids, d.ID)
		}
		if len(list) < 1000 {
			break
		}
	}
	// ListDeadLetters is newest first.
	for i, j := 0, len(ids)-1; i < j; i, j = i+1, j-1 {
		ids[i], ids[j] = ids[j], ids[i]
	}
	return ids, nil
}

func lastOr(ids []int64) int64 {
	if len(ids) == 0 {
		return 0
	}
	return ids[len(ids)-1]
}

func (p *Platform) consumerNames() string {
	if len(p.consumers) == 0 {
		return "none"
	}
	names := make([]string, 0, len(p.consumers))
	for n := range p.consumers {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
