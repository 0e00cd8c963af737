package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/bench/internal/rig"
	"github.com/svc-dev/svc/bench/load"
	demoseed "github.com/svc-dev/svc/deploy/devstack/seed"
)

// benchRateLimit replaces the per-minute limits of the routes driven: the
// console's 30 a minute per session would answer 429 at once.
const benchRateLimit = "100000000"

var rateLimitEnv = []string{
	"ADMIN_RATE_LIMIT",    // the seed: 3 admin calls a partner
	"SETTINGS_RATE_LIMIT", // the console routes, accounts' and commissions' alike
}

// list is one console list: its path under the program, the queries a
// client sends (the first page, filtered pages), and the reference's
// query for one page of it straight from Postgres ($1 the program).
type list struct {
	name     string
	path     string
	filters  []string
	refQuery string
	// pagers are the list's cursors: the query parameter that takes one
	// and the answer's field that gives the next (nil: cursor and
	// next_cursor). The payouts answer pages its balances and its payouts
	// apart.
	pagers [][2]string
}

func lists(programID int64, partnerID int64) []list {
	base := "/api/v1/programs/" + strconv.FormatInt(programID, 10)
	pid := strconv.FormatInt(partnerID, 10)
	return []list{
		{
			name:    "partners",
			path:    base + "/partners",
			filters: []string{""},
			refQuery: `SELECT p.id, p.name, p.email, pp.approved FROM accounts.partner_programs pp JOIN accounts.partners p ON p.id = pp.partner_id
				WHERE pp.program_id = $1 ORDER BY pp.partner_id LIMIT 50`,
		},
		{
			name:    "commissions",
			path:    base + "/commissions",
			filters: []string{"", "?status=approved", "?partner_id=" + pid},
			refQuery: `SELECT id, sale_id, partner_id, kind, status, amount, currency, refunded_amount, created_at, approved_at
				FROM commissions.commissions WHERE program_id = $1 AND kind IN ('sale', 'lead') ORDER BY created_at DESC, id DESC LIMIT 50`,
		},
		{
			name:    "payouts",
			path:    base + "/payouts",
			filters: []string{""},
			refQuery: `SELECT m.partner_id, m.currency, m.earned, m.paid, m.open, b.balance FROM commissions.program_money m
				LEFT JOIN commissions.balances b ON b.partner_id = m.partner_id AND b.currency = m.currency
				WHERE m.program_id = $1 ORDER BY m.partner_id, m.currency LIMIT 50`,
			pagers: [][2]string{{"cursor", "next_cursor"}, {"balances_cursor", "balances_next_cursor"}},
		},
	}
}

// result is one list's measured run beside its reference.
type result struct {
	list      string
	urls      int
	service   load.Result
	reference load.Result
}

type report struct {
	opts      options
	partners  int
	rows      int64
	preloaded time.Duration
	seeded    time.Duration
	results   []result
	logPath   string
	keptDSN   string
}

func bench(ctx context.Context, o options, logger *slog.Logger) (report, error) {
	rep := report{opts: o}
	logs, logPath, err := rig.OpenLog(o.logFile, "benchconsole")
	if err != nil {
		return rep, err
	}
	defer logs.Close()
	rep.logPath = logPath
	st, err := rig.Open(ctx, o.databaseURL, "benchconsole")
	if err != nil {
		return rep, err
	}
	defer st.Close()
	if o.keep {
		st.Keep()
		rep.keptDSN = st.DSN
	}
	env := map[string]string{"LOG_LEVEL": o.logLevel, "DB_MAX_CONNS": strconv.Itoa(o.dbMaxConns)}
	for _, k := range rateLimitEnv {
		env[k] = benchRateLimit
	}
	// Commissions calls tracking for attributions, so it starts too.
	if err := st.Start(ctx, []string{"tracking", "commissions", "accounts", "analytics"}, st.Env(env), logs); err != nil {
		return rep, err
	}
	began := time.Now()
	admin := st.Admin()
	programID, token, err := seedProgram(ctx, admin)
	if err != nil {
		return rep, err
	}
	partners, err := seedPartners(ctx, admin, programID, o.partners, logger)
	if err != nil {
		return rep, err
	}
	rep.partners = len(partners)
	// 30,000 catalog events take the replicas longer than one barrier
	// call may wait (its client gives up at a minute): ask again.
	for deadline := time.Now().Add(10 * time.Minute); ; {
		err := admin.Sync(ctx, 45*time.Second)
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return rep, fmt.Errorf("wait for the catalog to reach the replicas: %w", err)
		}
		logger.Info("the replicas are still applying the catalog", "err", err)
	}
	rep.seeded = time.Since(began)
	db, err := rig.OpenPool(ctx, st.DSN, int32(o.dbMaxConns), "benchconsole-reference", nil)
	if err != nil {
		return rep, err
	}
	defer db.Close()
	rep.rows, rep.preloaded, err = preload(ctx, db, programID, o.commissions, logger)
	if err != nil {
		return rep, err
	}
	rig.Settle(ctx, db, logger, "accounts.outbox", "commissions.outbox", "tracking.outbox")

	client := load.NewClient(o.clients)
	gw := "http://" + st.Gateway
	for _, l := range lists(programID, partners[len(partners)/2]) {
		urls, err := walk(ctx, client, gw, token, l, o.depth)
		if err != nil {
			return rep, err
		}
		r := result{list: l.name, urls: len(urls)}
		service := func(ctx context.Context, _, job int) load.Outcome {
			status, body, err := load.Send(ctx, client, http.MethodGet, urls[job%len(urls)], nil, func(h http.Header) {
				h.Set("Authorization", "Bearer "+token)
			})
			if err != nil {
				return load.Outcome{Err: err}
			}
			if status != http.StatusOK {
				return load.Outcome{Status: status, Detail: string(body)}
			}
			return load.Outcome{Status: status, OK: true}
		}
		reference := func(ctx context.Context, _, _ int) load.Outcome {
			if err := refPage(ctx, db, l.refQuery, programID); err != nil {
				return load.Outcome{Err: err}
			}
			return load.Outcome{OK: true}
		}
		for _, run := range []struct {
			name string
			do   func(context.Context, int, int) load.Outcome
			out  *load.Result
		}{{l.name + " reference", reference, &r.reference}, {l.name + " service", service, &r.service}} {
			if o.warmup > 0 {
				if _, err := load.Run(ctx, load.Config{Name: run.name + " warm-up", Connections: o.clients, Duration: o.warmup, Jobs: -1, Do: run.do}); err != nil {
					return rep, err
				}
			}
			stop := func() {}
			if o.cpuProfile != "" && run.out == &r.service {
				if stop, err = rig.StartProfile(o.cpuProfile + "-" + l.name + ".pprof"); err != nil {
					return rep, err
				}
			}
			res, err := load.Run(ctx, load.Config{Name: run.name, Connections: o.clients, Duration: o.duration, Jobs: -1, Do: run.do})
			stop()
			if err != nil {
				return rep, err
			}
			*run.out = res
			logger.Info("measured", "run", run.name, "per_second", int(res.Throughput()), "p99", res.Latency.P99)
		}
		rep.results = append(rep.results, r)
	}
	return rep, nil
}

// refPage reads one page the way the reference does: the query, every
// row scanned.
func refPage(ctx context.Context, db *pgxpool.Pool, query string, programID int64) error {
	rows, err := db.Query(ctx, query, programID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if _, err := rows.Values(); err != nil {
			return err
		}
	}
	return rows.Err()
}

// walk collects the URLs the clients ask for: each filter's first page,
// and up to depth pages of the list followed by their next_cursor.
func walk(ctx context.Context, client *http.Client, gw, token string, l list, depth int) ([]string, error) {
	var urls []string
	auth := func(h http.Header) { h.Set("Authorization", "Bearer "+token) }
	for _, f := range l.filters {
		u := gw + l.path + f
		status, body, err := load.Send(ctx, client, http.MethodGet, u, nil, auth)
		if err != nil || status != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %d %s %v", l.path+f, status, body, err)
		}
		urls = append(urls, u)
	}
	pagers := l.pagers
	if len(pagers) == 0 {
		pagers = [][2]string{{"cursor", "next_cursor"}}
	}
	for _, pg := range pagers {
		param, field := pg[0], pg[1]
		next := ""
		for range depth {
			u := gw + l.path
			if next != "" {
				u += "?" + param + "=" + url.QueryEscape(next)
			}
			status, body, err := load.Send(ctx, client, http.MethodGet, u, nil, auth)
			if err != nil || status != http.StatusOK {
				return nil, fmt.Errorf("GET %s: %d %s %v", u, status, body, err)
			}
			if next != "" {
				urls = append(urls, u)
			}
			var page map[string]any
			if err := json.Unmarshal(body, &page); err != nil {
				return nil, fmt.Errorf("GET %s: %w", u, err)
			}
			n, _ := page[field].(string)
			if n == "" {
				break
			}
			next = n
		}
	}
	return urls, nil
}

// seedProgram creates the brand (an advertiser, its owner with
// tracking:read and tracking:write on a program) through the admin API and
// answers the program and a dashboard session of the owner.
func seedProgram(ctx context.Context, a *demoseed.Client) (int64, string, error) {
	var id struct {
		ID int64 `json:"id"`
	}
	if err := a.Call(ctx, http.MethodPost, "/admin/v1/advertisers", map[string]any{"name": "Console Brand", "email": "owner@console-brand.example"}, &id); err != nil {
		return 0, "", err
	}
	adv := id.ID
	prog := map[string]any{
		"advertiser_id": adv, "name": "Console Program", "domain": "brand.example",
		"commission_type": "percent", "commission_rate": 10, "payment_tracking_mode": "s2s",
	}
	if err := a.Call(ctx, http.MethodPost, "/admin/v1/programs", prog, &id); err != nil {
		return 0, "", err
	}
	programID := id.ID
	if err := a.Call(ctx, http.MethodPost, "/admin/v1/users", map[string]any{"email": "owner@console-brand.example", "name": "Owner", "advertiser_id": adv}, &id); err != nil {
		return 0, "", err
	}
	user := id.ID
	member := map[string]any{"user_id": user, "active": true, "permissions": []string{"tracking:read", "tracking:write"}}
	if err := a.Call(ctx, http.MethodPost, "/admin/v1/programs/"+strconv.FormatInt(programID, 10)+"/members", member, nil); err != nil {
		return 0, "", err
	}
	var session struct {
		Token string `json:"token"`
	}
	if err := a.Call(ctx, http.MethodPost, "/admin/v1/sessions", map[string]any{"user_id": user}, &session); err != nil {
		return 0, "", err
	}
	if session.Token == "" {
		return 0, "", fmt.Errorf("POST /admin/v1/sessions: no token in the answer")
	}
	return programID, session.Token, nil
}

// seedPartners creates n approved partners of the program with a link each
// through the admin API (8 at a time), as the catalog's own writes: every
// replica learns them from the catalog topic.
func seedPartners(ctx context.Context, a *demoseed.Client, programID int64, n int, logger *slog.Logger) ([]int64, error) {
	pp := "/admin/v1/programs/" + strconv.FormatInt(programID, 10)
	ids := make([]int64, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	start := time.Now()
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				var id struct {
					ID int64 `json:"id"`
				}
				body := map[string]any{"name": fmt.Sprintf("Partner %05d", i+1), "email": fmt.Sprintf("partner%05d@console-brand.example", i+1)}
				err := a.Call(ctx, http.MethodPost, "/admin/v1/partners", body, &id)
				if err == nil {
					err = a.Call(ctx, http.MethodPost, pp+"/partners", map[string]any{"partner_id": id.ID, "approved": true}, nil)
				}
				if err == nil {
					err = a.Call(ctx, http.MethodPost, pp+"/links", map[string]any{"partner_id": id.ID, "code": fmt.Sprintf("p%05d", i+1), "active": true}, nil)
				}
				if err != nil {
					errs <- err
					return
				}
				ids[i] = id.ID
				if (i+1)%2000 == 0 {
					logger.Info("partners created", "n", i+1, "took", time.Since(start).Round(time.Second))
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, fmt.Errorf("create partners: %w", err)
	}
	return ids, nil
}

func (r report) print(w io.Writer) {
	fmt.Fprintf(w, "benchconsole: %d partners (seeded through the admin API in %s), %d rows preloaded in %s; %d clients, %s per run\n",
		r.partners, r.seeded.Round(time.Second), r.rows, r.preloaded.Round(time.Second), r.opts.clients, r.opts.duration)
	fmt.Fprintf(w, "%-12s %6s %14s %24s %14s %24s %8s\n", "list", "pages", "reference /s", "reference p50 / p99", "service /s", "service p50 / p99", "target")
	for _, x := range r.results {
		fmt.Fprintf(w, "%-12s %6d %14s %24s %14s %24s %8s\n", x.list, x.urls,
			load.PerSecond(x.reference.Throughput()), load.MS(x.reference.Latency.P50)+" / "+load.MS(x.reference.Latency.P99),
			load.PerSecond(x.service.Throughput()), load.MS(x.service.Latency.P50)+" / "+load.MS(x.service.Latency.P99),
			load.Verdict(x.service.Latency.P99 < targetP99 && x.service.Failed == 0 && x.service.TransportErrors == 0))
		if f := x.service.FirstFailure(); f != "" {
			fmt.Fprintf(w, "  %s: %d failed (%s), first: %s\n", x.list, x.service.Failed, load.StatusList(x.service.Statuses), f)
		}
	}
	fmt.Fprintf(w, "target: every list p99 < %s with no failed answer; service logs: %s\n", targetP99, r.logPath)
	if r.keptDSN != "" {
		fmt.Fprintf(w, "database kept: %s\n", r.keptDSN)
	}
}
