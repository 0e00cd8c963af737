package load

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Write prints results in the benchmarks' one format: a table of a row
// per run (what was answered, the successes per second, the latency
// percentiles of every answer, the statuses), then what each run's
// failures, labels and early end were.
func Write(out io.Writer, results ...Result) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\trequests\tok\tfailed\tok/s\tp50\tp90\tp95\tp99\tmax\tstatuses\ttransport err\tseconds\tcpu/ok\t")
	for _, r := range results {
		l := r.Latency
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%.1f\t%s\t\n", r.Name, r.Requests, r.OK, r.Failed, PerSecond(r.Throughput()),
			MS(l.P50), MS(l.P90), MS(l.P95), MS(l.P99), MS(l.Max), StatusList(r.Statuses), r.TransportErrors, r.Elapsed.Seconds(), cpuPerOK(r))
	}
	_ = tw.Flush()
	for _, r := range results {
		for _, code := range slices.Sorted(maps.Keys(r.Failures)) {
			what := "first failed answer"
			if code != 0 {
				what = "first failed " + strconv.Itoa(code) + " answer"
			}
			fmt.Fprintf(out, "%s: %s: %s\n", r.Name, what, r.Failures[code])
		}
		if r.FirstTransport != "" {
			fmt.Fprintf(out, "%s: first transport error: %s\n", r.Name, r.FirstTransport)
		}
		if len(r.Labels) > 0 {
			fmt.Fprintf(out, "%s: successes by kind: %s\n", r.Name, labelList(r.Labels))
		}
		if r.Exhausted {
			fmt.Fprintf(out, "%s: every job was sent after %.1fs (before the duration): the figures cover that time\n", r.Name, r.Elapsed.Seconds())
		}
	}
}

// cpuPerOK renders the machine's CPU time per success, "-" when not
// measured.
func cpuPerOK(r Result) string {
	if r.CPUPerOK() == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fms", float64(r.CPUPerOK())/float64(time.Millisecond))
}

// StatusList renders status counts as "200:1234 404:5", sorted by status
// ("-" for none; status 0, answers without one, is left out).
func StatusList(m map[int]int64) string {
	var b strings.Builder
	for _, code := range slices.Sorted(maps.Keys(m)) {
		if code == 0 {
			continue
		}
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

func labelList(m map[string]int64) string {
	parts := make([]string, 0, len(m))
	for _, l := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, l+":"+strconv.FormatInt(m[l], 10))
	}
	return strings.Join(parts, " ")
}

// MS formats a latency in milliseconds with two decimals.
func MS(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
}

// PerSecond formats a rate: whole numbers from 100 up, one decimal below.
func PerSecond(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// Ratio is a/b, 0 when b is not positive.
func Ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// Verdict is how a report says whether a target was met.
func Verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}
