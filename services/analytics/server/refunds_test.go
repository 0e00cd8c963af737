package server_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// Overview's refunds (ours, beyond the spec's metrics): a partial refund
// of a USD sale and a full refund of a EUR sale, made the day after the
// sales, counted by the refund's day in dollars at that day's rate; a
// second program's refunds and a test sale's refund never appear; a
// period without the refund day shows none; another time zone's days
// (read from the buckets) agree.
func TestPerformanceRefunds(t *testing.T) {
	t.Parallel()
	clock := platformtest.NewClock(t0)
	d := start(t, clock)
	a, b := d.world(t), d.world(t)
	owner, ownerB := d.token(t, a.owner), d.token(t, b.owner)
	perf := func(t *testing.T, w world, token, query string) reply {
		t.Helper()
		r := d.do(t, "GET", fmt.Sprintf("/api/tracking/performance/%d%s", w.program, query), nil, bearer(token)...)
		if r.status != 200 {
			t.Fatalf("performance %s: %d %s", query, r.status, r.raw)
		}
		return r
	}

	// 10 March: two sales in program a, one in b, a test sale in a.
	usd := d.sale(t, a, d.click(t, a, nil), 4900, "USD") // $49.00
	eur := d.sale(t, a, d.click(t, a, nil), 2000, "EUR") // €20.00 at 1.17 = $23.40
	other := d.sale(t, b, d.click(t, b, nil), 5000, "USD")
	testTxn := "txn_test_" + d.uniq()
	if r := d.do(t, "POST", "/api/v1/track/sale", map[string]any{"transaction_id": testTxn, "amount_cents": 3000, "currency": "USD"}, bearer(a.test)...); r.status != 200 {
		t.Fatalf("test sale: %d %s", r.status, r.raw)
	}
	eventually(t, "the sales", func() bool {
		return metric(perf(t, a, owner, ""), "totalSales") == 2.0 && metric(perf(t, b, ownerB, ""), "totalSales") == 1.0
	})

	// 11 March: $10.00 of the USD sale, all of the EUR one, all of b's,
	// and the test sale's (with the test key).
	clock.Advance(24 * time.Hour)
	owner, ownerB = d.token(t, a.owner), d.token(t, b.owner) // a session lasts an hour
	d.refund(t, a.test, testTxn, 0)
	d.refund(t, a.live, usd, 1000)
	d.refund(t, a.live, eur, 0)
	d.refund(t, b.live, other, 0)

	var r reply
	eventually(t, "the refunds", func() bool {
		r = perf(t, a, owner, "?dateFrom=2026-03-10&dateTo=2026-03-11")
		return metric(r, "totalRefunds") == 2.0 && metric(perf(t, b, ownerB, "?dateFrom=2026-03-10&dateTo=2026-03-11"), "totalRefunds") == 1.0
	})

	t.Run("both days: the refunds beside the unchanged revenue and commission", func(t *testing.T) {
		m := r.body["metrics"].(map[string]any)
		// €20.00 refunded on 11 March at that day's rate (1.17): $23.40.
		for name, want := range map[string]float64{"totalRefunds": 2, "totalRefundedAmount": 33.40, "totalSales": 2, "totalRevenue": 72.40,
			"totalPartnersCommission": 7.24} {
			if m[name] != want {
				t.Errorf("%s = %v, want %v (%s)", name, m[name], want, r.raw)
			}
		}
		// The spec's daily rows keep exactly the spec's fields.
		rows := r.body["data"].([]any)
		wantJSON(t, "11 March", rows[1], `{"clicks":0,"commission":0,"conversions":0,"date":"2026-03-11","leads":0,"partners":0,"period":"2026-03-11","revenue":0,"sales":0}`)
	})

	t.Run("the answer with refunds is the one api/openapi.yaml describes", func(t *testing.T) {
		raw := d.validated(t, fmt.Sprintf("/api/tracking/performance/%d?dateFrom=2026-03-10&dateTo=2026-03-11", a.program), owner)
		if !bytes.Contains(raw, []byte(`"totalRefundedAmount":33.4`)) {
			t.Fatalf("%s", raw)
		}
	})

	t.Run("the other program's refunds are its own", func(t *testing.T) {
		m := perf(t, b, ownerB, "?dateFrom=2026-03-10&dateTo=2026-03-11").body["metrics"].(map[string]any)
		if m["totalRefunds"] != 1.0 || m["totalRefundedAmount"] != 50.0 || m["totalRevenue"] != 50.0 {
			t.Errorf("program b: %v", m)
		}
		// A's owner cannot read b's figures at all.
		if r := d.do(t, "GET", fmt.Sprintf("/api/tracking/performance/%d", b.program), nil, bearer(owner)...); r.status != 403 {
			t.Errorf("a's owner on b: %d %s", r.status, r.raw)
		}
	})

	t.Run("a period without the refund day shows none; the default 7d (today 11 March) shows them", func(t *testing.T) {
		m := perf(t, a, owner, "?dateFrom=2026-03-10&dateTo=2026-03-10").body["metrics"].(map[string]any)
		if m["totalRefunds"] != 0.0 || m["totalRefundedAmount"] != 0.0 || m["totalRevenue"] != 72.40 {
			t.Errorf("10 March only: %v", m)
		}
		m = perf(t, a, owner, "?dateFrom=2026-03-12&dateTo=2026-03-18").body["metrics"].(map[string]any)
		if m["totalRefunds"] != 0.0 || m["totalRefundedAmount"] != 0.0 {
			t.Errorf("the next week: %v", m)
		}
		m = perf(t, a, owner, "").body["metrics"].(map[string]any)
		if m["totalRefunds"] != 2.0 || m["totalRefundedAmount"] != 33.40 {
			t.Errorf("7d: %v", m)
		}
	})

	t.Run("another time zone's days (the buckets) agree", func(t *testing.T) {
		// 12:00 UTC on 11 March is 11 March in Tokyo too.
		m := perf(t, a, owner, "?dateFrom=2026-03-11&dateTo=2026-03-11&timezone=Asia/Tokyo").body["metrics"].(map[string]any)
		if m["totalRefunds"] != 2.0 || m["totalRefundedAmount"] != 33.40 || m["totalRevenue"] != 0.0 {
			t.Errorf("Tokyo 11 March: %v", m)
		}
		m = perf(t, a, owner, "?dateFrom=2026-03-10&dateTo=2026-03-10&timezone=Asia/Tokyo").body["metrics"].(map[string]any)
		if m["totalRefunds"] != 0.0 || m["totalRefundedAmount"] != 0.0 {
			t.Errorf("Tokyo 10 March: %v", m)
		}
	})
}
