package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/svc-dev/svc/bench/load"
	"github.com/svc-dev/svc/libs/kafkakit"
	"github.com/svc-dev/svc/libs/pg/pgtest"
)

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

// The sale and refund runs' request: the body to the URL with the Bearer
// key; only 200 succeeds, labelled with its status field; other statuses
// keep their first body.
func TestPost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	d := &driver{ctx: context.Background(), client: load.NewClient(4), o: options{connections: 4}}
	res, err := d.load("t", srv.URL, "k", 10*time.Second, func(i int) []byte { return []byte(strings.Repeat("x", i%3) + string(rune('0'+i%10))) }, 40)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Exhausted || res.Requests != 40 || res.OK != 36 || res.Statuses[404] != 4 || res.Labels["refunded"] != 36 || len(res.Done) != 36 {
		t.Fatalf("%+v", res)
	}
	if res.Failures[404] != `{"error":"nope"}` {
		t.Fatalf("first 404 body %q", res.Failures[404])
	}
	if res, _ := d.load("no key", srv.URL, "", time.Second, func(int) []byte { return []byte("{}") }, 2); res.Statuses[401] != 2 {
		t.Fatalf("without the key: %v", res.Statuses)
	}
}

// Customers are created one click each from its own address; the first
// click that fails stops them all and is the error.
func TestCreateCustomers(t *testing.T) {
	var n atomic.Int64
	var mu sync.Mutex
	ips := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		mu.Lock()
		ips[r.Header.Get("X-Forwarded-For")] = true
		mu.Unlock()
		if r.URL.Query().Get("fail") != "" && i == 10 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = fmt.Fprintf(w, `{"success":true,"click_id":"cust_%d"}`, i)
	}))
	defer srv.Close()
	logger := slog.New(slog.DiscardHandler)
	ids, _, err := createCustomers(context.Background(), load.NewClient(4), srv.URL, []string{"a", "b"}, 100, 50, 4, logger)
	if err != nil || len(ids) != 50 || len(ips) != 50 || slices.Contains(ids, "") {
		t.Fatalf("%d ids from %d addresses: %v", len(ids), len(ips), err)
	}
	n.Store(0)
	_, _, err = createCustomers(context.Background(), load.NewClient(4), srv.URL+"?fail=1", []string{"a"}, 0, 10000, 4, logger)
	if err == nil || !strings.Contains(err.Error(), "500") || n.Load() >= 10000 {
		t.Fatalf("err %v after %d clicks", err, n.Load())
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
	if o.preload != 0 {
		t.Fatalf("a preload by default: %d", o.preload)
	}
	if o, err := parseFlags([]string{"-preload=1000000"}, env, io.Discard); err != nil || o.preload != 1_000_000 {
		t.Fatalf("-preload: %d %v", o.preload, err)
	}
	for _, args := range [][]string{{"-connections=0"}, {"-duration=0s"}, {"-customers=-1"}, {"-preload=-1"}} {
		if _, err := parseFlags(args, env, io.Discard); err == nil {
			t.Fatalf("%v accepted", args)
		}
	}
}

// The floor does what it claims per sale: tracking's decision recorded
// once, the sale, its commission and its event written together, a
// repeated transaction_id answered 409 with nothing more written; its
// relay publishes the event to the broker and deletes the row.
func TestFloor(t *testing.T) {
	ctx := context.Background()
	ref := testReference(t)
	logger := slog.New(slog.DiscardHandler)
	floor, err := openFloor(ctx, ref.pool, 4, logger)
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
			(SELECT string_agg(topic || '/' || key || '/' || convert_from(payload, 'UTF8'), ',') FROM `+floorOutbox+`.outbox),
			(SELECT partner_id FROM bench_sale_reference.floor_sales))`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if want := "bench_1/cust_1 1 250 " + floorTopic + "/1/1:250 1"; rows != want {
		t.Fatalf("rows written: %s, want %s", rows, want)
	}

	// Refunds: an unknown sale, a partial refund, its repeat, then ten
	// concurrent refunds of 150 that together pass the sale's 2,500.
	refund := func(body string) (int, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, refundPath, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	if code, body := refund(string(refundBody(2))); code != 404 {
		t.Fatalf("refund of an unknown sale: %d %s", code, body)
	}
	for _, want := range []string{`"status":"refunded"`, `"status":"duplicate"`} {
		if code, body := refund(string(refundBody(1))); code != 200 || !strings.Contains(body, want) {
			t.Fatalf("refund r_1: %d %s, want %s", code, body, want)
		}
	}
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			if code, body := refund(fmt.Sprintf(`{"transaction_id":"bench_1","refund_amount_cents":150,"refund_id":"c_%d"}`, i)); code != 200 {
				t.Errorf("concurrent refund %d: %d %s", i, code, body)
			}
		})
	}
	wg.Wait()
	if err := ref.pool.QueryRow(ctx, `SELECT format('%s %s %s %s %s',
			(SELECT refunded_cents FROM bench_sale_reference.floor_sales),
			(SELECT count(*) FROM bench_sale_reference.floor_refunds),
			(SELECT sum(amount) FROM bench_sale_reference.floor_refunds),
			(SELECT refunded || '/' || status FROM bench_sale_reference.floor_commissions),
			(SELECT count(*) FROM `+floorOutbox+`.outbox WHERE event_type = 'floor.sale.refunded'))`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	// 1,000 + 10 x 150 = 2,500: the whole sale; every refund published.
	if want := "2500 11 2500 250/reversed 11"; rows != want {
		t.Fatalf("after the refunds: %s, want %s", rows, want)
	}

	broker, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()
	stop, err := floor.startRelay(ctx, broker.ListenAddrs(), logger)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	r := kafkakit.NewReader(broker.ListenAddrs(), "benchsale-floor-test", floorTopic)
	defer r.Close()
	readCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	m, err := r.FetchMessage(readCtx)
	if err != nil || string(m.Key) != "1" || string(m.Value) != "1:250" {
		t.Fatalf("first published: key %q value %q, %v", m.Key, m.Value, err)
	}
	for range 11 {
		if m, err = r.FetchMessage(readCtx); err != nil {
			t.Fatalf("a refund's event: %v", err)
		}
	}
	if string(m.Value) != "1:250" {
		t.Fatalf("last refund's event %q: want the whole commission refunded", m.Value)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		var left int
		if err := ref.pool.QueryRow(ctx, `SELECT count(*) FROM `+floorOutbox+`.outbox`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d outbox rows left after the relay published", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	stop()
}
