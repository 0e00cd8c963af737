// Command benchclick measures POST /api/v1/track/click under load
// (`make bench-tracking`). In one process it creates a fresh database,
// starts an in-process Kafka broker, accounts and tracking, seeds a program
// with many links through the admin API and waits on the catalog sync
// barrier; then it drives the click route, and a bare net/http + one-INSERT
// reference server on the same database, with the same closed-loop load
// generator, and prints throughput and latency for both and their ratio.
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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/bench/internal/rig"
	"github.com/svc-dev/svc/bench/load"
	tracking "github.com/svc-dev/svc/services/tracking/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// serviceClickTable is where tracking stores click events (its migration
// 00002_ingest.sql); counted after the run as a sanity check only.
const serviceClickTable = "tracking.affiliate_click_events"

// options are the command-line flags.
type options struct {
	duration, warmup time.Duration
	connections      int
	partners, links  int
	ips              int
	reuse            float64
	withProgram      float64
	targets          []string
	databaseURL      string
	dbMaxConns       int
	origin           string
	cpuProfile       string
	logFile          string
	logLevel         string
	seed             uint64
	check            bool
}

// Targets at 64 connections on the 2-core development machine: straight
// to tracking ≥ 0.8× the reference's throughput, through the gateway (the
// path users take) ≥ 0.6×, and p99 under 25 ms on both.
var targetRatios = map[string]float64{"service": 0.8, "gateway": 0.6}

const targetP99 = 25 * time.Millisecond

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("benchclick", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	targets := fs.String("targets", "reference,service,gateway", "what to drive, in order: reference, service (tracking's own port), gateway (the local gateway, as users reach it) or all (comma-separated)")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "measured load per target")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "unmeasured load per target before the measurement (pools, connections, caches)")
	fs.IntVar(&o.connections, "connections", 64, "concurrent keep-alive connections (one closed-loop worker each)")
	fs.IntVar(&o.partners, "partners", 20, "partners enrolled in the benchmark program")
	fs.IntVar(&o.links, "links", 200, "referral links, spread evenly over the partners")
	fs.IntVar(&o.ips, "ips", 65536, "distinct X-Forwarded-For client addresses, used round-robin (the click limit is 60/min per address)")
	fs.Float64Var(&o.reuse, "reuse", 0.2, "share of clicks sending an existing_click_id the target returned earlier")
	fs.Float64Var(&o.withProgram, "with-program", 0.5, "share of clicks naming program_id")
	fs.StringVar(&o.databaseURL, "database-url", rig.DefaultDatabaseURL(getenv), "Postgres server where a throwaway database is created and dropped (default: $TEST_DATABASE_URL or localhost)")
	fs.IntVar(&o.dbMaxConns, "db-max-conns", 32, "pool size of the service (DB_MAX_CONNS) and of the reference")
	fs.StringVar(&o.origin, "origin", "http://localhost:3000", "page origin the clicks come from (allowed by the program)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured service run to this file")
	fs.StringVar(&o.logFile, "log", "", "file for the services' logs (default: a file in the temp directory, printed at the end)")
	fs.StringVar(&o.logLevel, "log-level", "warn", "services' LOG_LEVEL")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the request generator (runs with the same seed send the same bodies)")
	fs.BoolVar(&o.check, "check", false, "exit 1 when a target is missed (service >= 0.8x and gateway >= 0.6x the reference, p99 < 25ms)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for _, t := range strings.Split(*targets, ",") {
		switch t = strings.TrimSpace(t); t {
		case "reference", "service", "gateway":
			if !slices.Contains(o.targets, t) {
				o.targets = append(o.targets, t)
			}
		case "all", "both":
			o.targets = []string{"reference", "service", "gateway"}
		default:
			return o, fmt.Errorf("-targets: unknown target %q (reference, service, gateway, all)", t)
		}
	}
	switch {
	case o.duration <= 0, o.warmup < 0:
		return o, errors.New("-duration must be positive and -warmup not negative")
	case o.connections < 1:
		return o, errors.New("-connections must be at least 1")
	case o.partners < 1 || o.links < o.partners:
		return o, errors.New("-partners must be at least 1 and -links at least -partners")
	case o.ips < 1:
		return o, errors.New("-ips must be at least 1")
	case o.reuse < 0 || o.reuse > 1 || o.withProgram < 0 || o.withProgram > 1:
		return o, errors.New("-reuse and -with-program are shares between 0 and 1")
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
		fmt.Fprintln(stderr, "benchclick:", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rep, err := bench(ctx, o, logger)
	if err != nil {
		fmt.Fprintln(stderr, "benchclick:", err)
		return 1
	}
	rep.print(stdout)
	if o.check && !rep.meetsTargets() {
		return 1
	}
	return 0
}

// report is everything one invocation measured.
type report struct {
	opts      options
	programID int64
	results   []Result
	rows      map[string]string // target -> rows recorded, for the sanity line
	logPath   string
	profile   string
}

func bench(ctx context.Context, o options, logger *slog.Logger) (*report, error) {
	logs, logPath, err := rig.OpenLog(o.logFile, "benchclick")
	if err != nil {
		return nil, err
	}
	defer logs.Close()
	rep := &report{opts: o, rows: map[string]string{}, logPath: logPath}

	logger.Info("starting accounts and tracking in-process", "database_server", redact(o.databaseURL), "service_logs", logPath)
	st, err := startStack(ctx, o.databaseURL, logs, o.logLevel, o.dbMaxConns)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	trackingInstance := st.Services.Instance(tracking.Name)

	seedStart := time.Now()
	cat, err := seedCatalog(ctx, st.Admin(), o.origin, o.partners, o.links)
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	rep.programID = cat.ProgramID
	logger.Info("catalog seeded and synced", "program_id", cat.ProgramID, "links", len(cat.Codes), "partners", o.partners, "catalog_seq", cat.Seq, "took", time.Since(seedStart).Round(time.Millisecond))

	w := newWorkload(cat.Codes, cat.ProgramID, o.origin, publicIPs(o.ips, o.seed), o.reuse, o.withProgram)

	ref, err := openReference(ctx, st.DSN, int32(o.dbMaxConns), logger)
	if err != nil {
		return nil, err
	}
	defer ref.Close()
	refAddr, stopRef, err := rig.Serve(ref.handler())
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	defer stopRef()

	// The gateway of `make run`, with the same routing table and the
	// services' handlers in process.
	urls := map[string]string{
		"reference": "http://" + refAddr + "/api/v1/track/click",
		"service":   "http://" + trackingInstance.Addr() + "/api/v1/track/click",
		"gateway":   "http://" + st.Gateway + "/api/v1/track/click",
	}
	for i, target := range o.targets {
		rig.Settle(ctx, ref.pool, logger, "tracking.outbox")
		cfg := LoadConfig{Name: target, URL: urls[target], Connections: o.connections, Workload: w, Seed: o.seed*1000 + uint64(i)*100}
		res, err := drivePhases(ctx, logger, cfg, o, target == "service", ref.pool)
		if err != nil {
			return nil, err
		}
		if target == "service" && o.cpuProfile != "" {
			rep.profile = o.cpuProfile
		}
		rep.results = append(rep.results, res)
	}

	// Sanity: the answers were backed by rows.
	if n, ok, err := countRows(ctx, ref.pool, referenceSchema+".click_events"); err == nil && ok {
		rep.rows["reference"] = strconv.FormatInt(n, 10) + " rows in " + referenceSchema + ".click_events"
	}
	if n, ok, err := countRows(ctx, trackingInstance.Platform().Pool, serviceClickTable); err == nil && ok {
		// The service and gateway targets write to the same table.
		rep.rows["service"] = strconv.FormatInt(n, 10) + " rows in " + serviceClickTable + " (service and gateway targets)"
	}
	return rep, nil
}

// drivePhases warms the target up, then measures it; the CPU profile, when
// asked for, covers only the measured service run.
func drivePhases(ctx context.Context, logger *slog.Logger, cfg LoadConfig, o options, profile bool, db *pgxpool.Pool) (Result, error) {
	client := load.NewClient(cfg.Connections)
	defer client.CloseIdleConnections()
	var warmOK int64
	if o.warmup > 0 {
		logger.Info("warming up", "target", cfg.Name, "for", o.warmup)
		wcfg := cfg
		wcfg.Duration = o.warmup
		wcfg.Seed += 50
		wres, err := runLoad(ctx, client, wcfg)
		if err != nil {
			return Result{}, fmt.Errorf("%s warm-up: %w", cfg.Name, err)
		}
		warmOK = wres.OK
	}
	if profile {
		stop, err := rig.StartProfile(o.cpuProfile)
		if err != nil {
			return Result{}, err
		}
		defer stop()
	}
	logger.Info("measuring", "target", cfg.Name, "for", o.duration, "connections", cfg.Connections)
	cfg.Duration = o.duration
	load := loadAverage()
	before := sampleCPU(ctx, db)
	res, err := runLoad(ctx, client, cfg)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	res.CPU = cpuBetween(before, sampleCPU(ctx, db))
	res.LoadBefore, res.LoadAfter = load, loadAverage()
	if ctx.Err() != nil {
		return Result{}, fmt.Errorf("%s: interrupted: %w", cfg.Name, ctx.Err())
	}
	res.WarmupOK = warmOK
	return res, nil
}

func (r *report) find(name string) (Result, bool) {
	for _, res := range r.results {
		if res.Name == name {
			return res, true
		}
	}
	return Result{}, false
}

// meetsTargets reports whether every measured target (service, gateway)
// reached its throughput ratio and the p99 target; without a reference run
// only the p99 target is judged.
func (r *report) meetsTargets() bool {
	measured := 0
	ref, hasRef := r.find("reference")
	for name, ratio := range targetRatios {
		res, ok := r.find(name)
		if !ok {
			continue
		}
		measured++
		if res.OK == 0 || res.Latency.P99 >= targetP99 {
			return false
		}
		if hasRef && ref.Throughput() > 0 && res.Throughput()/ref.Throughput() < ratio {
			return false
		}
	}
	return measured > 0
}

func (r *report) print(out io.Writer) {
	o := r.opts
	fmt.Fprintf(out, "\nPOST /api/v1/track/click, %d connections, %s measured per target after a %s warm-up\n", o.connections, o.duration, o.warmup)
	fmt.Fprintf(out, "in one process: accounts + tracking + reference + load generator (GOMAXPROCS=%d, %d CPUs), Postgres on the same machine\n", runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Fprintf(out, "program %d: %d links over %d partners; %d forwarded client IPs round-robin; %.0f%% existing_click_id reuse, %.0f%% with program_id; pool size %d\n\n",
		r.programID, o.links, o.partners, o.ips, o.reuse*100, o.withProgram*100, o.dbMaxConns)
	results := make([]load.Result, len(r.results))
	for i, res := range r.results {
		results[i] = res.Result
	}
	load.Write(out, results...)
	fmt.Fprintln(out)
	for _, res := range r.results {
		if rows, ok := r.rows[res.Name]; ok {
			fmt.Fprintf(out, "%s recorded: %s; %d clicks answered OK (warm-up and measured run)\n", res.Name, rows, res.OK+res.WarmupOK)
		}
	}
	for _, res := range r.results {
		db := "n/a (Postgres not on this machine)"
		if res.CPU.DBKnown {
			db = perClick(res.CPU.DB, res.OK)
		}
		fmt.Fprintf(out, "%s CPU per click: %s in this process (generator included), %s in Postgres; load average %s -> %s\n",
			res.Name, perClick(res.CPU.Self, res.OK), db, orNA(res.LoadBefore), orNA(res.LoadAfter))
	}
	ref, okR := r.find("reference")
	for _, name := range []string{"service", "gateway"} {
		res, ok := r.find(name)
		if !ok {
			continue
		}
		if okR && ref.Throughput() > 0 {
			ratio := res.Throughput() / ref.Throughput()
			fmt.Fprintf(out, "%s/reference throughput: %.2fx (target >= %.2fx): %s\n", name, ratio, targetRatios[name], load.Verdict(ratio >= targetRatios[name]))
		}
		fmt.Fprintf(out, "%s p99: %s (target < %s): %s\n", name, load.MS(res.Latency.P99), load.MS(targetP99), load.Verdict(res.OK > 0 && res.Latency.P99 < targetP99))
	}
	if r.profile != "" {
		fmt.Fprintf(out, "cpu profile of the measured service run: %s (go tool pprof -top %s)\n", r.profile, r.profile)
	}
	fmt.Fprintf(out, "service logs: %s\n", r.logPath)
}

func orNA(s string) string {
	if s == "" {
		return "n/a"
	}
	return s
}

// redact hides a password in a URL DSN for logs.
func redact(dsn string) string {
	i := strings.Index(dsn, "://")
	at := strings.LastIndex(dsn, "@")
	if i < 0 || at < i {
		return dsn
	}
	cred := dsn[i+3 : at]
	if c := strings.IndexByte(cred, ':'); c >= 0 {
		return dsn[:i+3] + cred[:c] + ":xxxxx" + dsn[at:]
	}
	return dsn
}
