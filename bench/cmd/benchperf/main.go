// Command benchperf measures analytics' performance route,
// GET /api/tracking/performance/{programId}, for period=all and
// period=90d over a program with two years of activity (`make
// bench-perf`). In one process it creates a fresh database, starts an
// in-process Kafka broker and analytics (platform.Start, its migrations,
// consumers and HTTP server) on a frozen clock, seeds the catalog replica
// and the aggregate tables straight with SQL (at least 10 million clicks,
// with leads, conversions, sales and money in USD, EUR and VND), and a raw
// per-click reference table holding the same clicks. It checks the route's
// answers against the seed, then times a fixed number of requests per
// period with concurrent clients, and the reference (the same daily click
// counts GROUP BY day over the raw table, through a pgx pool) the same
// way, and prints p50/p95/p99, throughput and the ratios.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/bench/internal/rig"
	"github.com/svc-dev/svc/bench/load"
	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/services/analytics/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// targetP99 is the issue's target for period=all and period=90d (printed
// as PASS/FAIL, never the exit status).
const targetP99 = 50 * time.Millisecond

// periods are the measured periods, in order.
var periods = []string{"all", "90d"}

type options struct {
	days         int
	minClicks    int64
	concurrency  int
	requests     int
	refRequests  int
	warmup       int
	dbMaxConns   int
	databaseURL  string
	logFile      string
	logLevel     string
	keepDatabase bool
	jit          string
	cpuProfile   string
}

// startProfile writes this process's CPU profile (analytics runs in it)
// of one measured run to <prefix>-<run>.pprof; "" profiles nothing.
func startProfile(prefix, run string) (stop func(), err error) {
	if prefix == "" {
		return func() {}, nil
	}
	return rig.StartProfile(prefix + "-" + strings.ReplaceAll(run, " ", "-") + ".pprof")
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("benchperf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.IntVar(&o.days, "days", 730, "days of activity seeded, ending today (UTC)")
	fs.Int64Var(&o.minClicks, "clicks", 10_000_000, "clicks seeded at least, spread over the days")
	fs.IntVar(&o.concurrency, "concurrency", 8, "concurrent clients (closed loop, one request at a time each), for the route and the reference")
	fs.IntVar(&o.requests, "requests", 400, "measured requests of the route per period")
	fs.IntVar(&o.refRequests, "ref-requests", 80, "measured reference queries per period (each reads every raw click of the range)")
	fs.IntVar(&o.warmup, "warmup", 16, "unmeasured requests (and reference queries) per period before each measured run")
	fs.IntVar(&o.dbMaxConns, "db-max-conns", 8, "pool size of analytics (DB_MAX_CONNS) and of the reference")
	fs.StringVar(&o.databaseURL, "database-url", rig.DefaultDatabaseURL(getenv), "Postgres server where a throwaway database is created and dropped (default: $TEST_DATABASE_URL or localhost)")
	fs.StringVar(&o.logFile, "log", "", "file for analytics' logs (default: a file in the temp directory, printed at the end)")
	fs.StringVar(&o.logLevel, "log-level", "warn", "analytics' LOG_LEVEL")
	fs.StringVar(&o.jit, "jit", "", "Postgres jit for analytics' pool and the reference's: on, off, or empty for the server's setting (Postgres 15's default is on)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the CPU profile of each measured run to <prefix>-<run>.pprof (analytics runs in this process; Postgres' share is not in it)")
	fs.BoolVar(&o.keepDatabase, "keep", false, "keep the database at the end (for EXPLAIN); its URL is printed, drop it yourself")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.days < 1:
		return o, errors.New("-days must be at least 1")
	case o.days < 90:
		return o, errors.New("-days must be at least 90 (period=90d is measured)")
	case o.minClicks < 1:
		return o, errors.New("-clicks must be positive")
	case o.concurrency < 1, o.requests < 1, o.refRequests < 1, o.warmup < 0:
		return o, errors.New("-concurrency, -requests and -ref-requests must be positive, -warmup not negative")
	case o.dbMaxConns < 1:
		return o, errors.New("-db-max-conns must be at least 1")
	case o.jit != "" && o.jit != "on" && o.jit != "off":
		return o, errors.New("-jit must be on, off or empty")
	}
	return o, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "lag" {
		return runLag(ctx, args[1:], getenv, stdout, stderr)
	}
	o, err := parseFlags(args, getenv, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "benchperf:", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rep, err := bench(ctx, o, time.Now(), logger)
	if err != nil {
		fmt.Fprintln(stderr, "benchperf:", err)
		return 1
	}
	rep.print(stdout)
	return 0
}

// report is everything one invocation measured.
type report struct {
	opts    options
	plan    seedPlan
	seed    seeded
	results map[string]load.Result // "<period> route", "<period> reference"
	totals  map[string]rangeTotals
	days    map[string]int
	bytes   map[string]int // size of the route's answer
	logPath string
	keptDSN string
}

// perfAnswer is the part of the route's answer the benchmark checks.
type perfAnswer struct {
	Data []struct {
		Date   string `json:"date"`
		Clicks int64  `json:"clicks"`
	} `json:"data"`
	Metrics struct {
		TotalClicks      int64   `json:"totalClicks"`
		TotalLeads       int64   `json:"totalLeads"`
		TotalConversions int64   `json:"totalConversions"`
		TotalSales       int64   `json:"totalSales"`
		TotalRevenue     float64 `json:"totalRevenue"`
		TotalPartners    int64   `json:"totalPartners"`
	} `json:"metrics"`
	Meta struct {
		Period   string `json:"period"`
		DateFrom string `json:"dateFrom"`
	} `json:"meta"`
}

// dayCount is one row of the reference's answer.
type dayCount struct {
	Day    time.Time
	Clicks int64
}

// referenceSQL is the reference: the route's daily click counts answered
// from raw events, one row per UTC day of [$2, $3) with a click.
const referenceSQL = `SELECT (clicked_at AT TIME ZONE 'UTC')::date AS day, count(*)
	FROM ` + refSchema + `.clicks WHERE program_id = $1 AND clicked_at >= $2 AND clicked_at < $3
	GROUP BY 1 ORDER BY 1`

func bench(ctx context.Context, o options, wall time.Time, logger *slog.Logger) (_ *report, err error) {
	logs, logPath, err := rig.OpenLog(o.logFile, "benchperf")
	if err != nil {
		return nil, err
	}
	defer logs.Close()

	// The clock analytics runs on is frozen at the last second of today
	// (UTC), so today is whole and every answer of one period is the same
	// bytes for the whole run.
	today := time.Date(wall.UTC().Year(), wall.UTC().Month(), wall.UTC().Day(), 0, 0, 0, 0, time.UTC)
	now := today.Add(24*time.Hour - time.Second)
	clock := func() time.Time { return now }
	plan := seedPlan{First: today.AddDate(0, 0, -(o.days - 1)), Days: o.days, MinClicks: o.minClicks}
	rep := &report{opts: o, plan: plan, results: map[string]load.Result{}, totals: map[string]rangeTotals{},
		days: map[string]int{}, bytes: map[string]int{}, logPath: logPath}

	st, err := rig.Open(ctx, o.databaseURL, "benchperf")
	if err != nil {
		return nil, err
	}
	defer st.Close()
	dsn := st.DSN
	if o.keepDatabase {
		st.Keep()
		rep.keptDSN = dsn
	}
	serviceDSN := dsn
	if o.jit != "" {
		// pgx sends a URL parameter it does not know as a run-time
		// setting of every connection of the pool.
		serviceDSN += "&jit=" + o.jit
	}
	env := st.Env(map[string]string{
		"HTTP_ADDR":    "127.0.0.1:0",
		"DATABASE_URL": serviceDSN,
		"LOG_LEVEL":    o.logLevel,
		"DB_MAX_CONNS": strconv.Itoa(o.dbMaxConns),
	})
	logger.Info("starting analytics in-process", "service_logs", logPath, "clock", now.Format(time.RFC3339))
	inst, err := platform.Start(ctx, server.Spec(), env, logs, platform.WithClock(clock))
	if err != nil {
		return nil, fmt.Errorf("start analytics: %w", err)
	}
	defer func() {
		if stopErr := inst.Stop(); stopErr != nil && err == nil {
			logger.Warn("analytics stopped with an error", "err", stopErr)
		}
	}()
	base := "http://" + inst.Addr()

	db, err := openPool(ctx, dsn, server.Name, 2, "benchperf", "")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	logger.Info("seeding", "days", plan.Days, "first_day", plan.First.Format(time.DateOnly), "clicks_at_least", plan.MinClicks)
	rep.seed, err = seed(ctx, db, plan, env, func(msg string, args ...any) { logger.Info(msg, args...) })
	if err != nil {
		return nil, err
	}
	logger.Info("seed done", "clicks", rep.seed.Clicks, "took", rep.seed.Took.Round(time.Second))

	ref, err := openPool(ctx, dsn, "", int32(o.dbMaxConns), "benchperf_reference", o.jit)
	if err != nil {
		return nil, err
	}
	defer ref.Close()

	issuer, err := session.NewIssuer(st.SessionKey, server.SessionIssuer, 24*time.Hour, clock)
	if err != nil {
		return nil, err
	}
	token, _, err := issuer.Issue(userID, session.KindDashboard)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		MaxIdleConns: o.concurrency, MaxIdleConnsPerHost: o.concurrency, IdleConnTimeout: 2 * time.Minute,
	}}
	defer client.CloseIdleConnections()

	for _, period := range periods {
		from, to := plan.First, plan.End()
		if period == "90d" {
			from = today.AddDate(0, 0, -89)
		}
		days := int(to.Sub(from).Hours() / 24)
		want, err := totalsOf(ctx, db, from, to)
		if err != nil {
			return nil, err
		}
		rep.totals[period], rep.days[period] = want, days

		url := fmt.Sprintf("%s/api/tracking/performance/%d?period=%s", base, programID, period)
		get := func(ctx context.Context) (any, error) { return fetch(ctx, client, url, token) }
		query := func(ctx context.Context) (any, error) { return reference(ctx, ref, from, to) }

		// The first answers are checked in full: the route's against the
		// seed, the reference's day by day against the route's. Every
		// later answer must be the same (the clock is frozen).
		first, err := get(ctx)
		if err != nil {
			return nil, fmt.Errorf("period=%s: %w", period, err)
		}
		body := first.([]byte)
		routeDays, err := checkRoute(body, period, from, days, want)
		if err != nil {
			return nil, fmt.Errorf("period=%s: the route's answer is wrong: %w", period, err)
		}
		firstRef, err := query(ctx)
		if err != nil {
			return nil, fmt.Errorf("period=%s reference: %w", period, err)
		}
		if err := checkReference(firstRef.([]dayCount), routeDays); err != nil {
			return nil, fmt.Errorf("period=%s: the reference disagrees with the route: %w", period, err)
		}
		rep.bytes[period] = len(body)
		logger.Info("answers checked", "period", period, "days", days, "total_clicks", want.Clicks, "answer_bytes", len(body))

		sameBody := func(got any) error {
			if b := got.([]byte); !bytes.Equal(b, body) {
				return fmt.Errorf("answer differs from the checked one (%d bytes, want %d): %.200s", len(b), len(body), b)
			}
			return nil
		}
		sameRows := func(got any) error {
			rows := got.([]dayCount)
			var sum int64
			for _, r := range rows {
				sum += r.Clicks
			}
			if len(rows) != days || sum != want.Clicks {
				return fmt.Errorf("reference answered %d days, %d clicks; want %d, %d", len(rows), sum, days, want.Clicks)
			}
			return nil
		}
		for _, t := range []struct {
			name string
			n    int
			do   func(context.Context) (any, error)
			ok   func(any) error
		}{
			{period + " route", o.requests, get, sameBody},
			{period + " reference", o.refRequests, query, sameRows},
		} {
			if o.warmup > 0 {
				w := runFixed(ctx, t.name+" warm-up", o.warmup, o.concurrency, t.do, t.ok)
				logger.Info("warm-up done", "run", t.name, "ok", w.OK, "failed", w.Failed)
			}
			logger.Info("measuring", "run", t.name, "requests", t.n, "concurrency", o.concurrency)
			stopProfile, err := startProfile(o.cpuProfile, t.name)
			if err != nil {
				return nil, err
			}
			res := runFixed(ctx, t.name, t.n, o.concurrency, t.do, t.ok)
			stopProfile()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s: interrupted: %w", t.name, ctx.Err())
			}
			logger.Info("measured", "run", t.name, "ok", res.OK, "failed", res.Failed, "p99", load.MS(res.Latency.P99))
			rep.results[t.name] = res
		}
	}
	return rep, nil
}

// runFixed sends n requests with concurrency workers in a closed loop
// (each worker one request at a time, back to back) and times each; a
// request whose do fails, or whose answer fails the check, is a failure.
func runFixed(ctx context.Context, name string, n, concurrency int, do func(context.Context) (any, error), ok func(any) error) load.Result {
	res, _ := load.Run(ctx, load.Config{Name: name, Connections: concurrency, Jobs: n, Do: func(ctx context.Context, _, _ int) load.Outcome {
		got, err := do(ctx)
		if err == nil {
			err = ok(got)
		}
		if err != nil {
			return load.Outcome{Detail: err.Error()}
		}
		return load.Outcome{OK: true}
	}})
	return res
}

// fetch GETs the route with the session and returns the body of a 200.
func fetch(ctx context.Context, client *http.Client, url, token string) (any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %.300s", resp.StatusCode, body)
	}
	return body, nil
}

// reference runs the reference query and collects its rows.
func reference(ctx context.Context, pool *pgxpool.Pool, from, to time.Time) (any, error) {
	rows, err := pool.Query(ctx, referenceSQL, programID, from, to)
	if err != nil {
		return nil, fmt.Errorf("reference query: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (dayCount, error) {
		var d dayCount
		err := row.Scan(&d.Day, &d.Clicks)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("reference query: %w", err)
	}
	return out, nil
}

// checkRoute checks the route's answer against the seed: one row per day
// from the range's first, the totals of the buckets, money and partners
// present; it returns the clicks per day.
func checkRoute(body []byte, period string, from time.Time, days int, want rangeTotals) (map[string]int64, error) {
	var a perfAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("decode: %w: %.300s", err, body)
	}
	m := a.Metrics
	switch {
	case a.Meta.Period != period:
		return nil, fmt.Errorf("meta.period %q", a.Meta.Period)
	case len(a.Data) != days:
		return nil, fmt.Errorf("%d days, want %d", len(a.Data), days)
	case a.Data[0].Date != from.Format(time.DateOnly):
		return nil, fmt.Errorf("first day %s, want %s", a.Data[0].Date, from.Format(time.DateOnly))
	case m.TotalClicks != want.Clicks:
		return nil, fmt.Errorf("totalClicks %d, want %d", m.TotalClicks, want.Clicks)
	case m.TotalLeads != want.Leads || m.TotalConversions != want.Conversions || m.TotalSales != want.Sales:
		return nil, fmt.Errorf("leads/conversions/sales %d/%d/%d, want %d/%d/%d", m.TotalLeads, m.TotalConversions, m.TotalSales,
			want.Leads, want.Conversions, want.Sales)
	case m.TotalRevenue <= 0, m.TotalPartners <= 0:
		return nil, fmt.Errorf("totalRevenue %v, totalPartners %d: want both above 0", m.TotalRevenue, m.TotalPartners)
	}
	perDay := make(map[string]int64, days)
	var sum int64
	for _, d := range a.Data {
		perDay[d.Date] = d.Clicks
		sum += d.Clicks
	}
	if sum != want.Clicks {
		return nil, fmt.Errorf("data[].clicks add up to %d, totalClicks is %d", sum, want.Clicks)
	}
	return perDay, nil
}

// checkReference checks the reference answered the route's clicks, day by
// day.
func checkReference(rows []dayCount, routeDays map[string]int64) error {
	if len(rows) != len(routeDays) {
		return fmt.Errorf("%d days, the route %d", len(rows), len(routeDays))
	}
	for _, r := range rows {
		d := r.Day.Format(time.DateOnly)
		if c, ok := routeDays[d]; !ok || c != r.Clicks {
			return fmt.Errorf("%s: %d clicks, the route %d", d, r.Clicks, c)
		}
	}
	return nil
}

func (r *report) print(out io.Writer) {
	s := r.seed
	fmt.Fprintf(out, "program %d: %d days (%s .. %s), %s clicks, %s leads, %s conversions, %s paid sales\n",
		programID, r.plan.Days, r.plan.First.Format(time.DateOnly), r.plan.End().AddDate(0, 0, -1).Format(time.DateOnly),
		thousands(s.Clicks), thousands(s.Leads), thousands(s.Conversions), thousands(s.Sales))
	fmt.Fprintf(out, "aggregates: %s activity buckets, %s money buckets (USD, EUR, VND), %d partner-program records\n",
		thousands(s.ActivityRows), thousands(s.MoneyRows), partners)
	fmt.Fprintf(out, "reference: %s raw click rows, table %d MiB, index %d MiB; seeded in %s\n",
		thousands(s.RawRows), s.RawTableBytes>>20, s.RawIndexBytes>>20, s.Took.Round(time.Second))
	jit := r.opts.jit
	if jit == "" {
		jit = "the server's"
	}
	fmt.Fprintf(out, "concurrency %d, %d route requests and %d reference queries per period, %d warm-up each; jit %s\n\n",
		r.opts.concurrency, r.opts.requests, r.opts.refRequests, r.opts.warmup, jit)

	var results []load.Result
	for _, period := range periods {
		for _, name := range []string{period + " route", period + " reference"} {
			if res, ok := r.results[name]; ok {
				results = append(results, res)
			}
		}
	}
	load.Write(out, results...)
	fmt.Fprintln(out)
	for _, period := range periods {
		svc, okS := r.results[period+" route"]
		ref, okR := r.results[period+" reference"]
		if !okS || !okR {
			continue
		}
		pass := svc.Failed == 0 && svc.OK > 0 && svc.Latency.P99 < targetP99
		fmt.Fprintf(out, "period=%-3s %d days, %s clicks, answer %d bytes: route p99 %s (target < %s): %s; reference p99 / route p99 %.1fx, p50 %.1fx; route / reference throughput %.1fx\n",
			period, r.days[period], thousands(r.totals[period].Clicks), r.bytes[period], load.MS(svc.Latency.P99), load.MS(targetP99), load.Verdict(pass),
			ratio(ref.Latency.P99, svc.Latency.P99), ratio(ref.Latency.P50, svc.Latency.P50), svc.Throughput()/max(ref.Throughput(), 1e-9))
	}
	fmt.Fprintf(out, "analytics logs: %s\n", r.logPath)
	if r.keptDSN != "" {
		fmt.Fprintf(out, "database kept: %s (search_path analytics; reference in %s.clicks); drop it when done\n", r.keptDSN, refSchema)
	}
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// thousands formats n with comma separators.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
