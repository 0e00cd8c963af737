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
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/bench/internal/rig"
	"github.com/svc-dev/svc/bench/load"
	demoseed "github.com/svc-dev/svc/deploy/devstack/seed"
	"github.com/svc-dev/svc/libs/auth/session"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/analytics/server"
)

// targetLag is the issue's target for a click's lag to the performance
// route (p99), at targetRate clicks a second.
const (
	targetLag  = 2 * time.Second
	targetRate = 2000
)

type lagOptions struct {
	rate        int
	duration    time.Duration
	workers     int
	poll        time.Duration
	seedFile    string
	databaseURL string
	logFile     string
}

// runLag is `benchperf lag`: the whole stack in this process behind the
// local gateway on a fresh database and an in-process broker, the demo
// catalog seeded; clicks sent at a fixed rate (an open loop: a slow answer
// does not slow the sending) through the gateway; the performance route
// polled with the demo owner's session. A click's lag is from its 200 to
// the first poll whose totalClicks counts it (clicks are numbered in the
// order they were accepted). The reference is the same lag to the click's
// event being readable on tracking.events.v1, the floor any consumer of
// the events has.
func runLag(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchperf lag", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o lagOptions
	o.databaseURL = rig.DefaultDatabaseURL(getenv)
	fs.IntVar(&o.rate, "rate", targetRate, "clicks a second, sent at a fixed rate")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "how long clicks are sent")
	fs.IntVar(&o.workers, "workers", 64, "most clicks in flight at once")
	fs.DurationVar(&o.poll, "poll", 20*time.Millisecond, "how often the performance route is read")
	fs.StringVar(&o.seedFile, "seed", "deploy/seed/demo.json", "the demo catalog")
	fs.StringVar(&o.databaseURL, "database-url", o.databaseURL, "Postgres server where a throwaway database is created and dropped")
	fs.StringVar(&o.logFile, "log", "", "file for the services' logs (default: a file in the temp directory)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if o.rate < 1 || o.duration <= 0 || o.workers < 1 || o.poll <= 0 {
		fmt.Fprintln(stderr, "benchperf lag: -rate, -duration, -workers and -poll must be positive")
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := lagBench(ctx, o, logger, stdout); err != nil {
		fmt.Fprintln(stderr, "benchperf lag:", err)
		return 1
	}
	return 0
}

func lagBench(ctx context.Context, o lagOptions, logger *slog.Logger, stdout io.Writer) error {
	demo, err := demoseed.Load(o.seedFile)
	if err != nil {
		return err
	}
	logs, logPath, err := rig.OpenLog(o.logFile, "benchperf")
	if err != nil {
		return err
	}
	defer logs.Close()
	st, err := rig.Open(ctx, o.databaseURL, "benchperf")
	if err != nil {
		return err
	}
	defer st.Close()
	brokers := st.Brokers
	env := st.Env(map[string]string{
		"LOG_LEVEL": "warn",
		// The load comes from one address: the per-IP click limit is not
		// what is measured.
		"TRACK_CLICK_RATE_LIMIT": "100000000", "ADMIN_RATE_LIMIT": "1000000",
	})
	logger.Info("starting the stack in-process", "service_logs", logPath)
	if err := st.Start(ctx, nil, env, logs); err != nil {
		return err
	}
	base := "http://" + st.Gateway

	client := st.Admin()
	demoIDs, err := demoseed.Run(ctx, client, demo)
	if err != nil {
		return fmt.Errorf("seed the demo catalog: %w", err)
	}
	if err := client.Sync(ctx, 30*time.Second); err != nil {
		return fmt.Errorf("wait for the catalog: %w", err)
	}
	issuer, err := session.NewIssuer(st.SessionKey, server.SessionIssuer, time.Hour, time.Now)
	if err != nil {
		return err
	}
	token, _, err := issuer.Issue(demoIDs.UserID, session.KindDashboard)
	if err != nil {
		return err
	}
	httpc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: o.workers + 4}}
	perfURL := fmt.Sprintf("%s/api/tracking/performance/%d?period=7d", base, demoIDs.ProgramID)
	clicksNow := func(ctx context.Context) (int64, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", perfURL, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := httpc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var body struct {
			Metrics struct {
				TotalClicks int64 `json:"totalClicks"`
			} `json:"metrics"`
		}
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("performance: %s", resp.Status)
		}
		return body.Metrics.TotalClicks, json.NewDecoder(resp.Body).Decode(&body)
	}
	if n, err := clicksNow(ctx); err != nil || n != 0 {
		return fmt.Errorf("performance before the load: %d clicks, %v", n, err)
	}

	// The reference: the click events as a plain reader of the topic sees
	// them (from the end of the topic as it is now).
	var events observed
	readerCtx, stopReader := context.WithCancel(ctx)
	defer stopReader()
	readerDone := make(chan error, 1)
	go func() { readerDone <- readClicks(readerCtx, brokers, &events) }()

	// The measured: the performance route, polled.
	var route observed
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	pollDone := make(chan error, 1)
	go func() {
		tick := time.NewTicker(o.poll)
		defer tick.Stop()
		for {
			n, err := clicksNow(pollCtx)
			if err != nil && pollCtx.Err() == nil {
				pollDone <- err
				return
			}
			route.add(time.Now(), n)
			select {
			case <-pollCtx.Done():
				pollDone <- nil
				return
			case <-tick.C:
			}
		}
	}()

	logger.Info("sending clicks", "rate", o.rate, "duration", o.duration, "workers", o.workers)
	accepted, failed, late := sendClicks(ctx, httpc, base+"/api/v1/track/click", demoIDs.LinkCode, o)
	total := int64(len(accepted))
	logger.Info("clicks sent", "accepted", total, "failed", failed, "sent_late", late)
	deadline := time.Now().Add(2 * time.Minute)
	for route.last() < total || events.last() < total {
		if time.Now().After(deadline) {
			return fmt.Errorf("after 2 minutes the route counts %d and the topic holds %d of %d accepted clicks", route.last(), events.last(), total)
		}
		time.Sleep(o.poll)
	}
	stopPoll()
	stopReader()
	if err := <-pollDone; err != nil {
		return err
	}
	<-readerDone
	if got := route.last(); got != total {
		return fmt.Errorf("the route counts %d clicks, %d were accepted", got, total)
	}
	slices.SortFunc(accepted, func(a, b time.Time) int { return a.Compare(b) })
	routeLags, eventLags := route.lags(accepted), events.lags(accepted)
	sent := o.duration.Seconds()
	fmt.Fprintf(stdout, "clicks: %d accepted (%d failed) over %s at a requested %d/s (%.0f/s achieved; %d sent late by the open loop)\n",
		total, failed, o.duration, o.rate, float64(total)/sent, late)
	fmt.Fprintf(stdout, "%-34s %10s %10s %10s %10s\n", "lag from the click's 200 to", "p50", "p95", "p99", "max")
	event, routed := load.Summarize(eventLags), load.Summarize(routeLags)
	for _, r := range []struct {
		name string
		l    load.Latency
	}{{"its event on tracking.events.v1", event}, {"the performance route counting it", routed}} {
		fmt.Fprintf(stdout, "%-34s %10s %10s %10s %10s\n", r.name, load.MS(r.l.P50), load.MS(r.l.P95), load.MS(r.l.P99), load.MS(r.l.Max))
	}
	p99 := routed.P99
	fmt.Fprintf(stdout, "route p99 %s (target < %s at %d/s): %s; route p99 / event p99 %.1fx\n",
		load.MS(p99), targetLag, targetRate, load.Verdict(p99 < targetLag && o.rate >= targetRate && float64(total)/sent >= 0.99*float64(targetRate)),
		float64(p99)/float64(max(event.P99, time.Millisecond)))
	fmt.Fprintf(stdout, "services' logs: %s\n", logPath)
	return nil
}

// sendClicks sends clicks at o.rate for o.duration with at most o.workers
// in flight, and returns when each accepted click's 200 arrived.
func sendClicks(ctx context.Context, c *http.Client, url, code string, o lagOptions) (accepted []time.Time, failed, late int) {
	body := []byte(fmt.Sprintf(`{"affiliate_url":"https://demo.example/?via=%s"}`, code))
	n := int(o.duration.Seconds() * float64(o.rate))
	interval := time.Second / time.Duration(o.rate)
	slots := make(chan struct{}, o.workers)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		select {
		case slots <- struct{}{}:
		default:
			late++ // every worker busy: sent as soon as one frees
			slots <- struct{}{}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := c.Do(req)
			ok := err == nil && resp.StatusCode == 200
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			at := time.Now()
			mu.Lock()
			if ok {
				accepted = append(accepted, at)
			} else {
				failed++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return accepted, failed, late
}

// observed is a non-decreasing count of clicks seen over time.
type observed struct {
	mu      sync.Mutex
	at      []time.Time
	count   []int64
	current int64
}

func (o *observed) add(at time.Time, n int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n > o.current {
		o.current = n
		o.at, o.count = append(o.at, at), append(o.count, n)
	}
}

func (o *observed) last() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.current
}

// lags is, for the k-th accepted click, the first time the count reached
// k minus its acceptance, sorted.
func (o *observed) lags(accepted []time.Time) []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]time.Duration, 0, len(accepted))
	j := 0
	for k, t := range accepted {
		for j < len(o.count) && o.count[j] < int64(k+1) {
			j++
		}
		if j == len(o.count) {
			break
		}
		out = append(out, max(o.at[j].Sub(t), 0))
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

// readClicks counts real click events on tracking's topic as they arrive.
func readClicks(ctx context.Context, brokers []string, into *observed) error {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: eventsv1.TopicTracking, Partition: 0, MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 10 * time.Millisecond})
	defer r.Close()
	var n int64
	for {
		msg, err := r.FetchMessage(ctx)
		if err != nil {
			return err
		}
		var env eventsv1.Envelope
		if proto.Unmarshal(msg.Value, &env) != nil || env.GetType() != eventsv1.TypeClickRecorded {
			continue
		}
		var ev eventsv1.ClickRecorded
		if proto.Unmarshal(env.GetPayload(), &ev) == nil && !ev.GetIsTest() {
			n++
			into.add(time.Now(), n)
		}
	}
}
