package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestSummarizeReadsNearestRankPercentiles(t *testing.T) {
	t.Parallel()
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // unsorted on purpose: Summarize sorts
	}
	eighty := make([]int, 80)
	for i := range eighty {
		eighty[i] = i + 1
	}
	m := time.Millisecond
	tests := []struct {
		name    string
		samples []time.Duration
		want    Latency
	}{
		{"no samples", nil, Latency{}},
		{"one sample is every percentile", ms(7), Latency{Count: 1, P50: 7 * m, P90: 7 * m, P95: 7 * m, P99: 7 * m, Max: 7 * m, Mean: 7 * m}},
		{"1..100 ms", ms(hundred...), Latency{Count: 100, P50: 50 * m, P90: 90 * m, P95: 95 * m, P99: 99 * m, Max: 100 * m, Mean: 50500 * time.Microsecond}},
		// p99 of 80 is the largest (rank ceil(79.2) = 80), p95 the 76th.
		{"80 samples", ms(eighty...), Latency{Count: 80, P50: 40 * m, P90: 72 * m, P95: 76 * m, P99: 80 * m, Max: 80 * m, Mean: 40500 * time.Microsecond}},
		{"one slow outlier in ten sets p99 and max only", ms(1, 1, 1, 1, 1, 1, 1, 1, 1, 40), Latency{Count: 10, P50: m, P90: m, P95: 40 * m, P99: 40 * m, Max: 40 * m, Mean: 4900 * time.Microsecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Summarize(tt.samples); got != tt.want {
				t.Fatalf("Summarize = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A run over a fixed job list counts every outcome apart: successes with
// their labels, failures by status with their first detail, and ends when
// the jobs run out.
func TestRunCountsOutcomesOverJobs(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	res, err := Run(context.Background(), Config{Name: "t", Connections: 4, Duration: 10 * time.Second, Jobs: 40,
		Do: func(_ context.Context, _, job int) Outcome {
			calls.Add(1)
			switch {
			case job%10 == 3:
				return Outcome{Status: 404, Detail: fmt.Sprintf("no job %d", job)}
			case job%10 == 5:
				return Outcome{Status: 200, OK: true}
			default:
				return Outcome{Status: 200, OK: true, Label: "refunded"}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Exhausted || res.Requests != 40 || calls.Load() != 40 || res.Latency.Count != 40 {
		t.Fatalf("exhausted %v, requests %d, calls %d, latencies %d", res.Exhausted, res.Requests, calls.Load(), res.Latency.Count)
	}
	if res.OK != 36 || res.Failed != 4 || res.Statuses[404] != 4 || res.Labels["refunded"] != 32 || len(res.Done) != 36 {
		t.Fatalf("ok %d failed %d statuses %v labels %v done %d", res.OK, res.Failed, res.Statuses, res.Labels, len(res.Done))
	}
	if !strings.HasPrefix(res.Failures[404], "no job ") || res.FirstFailure() != res.Failures[404] {
		t.Fatalf("failures %v", res.Failures)
	}
}

// Without a duration, a run sends exactly its jobs, one worker's in order.
func TestRunWithoutDurationSendsEveryJob(t *testing.T) {
	t.Parallel()
	var last atomic.Int64
	last.Store(-1)
	res, err := Run(context.Background(), Config{Name: "n", Connections: 1, Jobs: 30, Do: func(_ context.Context, _, job int) Outcome {
		if int64(job) != last.Add(1) {
			return Outcome{Err: errors.New("out of order")}
		}
		return Outcome{OK: true}
	}})
	if err != nil || res.OK != 30 || res.TransportErrors != 0 || res.Statuses[0] != 30 {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestRunCountsTransportErrorsWithoutLatency(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/x"
	_ = ln.Close() // nothing listens there any more: every dial is refused
	client := NewClient(2)
	res, err := Run(context.Background(), Config{Name: "down", Connections: 2, Duration: 50 * time.Millisecond, Jobs: -1,
		Do: func(ctx context.Context, _, _ int) Outcome {
			status, _, err := Send(ctx, client, http.MethodPost, url, []byte("{}"), nil)
			return Outcome{Status: status, Err: err, OK: err == nil}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.TransportErrors == 0 || res.Requests != 0 || res.Latency.Count != 0 || res.Throughput() != 0 {
		t.Fatalf("%+v", res)
	}
	if !strings.Contains(res.FirstFailure(), "refused") {
		t.Fatalf("first failure %q should name the refused dial", res.FirstFailure())
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(block); srv.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	client := NewClient(2)
	done := make(chan Result, 1)
	go func() {
		res, _ := Run(ctx, Config{Name: "hang", Connections: 2, Duration: time.Hour, Jobs: -1, Do: func(ctx context.Context, _, _ int) Outcome {
			status, _, err := Send(ctx, client, http.MethodGet, srv.URL, nil, nil)
			return Outcome{Status: status, Err: err}
		}})
		done <- res
	}()
	cancel()
	select {
	case res := <-done:
		if res.TransportErrors != 0 {
			t.Fatalf("a cancelled request counted as a transport error: %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

func TestRunRejectsAConfigThatCannotRun(t *testing.T) {
	t.Parallel()
	do := func(context.Context, int, int) Outcome { return Outcome{} }
	for name, cfg := range map[string]Config{
		"no connections":                     {Duration: time.Second, Jobs: -1, Do: do},
		"neither a duration nor a job count": {Connections: 1, Jobs: -1, Do: do},
		"negative duration":                  {Connections: 1, Duration: -time.Second, Jobs: 1, Do: do},
		"no request":                         {Connections: 1, Duration: time.Second},
	} {
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

// Send sends the body as JSON with the caller's headers and reads the answer.
func TestSend(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(r.Body)
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write(b.Bytes())
	}))
	defer srv.Close()
	status, answer, err := Send(context.Background(), NewClient(1), http.MethodPost, srv.URL, []byte(`{"a":1}`),
		func(h http.Header) { h.Set("Authorization", "Bearer k") })
	if err != nil || status != http.StatusTeapot || string(answer) != `{"a":1}` {
		t.Fatalf("%d %q %v", status, answer, err)
	}
}

func TestWrite(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	Write(&b, Result{Name: "sale service", Elapsed: 2 * time.Second, Requests: 5, OK: 4, Failed: 1,
		Statuses: map[int]int64{200: 4, 409: 1}, Failures: map[int]string{409: "duplicate"}, Labels: map[string]int64{"refunded": 4}, Exhausted: true})
	out := b.String()
	for _, want := range []string{"sale service", "200:4 409:1", "first failed 409 answer: duplicate", "successes by kind: refunded:4", "every job was sent after 2.0s"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
