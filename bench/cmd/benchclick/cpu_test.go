package main

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPUReadsUserAndSystemTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, stat string
		want       time.Duration
		ok         bool
	}{
		{"plain", "4242 (postgres) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0", 3 * time.Second, true},
		{"command with spaces and parens", "7 (postgres: u db (x) idle) S 1 2 3 4 5 6 7 8 9 10 1 2 0 0", 30 * time.Millisecond, true},
		{"truncated", "7 (x) S 1 2 3", 0, false},
		{"no command", "garbage", 0, false},
		{"not numbers", "7 (x) S 1 2 3 4 5 6 7 8 9 10 a b 0 0", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := parseStatCPU(tt.stat)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("parseStatCPU = %v %v, want %v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestCPUBetweenCountsBackendsBornInBetween(t *testing.T) {
	t.Parallel()
	a := cpuSample{self: time.Second, db: map[int]time.Duration{1: 2 * time.Second}, dbKnown: true}
	b := cpuSample{self: 3 * time.Second, db: map[int]time.Duration{1: 5 * time.Second, 2: time.Second}, dbKnown: true}
	u := cpuBetween(a, b)
	if u.Self != 2*time.Second || u.DB != 4*time.Second || !u.DBKnown {
		t.Fatalf("%+v", u)
	}
	if cpuBetween(cpuSample{}, b).DBKnown {
		t.Fatal("a side without backend readings must make the Postgres figure unknown")
	}
	if got := perClick(1500*time.Microsecond, 3); got != "500µs" {
		t.Fatalf("perClick = %q", got)
	}
	if got := perClick(time.Second, 0); got != "n/a" {
		t.Fatalf("perClick with no clicks = %q", got)
	}
}

func TestProcCPUReadsThisProcess(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc on this system")
	}
	if _, ok := procCPU(os.Getpid()); !ok {
		t.Fatal("could not read this process's CPU time from /proc")
	}
}
