// Command manifestcheck reads rendered Kubernetes manifests (multi-document
// YAML such as `helm template` output) on stdin and fails when one of them
// would not survive the API server or breaks a house rule:
//
//   - workloads, Services, Jobs, Ingresses, PodDisruptionBudgets and
//     HorizontalPodAutoscalers are decoded strictly into the k8s.io/api types
//     (unknown, misspelled, wrongly-cased or duplicated fields are errors,
//     which `helm lint` does not catch);
//   - no Ingress path can route /admin/v1/ (admin routes are in-cluster only);
//   - selectors, Ingress backends and HPA targets refer to objects that exist
//     in the same input;
//   - pods run as non-root with a read-only root filesystem, no capabilities,
//     the RuntimeDefault seccomp profile and resources set.
//
// Usage:
//
//	helm template svc charts/svc | manifestcheck -expect Deployment=2,Ingress=1
//
// Exit status: 0 when every check passes, 1 when a check fails, 2 on bad
// usage or unreadable input.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("manifestcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	expect := fs.String("expect", "", "comma-separated Kind=count pairs the input must contain exactly, e.g. Deployment=2,Ingress=1")
	allow := fs.String("allow", strings.Join(defaultUnchecked, ","), "comma-separated apiVersion/Kind accepted without a schema (custom resources)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "manifestcheck: unexpected arguments %q: manifests are read from stdin\n", fs.Args())
		return 2
	}
	want, err := parseExpect(*expect)
	if err != nil {
		fmt.Fprintf(stderr, "manifestcheck: -expect: %v\n", err)
		return 2
	}

	res, err := Check(stdin, Options{Unchecked: splitList(*allow)})
	if err != nil {
		fmt.Fprintf(stderr, "manifestcheck: %v\n", err)
		return 2
	}
	problems := append(res.Problems, checkCounts(res.Counts, want)...)
	for _, p := range problems {
		fmt.Fprintf(stderr, "manifestcheck: %s\n", p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "manifestcheck: %d problem(s) in %d object(s)\n", len(problems), res.Objects)
		return 1
	}
	fmt.Fprintf(stdout, "manifestcheck: ok: %s\n", summary(res.Counts))
	return 0
}

// parseExpect reads "Kind=N,Kind=N".
func parseExpect(s string) (map[string]int, error) {
	want := map[string]int{}
	for _, pair := range splitList(s) {
		kind, n, ok := strings.Cut(pair, "=")
		if !ok || kind == "" {
			return nil, fmt.Errorf("%q is not Kind=count", pair)
		}
		count, err := strconv.Atoi(n)
		if err != nil || count < 0 {
			return nil, fmt.Errorf("%q: count must be a whole number >= 0", pair)
		}
		want[kind] = count
	}
	return want, nil
}

func checkCounts(got, want map[string]int) []Problem {
	var problems []Problem
	for _, kind := range sortedKeys(want) {
		if got[kind] != want[kind] {
			problems = append(problems, Problem{Msg: fmt.Sprintf("expected %d %s, found %d", want[kind], kind, got[kind])})
		}
	}
	return problems
}

func summary(counts map[string]int) string {
	if len(counts) == 0 {
		return "no objects"
	}
	parts := make([]string, 0, len(counts))
	for _, kind := range sortedKeys(counts) {
		parts = append(parts, fmt.Sprintf("%s=%d", kind, counts[kind]))
	}
	return strings.Join(parts, ",")
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
