package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/pg/pgtest"
)

// The whole benchmark, shortened: stack up, catalog seeded and synced,
// both targets driven, every answer backed by a row. With one forwarded
// address the per-IP click limit binds and 429s are counted apart; with
// enough addresses it never does, which also shows X-Forwarded-For from
// loopback is honoured.
func TestBenchDrivesTheRealClickRoute(t *testing.T) {
	if testing.Short() {
		t.Skip("starts accounts and tracking in-process")
	}
	t.Parallel()
	tests := []struct {
		name        string
		args        []string
		wantLimited bool
	}{
		{"enough addresses: nothing limited", []string{"-targets=reference,service", "-ips=4096"}, false},
		// Long enough that even a loaded box (a clean-clone run managed 49
		// clicks in 1.5 s) sends more than the 60 a minute allows.
		{"one address: the 60/min limit binds", []string{"-targets=service", "-ips=1", "-duration=6s"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"-duration=1500ms", "-warmup=0s", "-connections=4", "-links=12", "-partners=3",
				"-log=" + filepath.Join(t.TempDir(), "services.log")}, tt.args...)
			o, err := parseFlags(args, func(k string) string {
				if k == "TEST_DATABASE_URL" {
					return pgtest.AdminURL()
				}
				return ""
			}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rep, err := bench(ctx, o, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			svc, ok := rep.find("service")
			if !ok {
				t.Fatal("no service result")
			}
			if svc.Unexpected() != 0 || svc.TransportErrors != 0 {
				t.Fatalf("service: %d failed, %d transport errors; first: %s", svc.Unexpected(), svc.TransportErrors, svc.FirstFailure())
			}
			if tt.wantLimited {
				// 60 clicks per minute window for the one address (two if
				// the run straddles a minute boundary), the rest refused.
				if svc.OK < 1 || svc.OK > 120 || svc.RateLimited() == 0 {
					t.Fatalf("ok %d, 429 %d: want at most 120 ok and the rest limited", svc.OK, svc.RateLimited())
				}
			} else {
				if svc.RateLimited() != 0 || svc.OK == 0 {
					t.Fatalf("ok %d, 429 %d: want clicks and no 429", svc.OK, svc.RateLimited())
				}
				if svc.Reused() == 0 {
					t.Fatal("no click reused an existing_click_id")
				}
				ref, ok := rep.find("reference")
				if !ok || ref.OK == 0 || ref.Failed != 0 {
					t.Fatalf("reference: %+v", ref)
				}
			}
			// Every OK answer is a stored click event.
			want := svc.OK
			if got := rep.rows["service"]; !strings.HasPrefix(got, strconv.FormatInt(want, 10)+" rows") {
				t.Fatalf("service rows %q, want %d", got, want)
			}
			var out strings.Builder
			rep.print(&out)
			for _, s := range []string{"ok/s", "service p99:", serviceClickTable} {
				if !strings.Contains(out.String(), s) {
					t.Fatalf("report lacks %q:\n%s", s, out.String())
				}
			}
			if _, err := os.Stat(rep.logPath); err != nil {
				t.Fatalf("service log: %v", err)
			}
		})
	}
}
