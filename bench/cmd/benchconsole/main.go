// Command benchconsole measures the brand console's three big lists through
// the local gateway (`make bench-console`): the partners list
// (`GET /api/v1/programs/{id}/partners`, accounts with analytics' figures),
// the commissions list (`GET /api/v1/programs/{id}/commissions`) and the
// payouts list (`GET /api/v1/programs/{id}/payouts`, both commissions), with
// a dashboard session, over one program of -partners partners (10,000)
// and -commissions commissions (1,000,000), at -clients (8) concurrent
// clients; next to a reference: the same page read straight from Postgres
// by one bare keyset query, on the same database and load generator.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/svc-dev/svc/bench/internal/rig"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// targetP99 is the issue's: every list under 50 ms at p99 with 8 clients
// (printed as PASS/FAIL, never the exit status).
const targetP99 = 50 * time.Millisecond

type options struct {
	duration, warmup time.Duration
	clients          int
	partners         int
	commissions      int
	depth            int
	databaseURL      string
	dbMaxConns       int
	logFile          string
	logLevel         string
	keep             bool
	cpuProfile       string
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("benchconsole", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured load per list and target")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load per list and target before the measurement")
	fs.IntVar(&o.clients, "clients", 8, "concurrent clients (one keep-alive connection and closed loop each)")
	fs.IntVar(&o.partners, "partners", 10000, "partners of the program, created through the admin API (one link each)")
	fs.IntVar(&o.commissions, "commissions", 1000000, "commissions of the program (with their sales), written in bulk")
	fs.IntVar(&o.depth, "depth", 20, "pages of each list walked once beforehand: requests ask for the first page, a filtered page, or one of these pages by its cursor")
	fs.StringVar(&o.databaseURL, "database-url", rig.DefaultDatabaseURL(getenv), "Postgres server where a throwaway database is created and dropped (default: $TEST_DATABASE_URL or localhost)")
	fs.IntVar(&o.dbMaxConns, "db-max-conns", 8, "pool size of each service (DB_MAX_CONNS) and of the reference")
	fs.StringVar(&o.logFile, "log", "", "file for the services' logs (default: a file in the temp directory, printed at the end)")
	fs.StringVar(&o.logLevel, "log-level", "warn", "services' LOG_LEVEL")
	fs.BoolVar(&o.keep, "keep", false, "keep the database (its URL is printed) for EXPLAIN")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the CPU profile of each list's measured service run to <prefix>-<list>.pprof (every service runs in this process; Postgres' share is not in it)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.duration <= 0, o.warmup < 0:
		return o, errors.New("-duration must be positive and -warmup not negative")
	case o.clients < 1:
		return o, errors.New("-clients must be at least 1")
	case o.partners < 1, o.commissions < 0:
		return o, errors.New("-partners must be at least 1 and -commissions not negative")
	case o.depth < 1:
		return o, errors.New("-depth must be at least 1")
	case o.dbMaxConns < 1:
		return o, errors.New("-db-max-conns must be at least 1")
	}
	return o, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, getenv, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "benchconsole:", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rep, err := bench(ctx, o, logger)
	if err != nil {
		fmt.Fprintln(stderr, "benchconsole:", err)
		return 1
	}
	rep.print(stdout)
	return 0
}
