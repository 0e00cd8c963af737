package platform

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/libs/pg"
)

// Command is a service's own subcommand (`analytics fx import <csv>`):
// Run gets the service's schema, migrated first, and the rest of the
// command line; its result is the process's exit status (2 for usage).
type Command struct {
	// Usage is the command's one-line synopsis after the service's name.
	Usage string
	Run   func(ctx context.Context, c CommandEnv, args []string) int
}

// CommandEnv is what a Command runs with: the service's configuration,
// a small pool on its migrated schema, and where to write.
type CommandEnv struct {
	Config Config
	Env    *obs.Env
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Now    func() time.Time
}

// WithStdin is what a service's command reads as its standard input
// (default os.Stdin).
func WithStdin(r io.Reader) Option {
	return func(o *options) { o.stdin = r }
}

// commandNames lists the built-in and the spec's commands for usage.
func commandNames(spec Spec) string {
	return strings.Join(append([]string{"serve", "migrate", "dead-letters"}, sortedCommands(spec)...), "|")
}

func sortedCommands(spec Spec) []string {
	names := make([]string, 0, len(spec.Commands))
	for name := range spec.Commands {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// runCommand migrates the schema, opens a pool on it and runs cmd.
func runCommand(ctx context.Context, spec Spec, name string, cmd Command, args []string, getenv func(string) string, stdout io.Writer, opts []Option) int {
	o := options{stderr: stdout, stdin: os.Stdin, now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	env := obs.NewEnv(getenv)
	cfg := LoadConfig(spec.Name, env)
	logger := obs.NewLogger(o.stderr, cfg.LogLevel).With("service", spec.Name, "command", name)
	if err := env.Err(); err != nil {
		logger.Error("command failed", "err", fmt.Errorf("config: %w", err))
		return 1
	}
	if err := spec.validate(); err != nil {
		logger.Error("command failed", "err", err)
		return 1
	}
	if err := migrate(ctx, spec, cfg, logger); err != nil {
		logger.Error("command failed", "err", err)
		return 1
	}
	pool, err := pg.NewPool(ctx, cfg.DatabaseURL, pg.Options{Schema: cfg.Schema, MaxConns: 4, AppName: spec.Name + "-" + name})
	if err != nil {
		logger.Error("command failed", "err", fmt.Errorf("postgres: %w", err))
		return 1
	}
	defer pool.Close()
	return cmd.Run(ctx, CommandEnv{Config: cfg, Env: env, Pool: pool, Logger: logger, Stdin: o.stdin, Stdout: stdout, Stderr: o.stderr, Now: o.now}, args)
}
