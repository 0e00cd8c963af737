package server_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/pg/pgtest"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/services/analytics/server"
)

// `analytics fx import <csv>`: a good file is loaded (new dates added, a
// date already there replaced) and the figures' conversion uses it, the
// nearest earlier rate for a day without one; a file with any bad line
// loads nothing and says which lines.
func TestFXImportCommand(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	env := map[string]string{"DATABASE_URL": dsn}
	run := func(t *testing.T, args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := platform.Run(context.Background(), server.Spec(), args, func(k string) string { return env[k] }, &stdout, platform.WithStderr(&stderr))
		return code, stdout.String(), stderr.String()
	}
	write := func(t *testing.T, body string) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), "rates.csv")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	good := write(t, "currency,date,usd_per_unit\nEUR,2026-11-02,1.1523\nVND,2026-11-02,0.0000394\nEUR,2026-01-02,1.1711\n")
	code, out, errOut := run(t, "fx", "import", good)
	if code != 0 || !strings.Contains(out, "imported 3 rates") || !strings.Contains(out, "2 new dates, 1 replaced") || !strings.Contains(out, "EUR 2026-11-02") {
		t.Fatalf("good file: %d %q %q", code, out, errOut)
	}
	pool, err := pg.NewPool(context.Background(), dsn, pg.Options{Schema: "analytics", MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	usd := func(t *testing.T, minor int64, cur, day string) string {
		t.Helper()
		var v string
		var estimated bool
		if err := pool.QueryRow(context.Background(), `SELECT round($1::numeric * usd_per_minor, 6)::text, estimated FROM fx_rate_on($2, $3::date)`, minor, cur, day).Scan(&v, &estimated); err != nil {
			t.Fatal(err)
		}
		if estimated {
			v += " estimated"
		}
		return v
	}
	for _, tc := range []struct {
		minor    int64
		cur, day string
		want     string
	}{
		{10000, "EUR", "2026-11-02", "115.230000"},            // the imported rate, that day
		{10000, "EUR", "2026-11-25", "115.230000 estimated"},  // a later day without a rate: the nearest earlier
		{10000, "EUR", "2026-01-02", "117.110000"},            // replaced
		{1000000, "VND", "2026-11-03", "39.400000 estimated"}, // VND has no minor unit
		{10000, "EUR", "2023-06-01", "109.560000 estimated"},
		{10000, "USD", "2026-11-25", "100.000000"}, // USD is exact  // before the first rate: the first
	} {
		if got := usd(t, tc.minor, tc.cur, tc.day); got != tc.want {
			t.Errorf("usd(%d %s on %s) = %s, want %s", tc.minor, tc.cur, tc.day, got, tc.want)
		}
	}

	bad := write(t, "currency,date,usd_per_unit\nEUR,2026-11-03,1.2\nEUR,2026-13-01,1.1\nGBP,2026-11-03,1.3\nEUR,2026-11-04,-1\nUSD,2026-11-04,2\nEUR,2026-11-03,1.2\nEUR,1999-12-31,1.0\n")
	code, out, errOut = run(t, "fx", "import", bad)
	for _, want := range []string{"nothing imported", "line 3: date", "line 5: usd_per_unit", "line 6: USD is 1", "line 7: EUR 2026-11-03 is also on line 2", "line 8: date 1999-12-31 is outside 2000-01-01 to 2100-12-31"} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("bad file: %d, stderr lacks %q: %q %q", code, want, out, errOut)
		}
	}
	// A currency analytics does not know fails the import as a whole.
	code, _, errOut = run(t, "fx", "import", write(t, "currency,date,usd_per_unit\nEUR,2026-11-05,1.2\nGBP,2026-11-05,1.3\n"))
	if code != 1 || !strings.Contains(errOut, "GBP: not a sale currency") {
		t.Errorf("unknown currency: %d %q", code, errOut)
	}
	if got := usd(t, 10000, "EUR", "2026-11-05"); got != "115.230000 estimated" {
		t.Errorf("a refused file changed the rates: %s", got)
	}
	for _, args := range [][]string{{"fx"}, {"fx", "export", good}, {"fx", "import"}} {
		if code, _, _ := run(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code, _, errOut := run(t, "fx", "import", write(t, "date,currency,rate\n")); code != 1 || !strings.Contains(errOut, "the header must be") {
		t.Errorf("wrong header: %d %q", code, errOut)
	}
	// "-" reads the file from stdin (a pod has no shell to copy one in).
	var stdout, stderr bytes.Buffer
	code = platform.Run(context.Background(), server.Spec(), []string{"fx", "import", "-"}, func(k string) string { return env[k] }, &stdout,
		platform.WithStderr(&stderr), platform.WithStdin(strings.NewReader("currency,date,usd_per_unit\nEUR,2026-11-05,1.1612\n")))
	if code != 0 || !strings.Contains(stdout.String(), "imported 1 rates from -") {
		t.Fatalf("stdin: %d %q %q", code, stdout.String(), stderr.String())
	}
	if got := usd(t, 10000, "EUR", "2026-11-05"); got != "116.120000" {
		t.Errorf("the rate from stdin: %s", got)
	}
	// Daily money, and the days' dollars as the consumers converted them
	// at the rates of then; the next import changes the rate of the first
	// day.
	if _, err := pool.Exec(context.Background(), `WITH v (day, cur, minor) AS (
			VALUES ('2019-06-01'::date, 'EUR', 10000), ('2026-11-25', 'EUR', 10000), ('2026-11-03', 'VND', 1000000), ('2026-11-25', 'USD', 10000)
		), m AS (
			INSERT INTO money_days (program_id, day, currency, revenue_minor, commission_minor) SELECT 1, day, cur, minor, minor / 10 FROM v
		)
		INSERT INTO activity_days (program_id, day, revenue_usd, commission_usd, fx_estimated)
		SELECT 1, v.day, sum(v.minor * r.usd_per_minor), sum((v.minor / 10) * r.usd_per_minor), bool_or(r.estimated)
		FROM v CROSS JOIN LATERAL fx_rate_on(v.cur, v.day) r GROUP BY v.day`); err != nil {
		t.Fatal(err)
	}
	dollars := func(t *testing.T) string {
		t.Helper()
		var v string
		if err := pool.QueryRow(context.Background(), `SELECT string_agg(format('%s %s %s %s', day, round(revenue_usd, 6), round(commission_usd, 6), fx_estimated), '; ' ORDER BY day)
			FROM activity_days`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got, want := dollars(t), "2019-06-01 109.560000 10.956000 t; 2026-11-03 39.400000 3.940000 t; 2026-11-25 216.120000 21.612000 t"; got != want {
		t.Fatalf("daily dollars before the import:\n got %s\nwant %s", got, want)
	}
	// A new first rate stands for the days before it too; the daily table
	// the figures join is the lookup's, day for day, after every import,
	// and so are the daily dollars (a day whose every rate is now its own
	// is no longer estimated).
	if code, out, errOut := run(t, "fx", "import", write(t, "currency,date,usd_per_unit\nEUR,2020-01-02,1.1\nEUR,2026-11-25,1.2\n")); code != 0 {
		t.Fatalf("a first rate: %d %q %q", code, out, errOut)
	}
	if got := usd(t, 10000, "EUR", "2019-06-01"); got != "110.000000 estimated" {
		t.Errorf("before the new first rate: %s", got)
	}
	var stale int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM fx_daily d CROSS JOIN LATERAL fx_rate_on(d.currency, d.day) r
		WHERE (d.usd_per_minor, d.estimated) IS DISTINCT FROM (r.usd_per_minor, r.estimated)`).Scan(&stale); err != nil || stale != 0 {
		t.Fatalf("fx_daily differs from the rates on %d days (%v)", stale, err)
	}
	if got, want := dollars(t), "2019-06-01 110.000000 11.000000 t; 2026-11-03 39.400000 3.940000 t; 2026-11-25 220.000000 22.000000 f"; got != want {
		t.Errorf("daily dollars after the import:\n got %s\nwant %s", got, want)
	}
}
