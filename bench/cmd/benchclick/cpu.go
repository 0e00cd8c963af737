package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// CPU time spent per click is the figure that survives a noisy machine:
// throughput on a shared 2-core box moves with whatever else runs, but the
// CPU one click costs in this process and in Postgres does not. Both are
// read from the kernel (getrusage for this process, /proc for the Postgres
// backends of the benchmark database, when Postgres runs on this machine).

// cpuSample is a point-in-time reading of the CPU consumed so far.
type cpuSample struct {
	self    time.Duration
	db      map[int]time.Duration // backend pid -> CPU
	dbKnown bool
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports (it is part of the user-space ABI).
const clockTicks = 100

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU reads user+system time of a process from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads fields 14 (utime) and 15 (stime) of a /proc stat line.
// The command name (field 2) is in parentheses and may hold spaces, so the
// fields are counted from the last ')'.
func parseStatCPU(stat string) (time.Duration, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * time.Second / clockTicks, true
}

// sampleCPU reads this process and every backend connected to pool's
// database. Backends are only visible when Postgres runs here (same /proc).
func sampleCPU(ctx context.Context, pool *pgxpool.Pool) cpuSample {
	s := cpuSample{self: selfCPU(), db: map[int]time.Duration{}}
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return s
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) != nil {
			return s
		}
		if d, ok := procCPU(pid); ok {
			s.db[pid] = d
			s.dbKnown = true
		}
	}
	return s
}

// CPUUse is CPU consumed between two samples.
type CPUUse struct {
	Self    time.Duration // this process: the services, the reference and the load generator
	DB      time.Duration // Postgres backends of the benchmark database
	DBKnown bool
}

func cpuBetween(a, b cpuSample) CPUUse {
	u := CPUUse{Self: b.self - a.self, DBKnown: a.dbKnown && b.dbKnown}
	for pid, after := range b.db {
		u.DB += after - a.db[pid] // a backend born in between started at zero
	}
	return u
}

// perClick formats CPU per recorded click in microseconds.
func perClick(d time.Duration, clicks int64) string {
	if clicks <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0fµs", float64(d.Microseconds())/float64(clicks))
}

// loadAverage returns the 1-minute load average, or "" off Linux.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
