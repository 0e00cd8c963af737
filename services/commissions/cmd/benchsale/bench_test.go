package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/pg/pgtest"
)

func TestPercentile(t *testing.T) {
	s := make([]time.Duration, 100)
	for i := range s {
		s[i] = time.Duration(100-i) * time.Millisecond
	}
	l := summarize(s)
	if l.P50 != 50*time.Millisecond || l.P90 != 90*time.Millisecond || l.P99 != 99*time.Millisecond || l.Max != 100*time.Millisecond {
		t.Fatalf("summary %+v", l)
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Fatalf("one sample: %v", got)
	}
}

func TestClientIPsDistinct(t *testing.T) {
	seen := map[string]bool{}
	for i := range 200000 {
		ip := clientIP(i)
		if seen[ip] || strings.HasSuffix(ip, ".0") || strings.HasSuffix(ip, ".255") {
			t.Fatalf("address %d: %s repeated or not a host address", i, ip)
		}
		seen[ip] = true
	}
}

func TestBodiesDecode(t *testing.T) {
	var s saleRequest
	if err := json.Unmarshal(saleBody(7, `cust_1_"x`), &s); err != nil || s.TransactionID != "bench_7" || s.AmountCents != 2500 || s.Currency != "USD" || s.ClickID != `cust_1_"x` {
		t.Fatalf("sale body: %+v %v", s, err)
	}
	var r refundRequest
	if err := json.Unmarshal(refundBody(7), &r); err != nil || r.TransactionID != "bench_7" || r.RefundAmountCents != 1000 || r.RefundID != "r_7" {
		t.Fatalf("refund body: %+v %v", r, err)
	}
}

// TestRunLoad checks outcome counting against a fake route: 200s with
// their status field, other statuses apart with their first body, the
// bearer key sent, and a bounded job list ending the run early.
func TestRunLoad(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		switch {
		case r.Header.Get("Authorization") != "Bearer k":
			w.WriteHeader(http.StatusUnauthorized)
		case bytes.HasSuffix(b, []byte("3")):
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":"nope"}`)
		default:
			_, _ = io.WriteString(w, `{"success":true,"status":"refunded"}`)
		}
	}))
	defer srv.Close()
	res, err := runLoad(context.Background(), newClient(4), LoadConfig{
		Name: "t", URL: srv.URL, APIKey: "k", Connections: 4, Duration: 10 * time.Second, Jobs: 40,
		Body: func(i int) []byte { return []byte(strings.Repeat("x", i%3) + string(rune('0'+i%10))) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Exhausted || res.Requests != 40 || calls.Load() != 40 {
		t.Fatalf("exhausted %v, requests %d, calls %d", res.Exhausted, res.Requests, calls.Load())
	}
	if res.OK != 36 || res.Statuses[404] != 4 || res.Outcomes["refunded"] != 36 || len(res.Done) != 36 {
		t.Fatalf("ok %d statuses %v outcomes %v done %d", res.OK, res.Statuses, res.Outcomes, len(res.Done))
	}
	if res.Failures[404] != `{"error":"nope"}` {
		t.Fatalf("first 404 body %q", res.Failures[404])
	}
}

func TestForEachStopsOnError(t *testing.T) {
	boom := errors.New("boom")
	var n atomic.Int64
	err := forEach(context.Background(), 10000, 4, func(i int) error {
		n.Add(1)
		if i == 10 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || n.Load() >= 10000 {
		t.Fatalf("err %v after %d calls", err, n.Load())
	}
}

// TestReference runs the reference's two handlers against real Postgres
// (TEST_DATABASE_URL) in a throwaway database.
// testReference is a reference on a throwaway database.
func testReference(t *testing.T) *referenceServer {
	t.Helper()
	ctx := context.Background()
	ref, err := openReference(ctx, pgtest.NewDatabase(t), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close(ctx) })
	return ref
}

func TestReference(t *testing.T) {
	ctx := context.Background()
	ref := testReference(t)
	h := ref.handler()
	post := func(path string, body []byte) (int, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	for _, c := range []struct {
		name, path string
		body       []byte
		status     int
		contains   string
	}{
		{"sale recorded", salePath, saleBody(1, "cust_1"), 200, `"success":true`},
		{"repeated transaction_id is 409", salePath, saleBody(1, "cust_2"), 409, "duplicate"},
		{"bad JSON is 400", salePath, []byte("{"), 400, "Invalid JSON"},
		{"partial refund", refundPath, refundBody(1), 200, `"status":"refunded"`},
		{"refund of an unknown sale is 404", refundPath, refundBody(2), 404, "not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := post(c.path, c.body)
			if code != c.status || !strings.Contains(body, c.contains) {
				t.Fatalf("%d %s", code, body)
			}
		})
	}
	var refunded int64
	if err := ref.pool.QueryRow(ctx, `SELECT refunded_cents FROM bench_sale_reference.sales WHERE transaction_id = 'bench_1'`).Scan(&refunded); err != nil || refunded != 1000 {
		t.Fatalf("refunded %d %v", refunded, err)
	}
}

func TestParseFlags(t *testing.T) {
	env := func(string) string { return "" }
	o, err := parseFlags(nil, env, io.Discard)
	if err != nil || o.connections != 32 || o.duration != 20*time.Second {
		t.Fatalf("defaults %+v %v", o, err)
	}
	for _, args := range [][]string{{"-connections=0"}, {"-duration=0s"}, {"-customers=-1"}} {
		if _, err := parseFlags(args, env, io.Discard); err == nil {
			t.Fatalf("%v accepted", args)
		}
	}
}

// The floor does what it claims per sale: tracking's decision recorded
// once, the sale, its commission and its event written together, a
// repeated transaction_id answered 409 with nothing more written.
func TestFloor(t *testing.T) {
	ctx := context.Background()
	ref := testReference(t)
	floor, err := openFloor(ctx, ref.pool, 4)
	if err != nil {
		t.Fatal(err)
	}
	tracking := httptest.NewServer(floor.trackingHandler())
	defer tracking.Close()
	floor.decideAt = tracking.URL + "/decide"
	h := floor.salesHandler()
	post := func(body []byte) (int, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, salePath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	if code, body := post(saleBody(1, "cust_1")); code != 200 || !strings.Contains(body, `"sale_id":1`) {
		t.Fatalf("first sale: %d %s", code, body)
	}
	if code, body := post(saleBody(1, "cust_2")); code != 409 || !strings.Contains(body, "duplicate") {
		t.Fatalf("repeated sale: %d %s", code, body)
	}
	var rows string
	if err := ref.pool.QueryRow(ctx, `SELECT format('%s %s %s %s %s',
			(SELECT string_agg(transaction_id || '/' || click_id, ',') FROM bench_sale_reference.decisions),
			(SELECT count(*) FROM bench_sale_reference.floor_sales),
			(SELECT string_agg(amount::text, ',') FROM bench_sale_reference.floor_commissions),
			(SELECT string_agg(convert_from(payload, 'UTF8'), ',') FROM bench_sale_reference.floor_outbox),
			(SELECT partner_id FROM bench_sale_reference.floor_sales))`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != "bench_1/cust_1 1 250 1:250 1" {
		t.Fatalf("rows written: %s", rows)
	}
}
