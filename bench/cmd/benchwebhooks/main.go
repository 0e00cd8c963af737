// Command benchwebhooks measures outgoing webhooks (`make bench-webhooks`,
// issue 22): -endpoints endpoints (1,000), one per program, each receiving
// the sales of its program; -rate sales a second (500) for -duration (60 s)
// published on the ledger's topic as commissions publishes them, so each
// one goes the production way: webhooks' ledger consumer writes the event
// and its delivery in the inbox transaction, the dispatcher claims it and
// posts it, signed, to a local receiver. Measured: the delivery lag (the
// event's created_at, when it was published, to its arrival at the
// receiver: p50/p95/p99/max), deliveries a second, retries; next to a
// reference in the same run: a bare net/http client posting the same
// bodies to the same receiver with as many workers as the dispatcher
// (DELIVERY_WORKERS).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/bench/internal/rig"
	"github.com/svc-dev/svc/bench/load"
	demoseed "github.com/svc-dev/svc/deploy/devstack/seed"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// targetP99 is the delivery lag target.
const targetP99 = time.Second

type options struct {
	rate        int
	duration    time.Duration
	endpoints   int
	workers     int
	databaseURL string
	logFile     string
	keep        bool
	cpuProfile  string
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("benchwebhooks", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.IntVar(&o.rate, "rate", 500, "sales a second published on the ledger's topic (one webhook each)")
	fs.DurationVar(&o.duration, "duration", 60*time.Second, "how long sales are published")
	fs.IntVar(&o.endpoints, "endpoints", 1000, "endpoints, one per program, created through the console route; sales go round them")
	fs.IntVar(&o.workers, "workers", 64, "the dispatcher's DELIVERY_WORKERS, and the reference's workers")
	fs.StringVar(&o.databaseURL, "database-url", rig.DefaultDatabaseURL(getenv), "Postgres server where a throwaway database is created and dropped (default: $TEST_DATABASE_URL or localhost)")
	fs.StringVar(&o.logFile, "log", "", "file for the services' logs (default: a file in the temp directory, printed at the end)")
	fs.BoolVar(&o.keep, "keep", false, "keep the database (its URL is printed)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the CPU profile of the measured run to this file (the services run in this process; Postgres' share is not in it)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.rate < 1 || o.duration <= 0 || o.endpoints < 1 || o.workers < 1 {
		return o, errors.New("-rate, -duration, -endpoints and -workers must be positive")
	}
	return o, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return 2
	}
	if err := bench(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "benchwebhooks:", err)
		return 1
	}
	return 0
}

// receiver is the brands' endpoints: one server, a path per endpoint,
// answering 200 at once and keeping each webhook's lag and body.
type receiver struct {
	mu      sync.Mutex
	lags    []time.Duration
	bodies  [][]byte
	seen    map[string]bool
	repeats int
	first   time.Time
	last    time.Time
	// done is closed when want webhooks arrived.
	want int
	done chan struct{}
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	at := time.Now()
	var ev struct {
		CreatedAt time.Time `json:"created_at"`
	}
	_ = json.Unmarshal(body, &ev)
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[id] {
		r.repeats++
		return
	}
	r.seen[id] = true
	if r.first.IsZero() {
		r.first = at
	}
	r.last = at
	r.lags = append(r.lags, at.Sub(ev.CreatedAt))
	r.bodies = append(r.bodies, body)
	if len(r.lags) == r.want {
		close(r.done)
	}
}

// sink answers the reference's posts: 200 at once, nothing kept.
func sink(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }

func bench(ctx context.Context, o options, out io.Writer) error {
	st, err := rig.Open(ctx, o.databaseURL, "benchwebhooks")
	if err != nil {
		return err
	}
	if o.keep {
		st.Keep()
		fmt.Fprintf(out, "database  %s (kept)\n", st.DSN)
	}
	defer st.Close()
	logs, logPath, err := rig.OpenLog(o.logFile, "benchwebhooks")
	if err != nil {
		return err
	}
	defer logs.Close()
	total := o.rate * int(o.duration/time.Second)
	recv := &receiver{seen: map[string]bool{}, want: total, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle("/e/", recv)
	mux.HandleFunc("/ref", sink)
	recvAddr, stopRecv, err := rig.Serve(mux)
	if err != nil {
		return err
	}
	st.Defer(stopRecv)

	env := st.Env(map[string]string{
		"LOG_LEVEL": "warn", "WEBHOOKS_ALLOW_PRIVATE": "true", "WEBHOOKS_SECRET_KEY": "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=",
		"DELIVERY_WORKERS": strconv.Itoa(o.workers), "SETTINGS_RATE_LIMIT": "1000000", "ADMIN_RATE_LIMIT": "1000000",
	})
	if err := st.Start(ctx, []string{"accounts", "webhooks"}, env, logs); err != nil {
		return err
	}
	began := time.Now()
	programs, err := seed(ctx, st.Admin(), "http://"+st.Gateway, "http://"+recvAddr, o.endpoints)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "seeded    %d programs with one endpoint each in %s\n", len(programs), time.Since(began).Round(time.Millisecond))

	stopProfile := func() {}
	if o.cpuProfile != "" {
		if stopProfile, err = rig.StartProfile(o.cpuProfile); err != nil {
			return err
		}
	}
	writer := st.Services.Instance("webhooks").Platform().Writer
	start := time.Now()
	if err := publish(ctx, writer, programs, o.rate, o.duration); err != nil {
		stopProfile()
		return err
	}
	published := time.Since(start)
	select {
	case <-recv.done:
	case <-time.After(2 * time.Minute):
	case <-ctx.Done():
		stopProfile()
		return ctx.Err()
	}
	stopProfile()
	recv.mu.Lock()
	got, repeats, lags, bodies := len(recv.lags), recv.repeats, append([]time.Duration(nil), recv.lags...), recv.bodies
	span := recv.last.Sub(start)
	recv.mu.Unlock()

	// The reference: the same bodies posted by a bare client with as many
	// workers as the dispatcher.
	refLat, refSpan := reference(ctx, "http://"+recvAddr+"/ref", bodies, o.workers)

	lag := load.Summarize(lags)
	fmt.Fprintf(out, "\nwebhooks  %d sales published in %s (%s/s) to %d endpoints; %d webhooks received (%d repeated), %s/s over %s\n",
		total, published.Round(time.Millisecond), load.PerSecond(float64(total)/published.Seconds()), len(programs), got, repeats,
		load.PerSecond(float64(got)/span.Seconds()), span.Round(time.Millisecond))
	fmt.Fprintf(out, "          delivery lag (published -> received): p50 %s  p95 %s  p99 %s  max %s   target p99 < %s: %s\n",
		load.MS(lag.P50), load.MS(lag.P95), load.MS(lag.P99), load.MS(lag.Max), targetP99, load.Verdict(got == total && lag.P99 < targetP99))
	fmt.Fprintf(out, "reference bare net/http, %d workers, the same %d bodies: %s/s, latency p50 %s  p99 %s\n",
		o.workers, len(bodies), load.PerSecond(float64(len(bodies))/refSpan.Seconds()), load.MS(refLat.P50), load.MS(refLat.P99))
	fmt.Fprintf(out, "logs      %s\n", logPath)
	if got != total {
		return fmt.Errorf("%d of %d webhooks received", got, total)
	}
	return nil
}

// seed creates one advertiser and its owner, o.endpoints programs the
// owner is a member of, and an endpoint per program pointing at the
// receiver's path of that program, for sale.created.
func seed(ctx context.Context, admin *demoseed.Client, gateway, recv string, n int) ([]int64, error) {
	var id struct {
		ID int64 `json:"id"`
	}
	if err := admin.Call(ctx, http.MethodPost, "/admin/v1/advertisers", map[string]any{"name": "Hooks Brand", "email": "owner@hooks-brand.example"}, &id); err != nil {
		return nil, err
	}
	adv := id.ID
	if err := admin.Call(ctx, http.MethodPost, "/admin/v1/users", map[string]any{"email": "owner@hooks-brand.example", "name": "Owner", "advertiser_id": adv}, &id); err != nil {
		return nil, err
	}
	user := id.ID
	programs := make([]int64, n)
	for i := range programs {
		if err := admin.Call(ctx, http.MethodPost, "/admin/v1/programs", map[string]any{"advertiser_id": adv, "name": fmt.Sprintf("Hooks %d", i),
			"domain": "brand.example", "commission_type": "percent", "commission_rate": 10}, &id); err != nil {
			return nil, err
		}
		programs[i] = id.ID
		if err := admin.Call(ctx, http.MethodPost, fmt.Sprintf("/admin/v1/programs/%d/members", id.ID),
			map[string]any{"user_id": user, "active": true, "permissions": []string{"tracking:read", "tracking:write"}}, nil); err != nil {
			return nil, err
		}
	}
	var session struct {
		Token string `json:"token"`
	}
	if err := admin.Call(ctx, http.MethodPost, "/admin/v1/sessions", map[string]any{"user_id": user}, &session); err != nil {
		return nil, err
	}
	if err := admin.Sync(ctx, 60*time.Second); err != nil {
		return nil, err
	}
	owner := &demoseed.Client{BaseURL: gateway, AdminToken: session.Token, HTTP: &http.Client{Timeout: 30 * time.Second}}
	for _, p := range programs {
		if err := owner.Call(ctx, http.MethodPost, fmt.Sprintf("/api/v1/programs/%d/webhooks", p),
			map[string]any{"url": fmt.Sprintf("%s/e/%d", recv, p), "events": []string{"sale.created"}}, nil); err != nil {
			return nil, err
		}
	}
	return programs, nil
}

// publish writes rate LedgerSaleRecorded events a second for d on the
// ledger's topic, round the programs, in batches every 10 ms.
func publish(ctx context.Context, w *kafka.Writer, programs []int64, rate int, d time.Duration) error {
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	total := rate * int(d/time.Second)
	start := time.Now()
	sent := 0
	for sent < total {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		due := min(int(float64(rate)*time.Since(start).Seconds()), total)
		var msgs []kafka.Message
		for ; sent < due; sent++ {
			prog := programs[sent%len(programs)]
			now := timestamppb.Now()
			payload, err := proto.Marshal(&eventsv1.LedgerSaleRecorded{SaleId: int64(sent + 1), TransactionId: fmt.Sprintf("order_%d", sent+1),
				ProgramId: prog, CustomerId: int64(sent + 1), PartnerId: 1, AmountCents: 4900, Currency: "USD", Source: "api", OccurredAt: now})
			if err != nil {
				return err
			}
			env, err := proto.Marshal(&eventsv1.Envelope{Id: uuid.NewString(), Type: eventsv1.TypeLedgerSaleRecorded, OccurredAt: now,
				ProgramId: prog, Source: "commissions", Payload: payload})
			if err != nil {
				return err
			}
			msgs = append(msgs, kafka.Message{Topic: eventsv1.TopicCommissions, Key: []byte(strconv.FormatInt(prog, 10)), Value: env})
		}
		if len(msgs) > 0 {
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				return fmt.Errorf("publish: %w", err)
			}
		}
	}
	return nil
}

// reference posts every body to url with workers concurrent keep-alive
// clients and answers the latency of each post and the whole span.
func reference(ctx context.Context, url string, bodies [][]byte, workers int) (load.Latency, time.Duration) {
	client := load.NewClient(workers)
	jobs := make(chan []byte)
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for b := range jobs {
				t0 := time.Now()
				if _, _, err := load.Send(ctx, client, http.MethodPost, url, b, func(h http.Header) { h.Set("Content-Type", "application/json") }); err == nil {
					mine = append(mine, time.Since(t0))
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	for _, b := range bodies {
		jobs <- b
	}
	close(jobs)
	wg.Wait()
	return load.Summarize(lat), time.Since(start)
}
