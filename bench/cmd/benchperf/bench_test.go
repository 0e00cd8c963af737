package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

func TestRunFixed(t *testing.T) {
	calls := make(chan struct{}, 100)
	do := func(context.Context) (any, error) {
		calls <- struct{}{}
		return nil, nil
	}
	// Every third answer fails its check; errors count the same. Every
	// answer has its latency.
	checked := 0
	res := runFixed(context.Background(), "x", 30, 1, do, func(any) error {
		checked++
		if checked%3 == 0 {
			return fmt.Errorf("bad answer %d", checked)
		}
		return nil
	})
	if n := len(calls); n != 30 || res.Requests != 30 || res.OK != 20 || res.Failed != 10 || res.FirstFailure() != "bad answer 3" || res.Latency.Count != 30 {
		t.Fatalf("calls %d, result %+v", len(calls), res)
	}
	res = runFixed(context.Background(), "y", 10, 4, func(context.Context) (any, error) { return nil, errors.New("down") }, func(any) error { return nil })
	if res.OK != 0 || res.Failed != 10 || res.FirstFailure() != "down" || res.Throughput() != 0 {
		t.Fatalf("all failing: %+v", res)
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 10091962: "10,091,962", -1234567: "-1,234,567"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	env := func(string) string { return "" }
	o, err := parseFlags(nil, env, io.Discard)
	if err != nil || o.days != 730 || o.minClicks != 10_000_000 || o.concurrency != 8 || o.requests != 400 || o.jit != "" ||
		o.databaseURL != "postgres://postgres@localhost:5432/postgres?sslmode=disable" {
		t.Fatalf("defaults: %+v %v", o, err)
	}
	for _, args := range [][]string{{"-days=89"}, {"-clicks=0"}, {"-concurrency=0"}, {"-requests=0"}, {"-ref-requests=0"},
		{"-warmup=-1"}, {"-db-max-conns=0"}, {"-jit=maybe"}} {
		if _, err := parseFlags(args, env, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestCheckRoute(t *testing.T) {
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	want := rangeTotals{Clicks: 30, Leads: 3, Conversions: 2, Sales: 2}
	body := func(period, first string, clicks1, total int64, revenue float64) []byte {
		return fmt.Appendf(nil, `{"data":[{"date":%q,"clicks":%d},{"date":"2026-01-02","clicks":20}],
			"metrics":{"totalClicks":%d,"totalLeads":3,"totalConversions":2,"totalSales":2,"totalRevenue":%v,"totalPartners":1},
			"meta":{"period":%q}}`, first, clicks1, total, revenue, period)
	}
	days, err := checkRoute(body("all", "2026-01-01", 10, 30, 9.5), "all", from, 2, want)
	if err != nil || days["2026-01-01"] != 10 || days["2026-01-02"] != 20 {
		t.Fatalf("a right answer: %v %v", days, err)
	}
	for name, b := range map[string][]byte{
		"other period":        body("90d", "2026-01-01", 10, 30, 9.5),
		"wrong first day":     body("all", "2025-12-31", 10, 30, 9.5),
		"wrong total":         body("all", "2026-01-01", 10, 31, 9.5),
		"days do not add up":  body("all", "2026-01-01", 11, 30, 9.5),
		"no money":            body("all", "2026-01-01", 10, 30, 0),
		"an error envelope":   []byte(`{"success":false,"error":{"message":"nope"}}`),
		"not json":            []byte(`<html>`),
		"one day too few":     []byte(`{"data":[{"date":"2026-01-01","clicks":30}],"metrics":{"totalClicks":30},"meta":{"period":"all"}}`),
		"leads/sales missing": []byte(`{"data":[{"date":"2026-01-01","clicks":10},{"date":"2026-01-02","clicks":20}],"metrics":{"totalClicks":30,"totalRevenue":1,"totalPartners":1},"meta":{"period":"all"}}`),
	} {
		if _, err := checkRoute(b, "all", from, 2, want); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}

	route := map[string]int64{"2026-01-01": 10, "2026-01-02": 20}
	if err := checkReference([]dayCount{{from, 10}, {from.AddDate(0, 0, 1), 20}}, route); err != nil {
		t.Fatal(err)
	}
	if err := checkReference([]dayCount{{from, 10}, {from.AddDate(0, 0, 1), 21}}, route); err == nil {
		t.Error("a different day accepted")
	}
	if err := checkReference([]dayCount{{from, 30}}, route); err == nil {
		t.Error("a missing day accepted")
	}
}

// TestBenchSmall runs the whole benchmark at a small scale against real
// Postgres (TEST_DATABASE_URL, else localhost): analytics started, the
// seed written and read back, every answer checked, nothing failed.
func TestBenchSmall(t *testing.T) {
	o, err := parseFlags([]string{"-days=95", "-clicks=30000", "-concurrency=2", "-requests=12", "-ref-requests=4", "-warmup=2", "-db-max-conns=3"},
		os.Getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o.logFile = t.TempDir() + "/analytics.log"
	rep, err := bench(ctx, o, time.Date(2026, 3, 10, 15, 4, 5, 0, time.UTC), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if rep.seed.Clicks < 30000 || rep.seed.RawRows != rep.seed.Clicks || rep.seed.MoneyRows == 0 || rep.plan.First.Format(time.DateOnly) != "2025-12-06" {
		t.Fatalf("seed %+v plan %+v", rep.seed, rep.plan)
	}
	if rep.days["all"] != 95 || rep.days["90d"] != 90 || rep.totals["all"].Clicks != rep.seed.Clicks || rep.totals["90d"].Clicks >= rep.seed.Clicks {
		t.Fatalf("ranges %v totals %+v", rep.days, rep.totals)
	}
	for _, name := range []string{"all route", "all reference", "90d route", "90d reference"} {
		res, ok := rep.results[name]
		if !ok || res.Failed != 0 || res.OK != res.Requests || res.Latency.P99 <= 0 {
			t.Errorf("%s: %+v", name, res)
		}
	}
	var out strings.Builder
	rep.print(&out)
	for _, want := range []string{"period=all ", "period=90d", "all reference", "reference p99 / route p99"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// A click's lag is from its acceptance to the first observation counting
// it: the k-th accepted click is counted once the count reaches k.
func TestObservedLags(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var o observed
	o.add(at(50), 1)
	o.add(at(60), 1) // no change: not an observation of something new
	o.add(at(120), 3)
	o.add(at(110), 2) // a lower count never lowers the curve
	got := o.lags([]time.Time{at(0), at(10), at(100), at(130)})
	want := []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 110 * time.Millisecond}
	if len(got) != len(want) {
		t.Fatalf("lags %v, want %v (the 4th click was never counted)", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("lags %v, want %v", got, want)
		}
	}
	if o.last() != 3 {
		t.Fatalf("last %d", o.last())
	}
}

// `benchperf lag` end to end at a small rate: every click accepted is
// counted by the route, and the report says so.
func TestLagSmall(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"lag", "-rate=40", "-duration=1s", "-workers=4", "-seed=../../../deploy/seed/demo.json",
		"-log=" + t.TempDir() + "/stack.log"}, os.Getenv, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"clicks: 40 accepted (0 failed)", "its event on tracking.events.v1", "the performance route counting it", "route p99"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
}
