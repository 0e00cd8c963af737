// Command benchsale measures POST /api/v1/track/sale and POST
// /api/v1/track/refund under load through the local gateway (`make
// bench-sale`). In one process it creates a fresh database, starts an
// in-process Kafka broker, the whole stack (tracking, commissions,
// accounts) and the gateway, seeds a program with a partner, a link and a
// live API key through the admin API, waits on the catalog sync barrier,
// creates one attributed customer (a click) per sale beforehand, then
// drives the sale route and the refund route, and a bare net/http
// reference (one INSERT per sale, one UPDATE per refund) on the same
// database with the same closed-loop load generator, and prints throughput
// and latency for both and their ratio.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Targets (printed as PASS/FAIL, never the exit status): each route at
// least half the reference's throughput, p99 under 25 ms.
const (
	targetRatio = 0.5
	targetP99   = 25 * time.Millisecond
)

const (
	salePath   = "/api/v1/track/sale"
	refundPath = "/api/v1/track/refund"
	clickPath  = "/api/v1/track/click"
)

// The bodies: every sale 25.00 USD for a fresh customer, every refund a
// partial 10.00 with its own refund id.
const (
	saleAmountCents   = 2500
	refundAmountCents = 1000
)

type options struct {
	duration, warmup time.Duration
	connections      int
	customers        int
	partners         int
	holdDays         int
	maxCustomers     int
	databaseURL      string
	dbMaxConns       int
	logFile          string
	cpuProfile       string
	logLevel         string
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("benchsale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	dbDefault := getenv("TEST_DATABASE_URL")
	if dbDefault == "" {
		dbDefault = "postgres://postgres@localhost:5432/postgres?sslmode=disable"
	}
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "measured load per route and target (a refund run also ends when every recorded sale is refunded)")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "unmeasured load per route and target before the measurement")
	fs.IntVar(&o.connections, "connections", 32, "concurrent keep-alive connections (one closed-loop worker each)")
	fs.IntVar(&o.customers, "customers", 0, "attributed customers (clicks) created before the measured service sale run; 0 sizes it from the warm-up's rate (1.5x rate x duration)")
	fs.IntVar(&o.holdDays, "hold-days", 30, "the program's hold period: 30 (the default of a program) keeps commissions pending; 0 credits each at once, and every sale of one partner then updates that partner's one balance row")
	fs.IntVar(&o.partners, "partners", 1, "approved partners, one link each; customers (and so sales) are spread round-robin over them")
	fs.IntVar(&o.maxCustomers, "max-customers", 400000, "upper bound of the automatic -customers")
	fs.StringVar(&o.databaseURL, "database-url", dbDefault, "Postgres server where a throwaway database is created and dropped (default: $TEST_DATABASE_URL or localhost)")
	fs.IntVar(&o.dbMaxConns, "db-max-conns", 24, "pool size of each service (DB_MAX_CONNS) and of the reference; three services and the reference must fit in the server's max_connections")
	fs.StringVar(&o.logFile, "log", "", "file for the services' logs (default: a file in the temp directory, printed at the end)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured service sale run to this file (the load generator included)")
	fs.StringVar(&o.logLevel, "log-level", "warn", "services' LOG_LEVEL")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.duration <= 0, o.warmup < 0:
		return o, errors.New("-duration must be positive and -warmup not negative")
	case o.connections < 1:
		return o, errors.New("-connections must be at least 1")
	case o.partners < 1:
		return o, errors.New("-partners must be at least 1")
	case o.customers < 0, o.maxCustomers < 1:
		return o, errors.New("-customers must not be negative and -max-customers must be positive")
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
		fmt.Fprintln(stderr, "benchsale:", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rep, err := bench(ctx, o, logger)
	if err != nil {
		fmt.Fprintln(stderr, "benchsale:", err)
		return 1
	}
	rep.print(stdout)
	return 0
}

// report is everything one invocation measured.
type report struct {
	opts      options
	programID int64
	customers int // clicks created for the measured service sale run
	clicksPS  float64
	results   map[string]Result // "sale reference", "sale floor", "sale service", "refund reference", "refund service"
	logPath   string
}

// saleBody is sale n's body; the reference gets the same shape.
func saleBody(n int, clickID string) []byte {
	return fmt.Appendf(nil, `{"transaction_id":"bench_%d","amount_cents":%d,"currency":"USD","click_id":%q}`, n, saleAmountCents, clickID)
}

func refundBody(n int) []byte {
	return fmt.Appendf(nil, `{"transaction_id":"bench_%d","refund_amount_cents":%d,"refund_id":"r_%d"}`, n, refundAmountCents, n)
}

func bench(ctx context.Context, o options, logger *slog.Logger) (*report, error) {
	logs, logPath, err := openLog(o.logFile)
	if err != nil {
		return nil, err
	}
	defer logs.Close()
	rep := &report{opts: o, results: map[string]Result{}, logPath: logPath}

	logger.Info("starting tracking, commissions, accounts and the gateway in-process", "service_logs", logPath)
	st, err := startStack(ctx, o.databaseURL, logs, o.logLevel, o.dbMaxConns)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	gw := "http://" + st.Gateway

	adm := &admin{base: gw, token: st.AdminToken, http: &http.Client{Timeout: 60 * time.Second}}
	cat, err := seedCatalog(ctx, adm, o.partners, o.holdDays)
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	rep.programID = cat.ProgramID
	logger.Info("catalog seeded and synced", "program_id", cat.ProgramID, "catalog_seq", cat.Seq)

	ref, err := openReference(ctx, st.DSN, int32(o.dbMaxConns))
	if err != nil {
		return nil, err
	}
	defer ref.Close(context.WithoutCancel(ctx))
	refAddr, stopRef, err := serveHTTP(ref.handler())
	if err != nil {
		return nil, fmt.Errorf("reference: %w", err)
	}
	defer stopRef()
	refBase := "http://" + refAddr

	// A separate small pool for settling between runs, so the reference's
	// pool can be emptied once its runs are done.
	db, err := openPool(ctx, st.DSN, 2, "benchsale")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	checkConnections(ctx, db, o.dbMaxConns, logger)

	client := newClient(o.connections)
	defer client.CloseIdleConnections()
	d := &driver{ctx: ctx, logger: logger, client: client, db: db, o: o}

	// Sales on the reference: no customers needed, click ids of the same
	// shape as the service's.
	n := 0 // transaction numbers, unique across the run
	refSale := func(base int) func(int) []byte {
		return func(i int) []byte { return saleBody(base+i, "cust_1700000000000_ref"+strconv.Itoa(base+i)) }
	}
	refWarm, refMeasured, err := d.phase("sale reference", refBase+salePath, "", -1, refSale(n), refSale(1_000_000_000))
	if err != nil {
		return nil, err
	}
	rep.results["sale reference"] = refMeasured

	// The floor: the least any implementation of the design can
	// do per sale (floor.go), on the reference's pool.
	floor, err := openFloor(ctx, ref.pool, o.connections)
	if err != nil {
		return nil, err
	}
	defer floor.client.CloseIdleConnections()
	trackAddr, stopTrack, err := serveHTTP(floor.trackingHandler())
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	defer stopTrack()
	floor.decideAt = "http://" + trackAddr + "/decide"
	floorAddr, stopFloor, err := serveHTTP(floor.salesHandler())
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	defer stopFloor()
	_, floorMeasured, err := d.phase("sale floor", "http://"+floorAddr+salePath, "", -1, refSale(2_000_000_000), refSale(3_000_000_000))
	if err != nil {
		return nil, err
	}
	rep.results["sale floor"] = floorMeasured
	ref.pool.Reset() // its idle connections would count against max_connections during the service runs

	// Sales through the gateway: one fresh attributed customer per sale,
	// created (not timed) before each run.
	warmN := 0
	if o.warmup > 0 {
		warmN = max(2000, o.connections*100)
	}
	d.settle()
	warmClicks, _, err := createCustomers(ctx, client, gw+clickPath, cat.Codes, 0, warmN, o.connections, logger)
	if err != nil {
		return nil, err
	}
	var svcWarm Result
	if warmN > 0 {
		logger.Info("warming up", "phase", "sale service", "for", o.warmup)
		svcWarm, err = runLoad(ctx, client, LoadConfig{Name: "sale service warm-up", URL: gw + salePath, APIKey: cat.APIKey, Connections: o.connections,
			Duration: o.warmup, Jobs: len(warmClicks), Body: func(i int) []byte { return saleBody(n+i, warmClicks[i]) }})
		if err != nil {
			return nil, err
		}
		logWarm(logger, svcWarm)
	}
	measuredBase := n + warmN
	need := o.customers
	if need == 0 {
		rate := svcWarm.Throughput()
		if rate <= 0 {
			rate = 500 // no warm-up, or nothing succeeded: a guess, the run reports exhaustion
		}
		need = min(o.maxCustomers, int(rate*o.duration.Seconds()*1.5)+1000)
	}
	clicks, clicksPS, err := createCustomers(ctx, client, gw+clickPath, cat.Codes, warmN, need, o.connections, logger)
	if err != nil {
		return nil, err
	}
	rep.customers, rep.clicksPS = len(clicks), clicksPS
	d.settle()
	logger.Info("measuring", "phase", "sale service", "for", o.duration, "connections", o.connections, "customers", len(clicks))
	stopProfile, err := startProfile(o.cpuProfile)
	if err != nil {
		return nil, err
	}
	svcSale, err := runLoad(ctx, client, LoadConfig{Name: "sale service", URL: gw + salePath, APIKey: cat.APIKey, Connections: o.connections,
		Duration: o.duration, Jobs: len(clicks), Body: func(i int) []byte { return saleBody(measuredBase+i, clicks[i]) }})
	stopProfile()
	if err != nil {
		return nil, err
	}
	rep.results["sale service"] = svcSale

	// Refunds: each recorded sale once, warm-up sales first (unmeasured).
	refundOf := func(base int, done []int) func(int) []byte {
		return func(i int) []byte { return refundBody(base + done[i]) }
	}
	_, refRefund, err := d.phaseOver("refund reference", refBase+refundPath, "", refundOf(0, refWarm.Done), len(refWarm.Done), refundOf(1_000_000_000, refMeasured.Done), len(refMeasured.Done))
	if err != nil {
		return nil, err
	}
	rep.results["refund reference"] = refRefund
	ref.pool.Reset()
	_, svcRefund, err := d.phaseOver("refund service", gw+refundPath, cat.APIKey, refundOf(n, svcWarm.Done), len(svcWarm.Done), refundOf(measuredBase, svcSale.Done), len(svcSale.Done))
	if err != nil {
		return nil, err
	}
	rep.results["refund service"] = svcRefund
	return rep, nil
}

// driver runs the warm-up and measured runs of one phase.
type driver struct {
	ctx    context.Context
	logger *slog.Logger
	client *http.Client
	db     *pgxpool.Pool
	o      options
}

// phase settles the database, warms url up for the warm-up duration, then
// measures it for the duration; jobs < 0 is unbounded.
func (d *driver) phase(name, url, key string, jobs int, warmBody, body func(int) []byte) (Result, Result, error) {
	return d.run(name, url, key, warmBody, jobs, body, jobs)
}

// phaseOver is phase over a fixed number of jobs per run (refunds of the
// sales recorded).
func (d *driver) phaseOver(name, url, key string, warmBody func(int) []byte, warmJobs int, body func(int) []byte, jobs int) (Result, Result, error) {
	return d.run(name, url, key, warmBody, warmJobs, body, jobs)
}

func (d *driver) run(name, url, key string, warmBody func(int) []byte, warmJobs int, body func(int) []byte, jobs int) (Result, Result, error) {
	d.settle()
	var warm Result
	if d.o.warmup > 0 && warmJobs != 0 {
		d.logger.Info("warming up", "phase", name, "for", d.o.warmup)
		var err error
		warm, err = runLoad(d.ctx, d.client, LoadConfig{Name: name + " warm-up", URL: url, APIKey: key, Connections: d.o.connections, Duration: d.o.warmup, Jobs: warmJobs, Body: warmBody})
		if err != nil {
			return Result{}, Result{}, fmt.Errorf("%s warm-up: %w", name, err)
		}
		logWarm(d.logger, warm)
	}
	if jobs == 0 {
		d.logger.Warn("nothing to measure: no sale was recorded", "phase", name)
		return warm, Result{Name: name, Statuses: map[int]int64{}}, nil
	}
	d.logger.Info("measuring", "phase", name, "for", d.o.duration, "connections", d.o.connections)
	res, err := runLoad(d.ctx, d.client, LoadConfig{Name: name, URL: url, APIKey: key, Connections: d.o.connections, Duration: d.o.duration, Jobs: jobs, Body: body})
	if err != nil {
		return Result{}, Result{}, fmt.Errorf("%s: %w", name, err)
	}
	if d.ctx.Err() != nil {
		return Result{}, Result{}, fmt.Errorf("%s: interrupted: %w", name, d.ctx.Err())
	}
	return warm, res, nil
}

func logWarm(logger *slog.Logger, r Result) {
	logger.Info("warm-up done", "phase", r.Name, "ok", r.OK, "per_second", int(r.Throughput()), "statuses", statusList(r.Statuses))
}

// settle waits for the services' outboxes to drain, then vacuums and
// checkpoints the benchmark database, so a run does not pay for the
// previous one's aftermath (events still to publish, autovacuum, dirty
// buffers). Best effort: CHECKPOINT needs a superuser or pg_checkpoint.
func (d *driver) settle() {
	ctx, db := d.ctx, d.db
	start := time.Now()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var unsent int64
		err := db.QueryRow(ctx, `SELECT
			  CASE WHEN to_regclass('tracking.outbox') IS NULL THEN 0 ELSE (SELECT count(*) FROM tracking.outbox WHERE sent_at IS NULL) END
			+ CASE WHEN to_regclass('commissions.outbox') IS NULL THEN 0 ELSE (SELECT count(*) FROM commissions.outbox WHERE sent_at IS NULL) END`).Scan(&unsent)
		if err != nil || unsent == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			if unsent > 0 {
				d.logger.Warn("outboxes not drained before the next run", "unsent", unsent)
			}
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, err := db.Exec(ctx, "VACUUM (ANALYZE)"); err != nil {
		d.logger.Warn("vacuum before the next run", "err", err)
	}
	if _, err := db.Exec(ctx, "CHECKPOINT"); err != nil {
		d.logger.Warn("checkpoint before the next run", "err", err)
	}
	d.logger.Info("database settled", "took", time.Since(start).Round(time.Millisecond))
}

// checkConnections warns when the three services' pools (accounts mostly
// idle) and the reference's, at dbMaxConns each, may not fit in what the
// server has left: connections refused then answer 500 and measure nothing
// (seen at 32 each on a server with max_connections 100).
func checkConnections(ctx context.Context, db *pgxpool.Pool, dbMaxConns int, logger *slog.Logger) {
	var maxConns, reserved, used int
	err := db.QueryRow(ctx, `SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int,
		(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')`).Scan(&maxConns, &reserved, &used)
	if err != nil {
		logger.Warn("could not read max_connections", "err", err)
		return
	}
	if free, need := maxConns-reserved-used, 3*dbMaxConns; need > free {
		logger.Warn("the services and the reference may run out of Postgres connections (lower -db-max-conns)",
			"max_connections", maxConns, "in_use", used, "needed_up_to", need)
	}
}

// createCustomers records n clicks through the gateway, round-robin over
// the links' codes, click i from its own public client address (X-Forwarded-For, believed from
// loopback, a trusted proxy), and returns their click ids in order and the
// clicks per second. Every click must succeed: a sale without its customer
// would measure the wrong thing.
func createCustomers(ctx context.Context, client *http.Client, url string, codes []string, first, n, connections int, logger *slog.Logger) ([]string, float64, error) {
	if n == 0 {
		return nil, 0, nil
	}
	logger.Info("creating attributed customers (clicks, not timed)", "count", n)
	ids := make([]string, n)
	bodies := make([][]byte, len(codes))
	for i, code := range codes {
		bodies[i] = fmt.Appendf(nil, `{"affiliate_url":"https://brand.example/?via=%s"}`, code)
	}
	start := time.Now()
	err := forEach(ctx, n, connections, func(i int) error {
		id, err := click(ctx, client, url, bodies[(first+i)%len(bodies)], clientIP(first+i))
		ids[i] = id
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("create customers: %w", err)
	}
	took := time.Since(start)
	rate := float64(n) / took.Seconds()
	logger.Info("customers created", "count", n, "took", took.Round(time.Millisecond), "per_second", int(rate))
	return ids, rate, nil
}

// clientIP is the i-th of 15.6 million public addresses 23.b.c.d, none
// ending in .0 or .255.
func clientIP(i int) string {
	return fmt.Sprintf("23.%d.%d.%d", (i/62500)%250, (i/250)%250, i%250+1)
}

// forEach runs f(0..n-1) on workers goroutines and returns the first error.
func forEach(ctx context.Context, n, workers int, f func(int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range next {
				if err := f(i); err != nil {
					cancel(err)
				}
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	for range workers {
		<-done
	}
	return context.Cause(ctx)
}

func click(ctx context.Context, client *http.Client, url string, body []byte, ip string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", ip)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("click: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("click: %d %.300s", resp.StatusCode, raw)
	}
	id, ok := clickIDOf(raw)
	if !ok {
		return "", fmt.Errorf("click: no click_id in %.300s", raw)
	}
	return id, nil
}

// startProfile starts a CPU profile into path ("" does nothing) and
// returns what stops it.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

func openLog(path string) (io.WriteCloser, string, error) {
	if path == "" {
		f, err := os.CreateTemp("", "benchsale-*.log")
		if err != nil {
			return nil, "", fmt.Errorf("service log: %w", err)
		}
		return f, f.Name(), nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("service log: %w", err)
	}
	abs, _ := filepath.Abs(path)
	return f, abs, nil
}

// statusList renders status counts as "200:1234 404:5", sorted by status.
func statusList(m map[int]int64) string {
	var b strings.Builder
	for _, code := range slices.Sorted(maps.Keys(m)) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%d", code, m[code])
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}

func (r *report) print(out io.Writer) {
	o := r.opts
	fmt.Fprintf(out, "\nPOST %s and POST %s through the local gateway, %d connections, %s measured per route and target after a %s warm-up\n",
		salePath, refundPath, o.connections, o.duration, o.warmup)
	fmt.Fprintf(out, "in one process: tracking + commissions + accounts + gateway + reference + load generator (GOMAXPROCS=%d, %d CPUs), Postgres on the same machine; pool size %d\n",
		runtime.GOMAXPROCS(0), runtime.NumCPU(), o.dbMaxConns)
	fmt.Fprintf(out, "program %d (percent 10, hold %d days), %d approved partner(s), sales spread round-robin; %d fresh attributed customers for the measured service sales (clicks created beforehand at %.0f/s, not timed)\n\n",
		r.programID, o.holdDays, o.partners, r.customers, r.clicksPS)
	order := []string{"sale reference", "sale floor", "sale service", "refund reference", "refund service"}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\trequests\t200/s\tp50\tp90\tp99\tmax\tstatuses\ttransport err\tseconds\t")
	for _, name := range order {
		res, ok := r.results[name]
		if !ok {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d\t%.1f\t\n", name, res.Requests, res.Throughput(),
			ms(res.Latency.P50), ms(res.Latency.P90), ms(res.Latency.P99), ms(res.Latency.Max),
			statusList(res.Statuses), res.TransportErrors, res.Elapsed.Seconds())
	}
	_ = tw.Flush()
	fmt.Fprintln(out)
	for _, name := range order {
		res, ok := r.results[name]
		if !ok {
			continue
		}
		for _, code := range slices.Sorted(maps.Keys(res.Failures)) {
			fmt.Fprintf(out, "%s: first %d answer: %s\n", name, code, res.Failures[code])
		}
		if res.FirstTransport != "" {
			fmt.Fprintf(out, "%s: first transport error: %s\n", name, res.FirstTransport)
		}
		if len(res.Outcomes) > 0 && strings.HasPrefix(name, "refund") {
			fmt.Fprintf(out, "%s: 200 answers by status: %v\n", name, res.Outcomes)
		}
		if res.Exhausted {
			fmt.Fprintf(out, "%s: every job was sent after %.1fs (before -duration): the figures cover that time\n", name, res.Elapsed.Seconds())
		}
	}
	if res, ok := r.results["refund service"]; ok && res.OK == 0 && res.Statuses[http.StatusNotFound] > 0 {
		fmt.Fprintf(out, "refund service: POST %s answered 404 (%d of %d requests): the route is not served by this build of the stack; no refund figure\n",
			refundPath, res.Statuses[http.StatusNotFound], res.Requests)
	}
	fmt.Fprintln(out)
	for _, route := range []string{"sale", "refund"} {
		svc, okS := r.results[route+" service"]
		ref, okR := r.results[route+" reference"]
		if !okS || !okR {
			continue
		}
		ratio := 0.0
		if ref.Throughput() > 0 {
			ratio = svc.Throughput() / ref.Throughput()
		}
		pass := svc.OK > 0 && ratio >= targetRatio && svc.Latency.P99 < targetP99
		fmt.Fprintf(out, "%-6s service/reference throughput %.2fx (target >= %.2fx), service p99 %s (target < %s), reference p99 %s: %s\n",
			route, ratio, targetRatio, ms(svc.Latency.P99), ms(targetP99), ms(ref.Latency.P99), verdict(pass))
	}
	if floor, ok := r.results["sale floor"]; ok {
		if ref, ok := r.results["sale reference"]; ok && ref.Throughput() > 0 {
			fmt.Fprintf(out, "sale   floor/reference throughput %.2fx, floor p99 %s: the most any sale route of this design reaches here (three commits: the reservation, tracking's decision over HTTP, the sale with its commission and event)\n",
				floor.Throughput()/ref.Throughput(), ms(floor.Latency.P99))
		}
	}
	fmt.Fprintf(out, "service logs: %s\n", r.logPath)
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// ms formats a latency in milliseconds with two decimals.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
}
