package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/pg"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	"github.com/svc-dev/svc/services/analytics/server"
)

// snapshotSQL renders every aggregate table as sorted text, sources by
// their dimensions rather than their ids (a generation numbers them anew).
const snapshotSQL = `
WITH s AS (SELECT id, (program_id, referrer, utm_source, utm_medium, utm_campaign, landing_page, country, device)::text AS dims FROM sources)
SELECT string_agg(line, E'\n' ORDER BY line) FROM (
	SELECT 'activity ' || t::text AS line FROM activity_buckets t
	UNION ALL SELECT 'money ' || t::text FROM money_buckets t
	UNION ALL SELECT 'activity_day ' || t::text FROM activity_days t
	UNION ALL SELECT 'money_day ' || t::text FROM money_days t
	UNION ALL SELECT 'customer ' || t::text FROM customers t
	UNION ALL SELECT 'counted ' || t::text FROM counted t
	UNION ALL SELECT 'test ' || t::text FROM test_events t
	UNION ALL SELECT 'source ' || dims FROM s
	UNION ALL SELECT 'customer_source ' || c.customer_id || ' ' || s.dims FROM customer_sources c JOIN s ON s.id = c.source_id
	UNION ALL SELECT 'source_bucket ' || (b.program_id, b.bucket, b.clicks, b.leads, b.conversions)::text || ' ' || s.dims FROM source_buckets b JOIN s ON s.id = b.source_id
	UNION ALL SELECT 'source_money ' || (m.program_id, m.bucket, m.currency, m.revenue_minor)::text || ' ' || s.dims FROM source_money m JOIN s ON s.id = m.source_id
	UNION ALL SELECT 'partner ' || t::text FROM partner_buckets t
	UNION ALL SELECT 'partner_money ' || t::text FROM partner_money t
) all_rows`

// `analytics rebuild` against the running stack: the rebuilt generation
// equals the live figures; a rebuild while clicks keep arriving loses and
// doubles none of them; the live consumers go on in the new generation.
func TestRebuild(t *testing.T) {
	t.Parallel()
	clock := platformtest.NewClock(t0)
	base := platformtest.Env(t)
	st := stacktest.StartOn(t, clock, platformtest.With(env, base))
	gw := httptest.NewServer(gateway.New(st.Handlers()))
	t.Cleanup(gw.Close)
	d := &dash{gw: gw.URL, clock: clock, http: &http.Client{Timeout: 30 * time.Second}, issuer: newIssuer(t, clock)}
	w := d.world(t)
	owner := d.token(t, w.owner)
	pool, err := pg.NewPool(context.Background(), base["DATABASE_URL"], pg.Options{Schema: "analytics", MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	rebuild := func(t *testing.T) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := platform.Run(context.Background(), server.Spec(), []string{"rebuild"}, func(k string) string { return base[k] }, &stdout, platform.WithStderr(&stderr))
		if code != 0 {
			t.Fatalf("rebuild: exit %d: %s %s", code, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	snapshot := func(t *testing.T) string {
		t.Helper()
		var s *string
		if err := pool.QueryRow(context.Background(), snapshotSQL).Scan(&s); err != nil || s == nil {
			t.Fatalf("snapshot: %v", err)
		}
		return *s
	}
	clicks := func(t *testing.T) float64 {
		t.Helper()
		r := d.do(t, "GET", fmt.Sprintf("/api/tracking/performance/%d", w.program), nil, bearer(owner)...)
		n, _ := metric(r, "totalClicks").(float64)
		return n
	}

	// Traffic of every kind: sourced clicks, a test click, leads (one a
	// test), sales in three currencies and their commissions.
	var ids []string
	for i, ref := range []string{"https://google.com/", "", "https://news.example/a"} {
		ids = append(ids, d.click(t, w, map[string]any{"referrer_url": ref, "affiliate_url": fmt.Sprintf("https://brand.example/p%d?via=%s&utm_source=s%d", i, w.code, i)}))
	}
	// The test click with the program's key: only those verify (issue 23).
	if r := d.do(t, "POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://brand.example/?via=" + w.code,
		"additional_data": map[string]any{"test_mode": true}}, bearer(w.test)...); r.status != 200 {
		t.Fatalf("test click: %d %s", r.status, r.raw)
	}
	for _, id := range ids[:2] {
		if r := d.do(t, "POST", "/api/v1/track/lead", map[string]any{"click_id": id, "customer_key": "k" + d.uniq()}, bearer(w.live)...); r.status != 200 {
			t.Fatalf("lead: %d %s", r.status, r.raw)
		}
	}
	if r := d.do(t, "POST", "/api/v1/track/lead", map[string]any{"click_id": ids[2], "additional_data": map[string]any{"test_mode": true}}, bearer(w.test)...); r.status != 200 {
		t.Fatalf("test lead: %d %s", r.status, r.raw)
	}
	// Every click is in the figures before the sales that name its
	// customer (the live consumers read the two topics independently).
	eventually(t, "the clicks", func() bool { return clicks(t) == 3 })
	usd := d.sale(t, w, ids[0], 4900, "USD")
	eur := d.sale(t, w, ids[1], 2000, "EUR")
	d.sale(t, w, ids[2], 100000, "VND")
	// Refunds: part of one sale, all of another.
	d.refund(t, w.live, usd, 1000)
	d.refund(t, w.live, eur, 0)
	// Every event of both topics in the figures: the sales, their
	// commissions and the refunds (the ledger's), the leads, the
	// conversions and the test events (tracking's).
	eventually(t, "every event in the figures", func() bool {
		r := d.do(t, "GET", fmt.Sprintf("/api/tracking/performance/%d", w.program), nil, bearer(owner)...)
		st := d.do(t, "GET", fmt.Sprintf("/api/tracking/status/%d", w.program), nil, bearer(owner)...)
		data, _ := st.body["data"].(map[string]any)
		stats, _ := data["statistics"].(map[string]any)
		tests := func(step string) any { m, _ := stats[step].(map[string]any); return m["testEventCount"] }
		return metric(r, "totalSales") == 3.0 && metric(r, "totalPartnersCommission") == 7.64 && metric(r, "totalLeads") == 2.0 &&
			metric(r, "totalRefunds") == 2.0 && metric(r, "totalRefundedAmount") == 33.40 &&
			metric(r, "totalConversions") == 3.0 && tests("pageview") == 1.0 && tests("referrals") == 1.0
	})

	t.Run("the rebuilt generation equals the live figures", func(t *testing.T) {
		live := snapshot(t)
		out := rebuild(t)
		if !strings.Contains(out, "switched to generation") || !strings.Contains(out, "tracking.events.v1: 10 events applied") {
			t.Fatalf("rebuild said: %s", out)
		}
		t.Logf("rebuild: %s", out)
		if got := snapshot(t); got != live {
			t.Fatalf("rebuilt:\n%s\n\nlive before:\n%s", got, live)
		}
	})

	t.Run("a rebuild while clicks arrive: every click counted once", func(t *testing.T) {
		var sent atomic.Int64
		sent.Store(3)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var clickErr atomic.Value
		stopClicks := sync.OnceFunc(func() { close(stop); wg.Wait() })
		defer stopClicks() // before the subtest ends, also when it fails
		body := fmt.Sprintf(`{"affiliate_url":"https://brand.example/landing?via=%s"}`, w.code)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := d.http.Post(d.gw+"/api/v1/track/click", "application/json", strings.NewReader(body))
				if err != nil {
					clickErr.Store(err.Error())
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					clickErr.Store(resp.Status)
					return
				}
				sent.Add(1)
			}
		}()
		// Some clicks before, during and after the rebuild.
		eventually(t, "clicks flowing", func() bool { return sent.Load() >= 13 })
		rebuild(t)
		at := sent.Load()
		eventually(t, "clicks after the switch", func() bool { return sent.Load() >= at+10 })
		stopClicks()
		if e := clickErr.Load(); e != nil {
			t.Fatalf("a click failed: %v", e)
		}
		want := float64(sent.Load())
		eventually(t, fmt.Sprintf("%v clicks in the figures", want), func() bool { return clicks(t) >= want })
		if got := clicks(t); got != want {
			t.Fatalf("%v clicks counted, %v sent", got, want)
		}
		// And the live generation, after all that, is what a rebuild makes.
		live := snapshot(t)
		rebuild(t)
		if got := snapshot(t); got != live {
			t.Fatalf("rebuilt after concurrent traffic:\n%s\n\nlive:\n%s", got, live)
		}
	})

	t.Run("events the topics no longer hold: no switch, unless --allow-loss", func(t *testing.T) {
		// A click counted live whose event is gone from the topic (as
		// after retention trimmed it).
		if _, err := pool.Exec(context.Background(), `INSERT INTO counted (kind, id) VALUES ('click', 999999999)`); err != nil {
			t.Fatal(err)
		}
		live := snapshot(t)
		var stdout, stderr bytes.Buffer
		code := platform.Run(context.Background(), server.Spec(), []string{"rebuild"}, func(k string) string { return base[k] }, &stdout, platform.WithStderr(&stderr))
		if code != 1 || !strings.Contains(stderr.String(), "the topics no longer hold all of history") {
			t.Fatalf("rebuild with lost history: exit %d: %s %s", code, stdout.String(), stderr.String())
		}
		if got := snapshot(t); got != live {
			t.Fatal("a refused rebuild changed the live figures")
		}
		stdout.Reset()
		stderr.Reset()
		if code := platform.Run(context.Background(), server.Spec(), []string{"rebuild", "--allow-loss"}, func(k string) string { return base[k] }, &stdout, platform.WithStderr(&stderr)); code != 0 {
			t.Fatalf("--allow-loss: exit %d: %s %s", code, stdout.String(), stderr.String())
		}
		if got := snapshot(t); strings.Contains(got, "999999999") {
			t.Fatal("--allow-loss kept the live generation")
		}
	})

	var done, running int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'failed') FROM rebuilds`).Scan(&done, &running); err != nil || done != 4 || running != 1 {
		t.Fatalf("rebuilds recorded: %d done, %d failed (%v), want 4 and 1", done, running, err)
	}
	var leftovers int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'analytics\_%'`).Scan(&leftovers); err != nil || leftovers != 0 {
		t.Fatalf("%d schemas left behind (%v)", leftovers, err)
	}
}
