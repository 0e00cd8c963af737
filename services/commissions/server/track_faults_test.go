package server_test

// Fault drills of the sale route (issue 11, "Proven by tests" → Faults):
// the real services on one database and broker, every client call through
// the real gateway, the fault made by a proxy in front of tracking's real
// address or by stopping and starting commissions' process. Each drill
// waits on conditions, never on fixed sleeps.
//
// The stack gives commissions tracking's own address in TRACKING_URL and a
// test cannot override it (deploy/devstack/stack/stack.go: the URLs of the
// started services are "decided" and win over Options.Env). So a drill
// that needs a proxy stops the stack's commissions and starts a fresh one
// (platform.Start with commissions' Spec, the same environment, schema and
// clock) whose TRACKING_URL is the proxy: the same process a deployment
// would run, pointed at a different tracking address. The gateway hands
// commissions' paths to whichever instance is current.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/obs/obstest"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	"github.com/svc-dev/svc/services/commissions/server"
)

// drillGrace is BACKSTOP_GRACE in the drills: the backstop runs every
// 20 ms but leaves a sale alone until the injected clock is moved past it.
const drillGrace = time.Minute

// drillStack is the whole stack on one injected clock, behind the real
// gateway, with commissions replaceable (a fresh process on the same
// database) and optionally behind a proxy to tracking.
type drillStack struct {
	clock *platformtest.Clock
	env   map[string]string
	st    *stack.Stack
	gw    string
	http  *http.Client
	// commissions is the instance the gateway hands commissions' paths to.
	commissions atomic.Pointer[platform.Instance]

	seq atomic.Int64 // highest X-Catalog-Seq seen
	n   atomic.Int64 // unique names and ids
}

// drillStart starts the stack with high limits, a fast backstop with
// drillGrace, and the gateway in front.
func drillStart(t *testing.T) *drillStack {
	t.Helper()
	d := &drillStack{clock: platformtest.NewClock(time.Now().UTC().Truncate(time.Second))}
	d.env = platformtest.With(platformtest.With(platformtest.Env(t), stacktest.Defaults()), map[string]string{
		"TRACK_CLICK_RATE_LIMIT": "1000000",
		"TRACK_LEAD_RATE_LIMIT":  "1000000",
		"FAILED_AUTH_RATE_LIMIT": "1000000",
		"ADMIN_RATE_LIMIT":       "1000000",
		"TRACK_SALE_RATE_LIMIT":  "1000000",
		"BACKSTOP_INTERVAL":      "20ms",
		"BACKSTOP_GRACE":         drillGrace.String(),
		"SHUTDOWN_GRACE":         "2s",
	})
	st, err := stack.Start(context.Background(), stack.Options{
		Env:      func(k string) string { return d.env[k] },
		Platform: []platform.Option{platform.WithClock(d.clock.Now)},
	})
	if err != nil {
		t.Fatalf("start the stack: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	d.st = st
	d.commissions.Store(st.Instance(server.Name))
	handlers := st.Handlers()
	handlers[server.Name] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.commissions.Load().Handler().ServeHTTP(w, r)
	})
	gw := httptest.NewServer(gateway.New(handlers))
	t.Cleanup(gw.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	d.gw, d.http = gw.URL, &http.Client{Timeout: 30 * time.Second, Transport: tr}
	return d
}

// restartCommissions stops the current commissions instance (if running)
// and starts a fresh one on the same database, schema, broker and clock,
// calling tracking at trackingURL; the gateway switches to it.
func (d *drillStack) restartCommissions(t *testing.T, trackingURL string) *platform.Instance {
	t.Helper()
	old := d.commissions.Load()
	_ = old.Stop() // a second Stop answers the same
	env := platformtest.With(d.env, old.Platform().Env.Values())
	env = platformtest.With(env, map[string]string{"HTTP_ADDR": "127.0.0.1:0", "TRACKING_URL": trackingURL})
	inst, err := platform.Start(context.Background(), server.Spec(), func(k string) string { return env[k] }, io.Discard,
		platform.WithClock(d.clock.Now))
	if err != nil {
		t.Fatalf("start commissions again: %v", err)
	}
	t.Cleanup(func() { _ = inst.Stop() })
	d.commissions.Store(inst)
	return inst
}

// drillReply is an answer of the gateway.
type drillReply struct {
	status int
	body   map[string]any
	raw    string
}

func (d *drillStack) do(t *testing.T, method, path string, body any, headers ...string) drillReply {
	t.Helper()
	resp, raw := send(t, d.http, method, d.gw+path, body, headers...)
	if n, err := strconv.ParseInt(resp.Header.Get("X-Catalog-Seq"), 10, 64); err == nil {
		for cur := d.seq.Load(); n > cur && !d.seq.CompareAndSwap(cur, n); cur = d.seq.Load() {
		}
	}
	r := drillReply{status: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// admin sends an admin request that must answer 2xx and decodes data into
// out (when not nil).
func (d *drillStack) admin(t *testing.T, method, path string, body, out any) {
	t.Helper()
	r := d.do(t, method, path, body, "Authorization", "Bearer "+stacktest.AdminToken)
	if r.status < 200 || r.status > 299 {
		t.Fatalf("%s %s: %d %s", method, path, r.status, r.raw)
	}
	if out == nil {
		return
	}
	var env struct{ Data json.RawMessage }
	if err := json.Unmarshal([]byte(r.raw), &env); err != nil || json.Unmarshal(env.Data, out) != nil {
		t.Fatalf("%s %s: %s", method, path, r.raw)
	}
}

// drillProg is a program with one approved partner, a link and a live key:
// percent 10 %, hold 0, USD.
type drillProg struct {
	id, partner int64
	code, key   string
}

// program creates a program through accounts' admin API and waits on the
// catalog barrier until tracking and commissions have it.
func (d *drillStack) program(t *testing.T) drillProg {
	t.Helper()
	u := strconv.FormatInt(d.n.Add(1), 10)
	var id struct{ ID int64 }
	var p drillProg
	d.admin(t, "POST", "/admin/v1/advertisers", map[string]any{"name": "Drill brand " + u, "email": "drill" + u + "@brand.example"}, &id)
	d.admin(t, "POST", "/admin/v1/programs", map[string]any{"advertiser_id": id.ID, "name": "Drill " + u, "domain": "brand.example",
		"commission_type": "percent", "commission_rate": 10, "hold_days": 0, "currency": "USD"}, &id)
	p.id = id.ID
	d.admin(t, "POST", "/admin/v1/partners", map[string]any{"name": "Drill partner " + u, "email": "drillp" + u + "@partners.example"}, &id)
	p.partner = id.ID
	d.admin(t, "POST", fmt.Sprintf("/admin/v1/programs/%d/partners", p.id), map[string]any{"partner_id": p.partner, "approved": true}, nil)
	p.code = "D" + u
	d.admin(t, "POST", fmt.Sprintf("/admin/v1/programs/%d/links", p.id), map[string]any{"partner_id": p.partner, "code": p.code, "active": true}, nil)
	var k struct{ Key string }
	d.admin(t, "POST", fmt.Sprintf("/admin/v1/programs/%d/keys", p.id), map[string]any{"test": false}, &k)
	p.key = k.Key
	d.admin(t, "GET", syncPath(d.seq.Load()), nil, nil)
	return p
}

// click records a click on the link: a fresh customer; its click id.
func (d *drillStack) click(t *testing.T, p drillProg) string {
	t.Helper()
	r := d.do(t, "POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://brand.example/?via=" + p.code})
	cid, _ := r.body["click_id"].(string)
	if r.status != 200 || cid == "" {
		t.Fatalf("click: %d %s", r.status, r.raw)
	}
	return cid
}

// sale posts a live sale of 100.00 USD for clickID.
func (d *drillStack) sale(t *testing.T, p drillProg, txn, clickID string) drillReply {
	t.Helper()
	return d.do(t, "POST", "/api/v1/track/sale", map[string]any{"transaction_id": txn, "amount_cents": 10000, "currency": "USD", "click_id": clickID},
		"Authorization", "Bearer "+p.key)
}

// wantSaleOK checks a 200 answer with a commission of 10.00 USD and
// returns the sale and commission ids.
func wantSaleOK(t *testing.T, r drillReply, txn string) (saleID, commissionID int64) {
	t.Helper()
	var out struct {
		Success       bool   `json:"success"`
		SaleID        int64  `json:"sale_id"`
		TransactionID string `json:"transaction_id"`
		Commission    *struct {
			ID       int64   `json:"id"`
			Amount   float64 `json:"amount"`
			Currency string  `json:"currency"`
		} `json:"commission"`
	}
	if r.status != 200 || json.Unmarshal([]byte(r.raw), &out) != nil || !out.Success || out.SaleID <= 0 || out.TransactionID != txn ||
		out.Commission == nil || out.Commission.ID <= 0 || out.Commission.Amount != 10 || out.Commission.Currency != "USD" {
		t.Fatalf("sale %s: %d %s, want 200 with a commission of 10 USD", txn, r.status, r.raw)
	}
	return out.SaleID, out.Commission.ID
}

// wantDrillError checks the platform envelope of an error and returns its
// details.
func wantDrillError(t *testing.T, r drillReply, status int, code, message string) map[string]any {
	t.Helper()
	name := map[int]string{409: "ConflictError", 500: "InternalServerError"}[status]
	e, _ := r.body["error"].(map[string]any)
	data, hasData := r.body["data"]
	details, ok := e["details"].(map[string]any)
	if r.status != status || !hasData || data != nil || e == nil || e["status"] != float64(status) || e["name"] != name ||
		e["code"] != code || e["message"] != message || !ok {
		t.Fatalf("answer %d %s, want %d %s %s %q in the platform envelope", r.status, r.raw, status, name, code, message)
	}
	return details
}

// drillSale is GET /admin/v1/sales/{txn}; ok false on 404.
type drillSale struct {
	ID            int64   `json:"id"`
	CommissionIDs []int64 `json:"commission_ids"`
}

func (d *drillStack) saleRecord(t *testing.T, txn string) (drillSale, bool) {
	t.Helper()
	r := d.do(t, "GET", "/admin/v1/sales/"+url.PathEscape(txn), nil, "Authorization", "Bearer "+stacktest.AdminToken)
	if r.status == 404 {
		return drillSale{}, false
	}
	var v struct{ Data drillSale }
	if r.status != 200 || json.Unmarshal([]byte(r.raw), &v) != nil {
		t.Fatalf("GET sale %s: %d %s", txn, r.status, r.raw)
	}
	return v.Data, true
}

// count runs a count query on the current commissions' database schema.
func (d *drillStack) count(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	return drillCount(t, d.commissions.Load(), query, args...)
}

func drillCount(t *testing.T, inst *platform.Instance, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := inst.Platform().Pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// metric reads a metric of the current commissions instance.
func (d *drillStack) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	return obstest.Metric(t, d.commissions.Load().Platform().Registry, name, labels...)
}

// drillWait polls cond until it holds or 15 s pass.
func drillWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitBackstopRuns waits until the current commissions' backstop has
// finished n more runs than when called.
func (d *drillStack) waitBackstopRuns(t *testing.T, n float64) {
	t.Helper()
	from := d.metric(t, "commissions_backstop_runs_total", "outcome", "ok")
	drillWait(t, fmt.Sprintf("%v more backstop runs", n), func() bool {
		return d.metric(t, "commissions_backstop_runs_total", "outcome", "ok") >= from+n
	})
}

// Proxy modes.
const (
	drillPass        int32 = iota // forward to tracking
	drillUnavailable              // answer 503 without asking tracking
	drillHangUp                   // close the connection without an answer
	drillAnswerLost               // forward (tracking decides), then answer 503
	drillConflict                 // answer a 409 tracking never gives, with internal text
	drillRefused                  // answer a 400 (a replica behind ours), with internal text
)

// drillProxy stands in front of tracking's real address; the test switches
// what it does. It buffers tracking's answer, so a hook can run between
// tracking's commit and the caller hearing of it.
type drillProxy struct {
	url  string
	mode atomic.Int32
	// decided runs once, after tracking answered an attribution 200 and
	// before the answer is passed on.
	decided atomic.Pointer[func()]

	mu      sync.Mutex
	answers []string // tracking's attribution answers, in order
}

func newDrillProxy(t *testing.T, target string) *drillProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &drillProxy{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mode := p.mode.Load()
		switch mode {
		case drillUnavailable:
			http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
			return
		case drillHangUp:
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		case drillConflict, drillRefused:
			status, code := http.StatusConflict, "duplicate_transaction"
			if mode == drillRefused {
				status, code = http.StatusBadRequest, "invalid_request"
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = fmt.Fprintf(w, `{"data":null,"error":{"status":%d,"name":"x","message":"internal detail: sale 42 of tracking","details":{},"code":%q}}`, status, code)
			return
		}
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		if strings.HasSuffix(r.URL.Path, "/internal/v1/attributions") {
			p.mu.Lock()
			p.answers = append(p.answers, fmt.Sprintf("%d %s", rec.Code, bytes.TrimSpace(rec.Body.Bytes())))
			p.mu.Unlock()
			if hook := p.decided.Swap(nil); hook != nil && rec.Code == http.StatusOK {
				(*hook)()
			}
		}
		if mode == drillAnswerLost {
			http.Error(w, "upstream answer lost", http.StatusServiceUnavailable)
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

func (p *drillProxy) attributions() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.answers...)
}

// trackingDecisions counts tracking's stored attribution decisions of txn.
func (d *drillStack) trackingDecisions(t *testing.T, txn string) int64 {
	t.Helper()
	return drillCount(t, d.st.Instance("tracking"), `SELECT count(*) FROM attributions WHERE transaction_id = $1`, txn)
}

// Tracking down: the sale answers 500 `Sale tracking failed` and records
// nothing; the retry with the same transaction id, once tracking answers
// again, records the sale with one commission. Three ways of being down:
// a 503 from in front of tracking, a connection closed without an answer,
// and tracking's answer lost after it decided (the retry is then answered
// from tracking's stored decision).
func TestDrillTrackingDown(t *testing.T) {
	t.Parallel()
	d := drillStart(t)
	proxy := newDrillProxy(t, d.st.URL("tracking"))
	d.restartCommissions(t, proxy.url)
	p := d.program(t)
	for _, tc := range []struct {
		name      string
		mode      int32
		decisions int64 // tracking's stored decisions after the failed call
	}{
		{"tracking answers 503", drillUnavailable, 0},
		{"connection closed without an answer", drillHangUp, 0},
		{"tracking decided but its answer was lost", drillAnswerLost, 1},
		// Never the other status nor its text: the route's 500 row.
		{"tracking answers a 409 it never gives", drillConflict, 0},
		{"tracking refuses the request", drillRefused, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			txn := "drill_down_" + strconv.FormatInt(d.n.Add(1), 10)
			cid := d.click(t, p)
			commissionsBefore := d.count(t, `SELECT count(*) FROM commissions WHERE program_id = $1`, p.id)

			proxy.mode.Store(tc.mode)
			r := d.sale(t, p, txn, cid)
			proxy.mode.Store(drillPass)
			wantDrillError(t, r, 500, "internal_error", "Sale tracking failed")
			if n := d.count(t, `SELECT count(*) FROM sales WHERE transaction_id = $1`, txn); n != 0 {
				t.Fatalf("%d sales rows for %s after the failed call, want 0 (the reservation is released)", n, txn)
			}
			if s, ok := d.saleRecord(t, txn); ok {
				t.Fatalf("GET /admin/v1/sales/%s answers %+v after the failed call, want 404", txn, s)
			}
			if n := d.count(t, `SELECT count(*) FROM commissions WHERE program_id = $1`, p.id); n != commissionsBefore {
				t.Fatalf("commissions of the program: %d, want %d (none created)", n, commissionsBefore)
			}
			if n := d.trackingDecisions(t, txn); n != tc.decisions {
				t.Fatalf("tracking stored %d decisions for %s, want %d", n, txn, tc.decisions)
			}

			saleID, commissionID := wantSaleOK(t, d.sale(t, p, txn, cid), txn)
			s, ok := d.saleRecord(t, txn)
			if !ok || s.ID != saleID || len(s.CommissionIDs) != 1 || s.CommissionIDs[0] != commissionID {
				t.Fatalf("after the retry: sale %+v (found %v), want sale %d with commission [%d]", s, ok, saleID, commissionID)
			}
			if n := d.count(t, `SELECT count(*) FROM commissions WHERE sale_id = $1`, saleID); n != 1 {
				t.Fatalf("%d commissions of sale %d, want 1", n, saleID)
			}
			if n := d.trackingDecisions(t, txn); n != 1 {
				t.Fatalf("tracking stored %d decisions for %s, want 1", n, txn)
			}
		})
	}
}

// Commissions killed between tracking's attribution and its own write:
// the proxy stops the commissions process once tracking has committed its
// decision, before the answer reaches it, so the reserved sale is never
// completed. A fresh commissions process on the same database answers the
// retry 409 naming the sale; the backstop, once the grace has passed,
// asks tracking again (the stored decision, replayed) and records the sale
// with exactly one commission; the customer transitioned once.
func TestDrillCommissionsKilledBetweenAttributionAndWrite(t *testing.T) {
	t.Parallel()
	d := drillStart(t)
	proxy := newDrillProxy(t, d.st.URL("tracking"))
	first := d.restartCommissions(t, proxy.url)
	p := d.program(t)
	cid := d.click(t, p)
	txn := "drill_killed_" + strconv.FormatInt(d.n.Add(1), 10)
	decidedAt := d.clock.Now()

	kill := func() {
		if err := first.Stop(); err != nil {
			t.Logf("the killed commissions stopped with: %v", err)
		}
	}
	proxy.decided.Store(&kill)
	r := d.sale(t, p, txn, cid)
	if r.status == 200 {
		t.Fatalf("the killed process answered the sale 200: %s", r.raw)
	}
	// A real client would see its connection drop; through the in-process
	// gateway it sees what the dead process's handler wrote on a closed
	// pool.
	t.Logf("the killed process's answer: %d %s", r.status, r.raw)
	select {
	case <-first.Platform().Stopping():
	default:
		t.Fatalf("commissions was not stopped by the proxy (answer %d %s)", r.status, r.raw)
	}
	if n := d.trackingDecisions(t, txn); n != 1 {
		t.Fatalf("tracking stored %d decisions for %s, want 1", n, txn)
	}

	second := d.restartCommissions(t, proxy.url)
	var reservedID int64
	if err := second.Platform().Pool.QueryRow(context.Background(),
		`SELECT id FROM sales WHERE transaction_id = $1 AND reserved`, txn).Scan(&reservedID); err != nil {
		t.Fatalf("the killed process left no reserved sale for %s: %v", txn, err)
	}
	if s, ok := d.saleRecord(t, txn); ok {
		t.Fatalf("a reserved sale is readable before it is decided: %+v", s)
	}

	// The retry, through the fresh process: the id is consumed.
	details := wantDrillError(t, d.sale(t, p, txn, cid), 409, "duplicate_transaction",
		"Duplicate transaction_id. This sale has already been recorded.")
	if details["sale_id"] != float64(reservedID) {
		t.Fatalf("409 details %v, want sale_id %d", details, reservedID)
	}

	// The backstop decides the reservation once the grace has passed.
	completed := d.metric(t, "commissions_backstop_reserved_total", "outcome", "completed")
	d.clock.Advance(drillGrace + time.Second)
	drillWait(t, "the backstop completes the reserved sale", func() bool {
		return d.metric(t, "commissions_backstop_reserved_total", "outcome", "completed") >= completed+1
	})
	s, ok := d.saleRecord(t, txn)
	if !ok || s.ID != reservedID || len(s.CommissionIDs) != 1 {
		t.Fatalf("after the backstop: sale %+v (found %v), want sale %d with one commission", s, ok, reservedID)
	}
	d.waitBackstopRuns(t, 3)
	if n := d.count(t, `SELECT count(*) FROM commissions WHERE sale_id = $1`, reservedID); n != 1 {
		t.Fatalf("%d commissions of sale %d, want 1", n, reservedID)
	}
	if n := d.count(t, `SELECT count(*) FROM sales WHERE transaction_id = $1`, txn); n != 1 {
		t.Fatalf("%d sales rows for %s, want 1", n, txn)
	}
	var c struct {
		SaleID    int64  `json:"sale_id"`
		PartnerID int64  `json:"partner_id"`
		Amount    int64  `json:"amount"`
		Status    string `json:"status"`
	}
	d.admin(t, "GET", fmt.Sprintf("/admin/v1/commissions/%d", s.CommissionIDs[0]), nil, &c)
	if c.SaleID != reservedID || c.PartnerID != p.partner || c.Amount != 1000 || c.Status != "approved" {
		t.Fatalf("commission %+v, want 1000 approved for partner %d on sale %d", c, p.partner, reservedID)
	}

	// Tracking: one decision, the backstop's call answered from it, the
	// customer moved once (at the first call's time, not the backstop's).
	answers := proxy.attributions()
	if len(answers) != 2 || !strings.Contains(answers[0], `"replayed":false`) || !strings.Contains(answers[1], `"replayed":true`) {
		t.Fatalf("tracking's attribution answers %q, want the decision then its replay", answers)
	}
	if n := d.trackingDecisions(t, txn); n != 1 {
		t.Fatalf("tracking stored %d decisions for %s, want 1", n, txn)
	}
	var status string
	var updated, firstPurchase time.Time
	var decisions int64
	if err := d.st.Instance("tracking").Platform().Pool.QueryRow(context.Background(), `SELECT c.status, c.updated_at, c.first_purchase_date,
			(SELECT count(*) FROM attributions a WHERE a.customer_id = c.id)
		FROM customers c WHERE c.click_id = $1`, cid).Scan(&status, &updated, &firstPurchase, &decisions); err != nil {
		t.Fatal(err)
	}
	if status != "conversion" || !updated.Equal(decidedAt) || !firstPurchase.Equal(decidedAt) || decisions != 1 {
		t.Fatalf("customer %s: status %s, updated %s, first purchase %s, %d decisions; want conversion at %s once",
			cid, status, updated, firstPurchase, decisions, decidedAt)
	}
}

// The commission write failing after the sale: commissions' replica loses
// the program (tracking still has it), so the sale is recorded without its
// commission: 500 `Failed to create commission`, the sale readable without
// commission, the retry 409 naming it. The backstop cannot decide it while
// the program is missing; once the replica has it again the backstop
// creates exactly one commission, and later runs create none.
func TestDrillCommissionWriteFailsAfterSale(t *testing.T) {
	t.Parallel()
	d := drillStart(t)
	p := d.program(t)
	cid := d.click(t, p)
	txn := "drill_nocommission_" + strconv.FormatInt(d.n.Add(1), 10)
	pool := d.commissions.Load().Platform().Pool
	ctx := context.Background()

	var row []byte
	if err := pool.QueryRow(ctx, `SELECT row_to_json(p) FROM programs p WHERE id = $1`, p.id).Scan(&row); err != nil {
		t.Fatalf("the program is not in commissions' replica: %v", err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM programs WHERE id = $1`, p.id); err != nil {
		t.Fatal(err)
	}

	wantDrillError(t, d.sale(t, p, txn, cid), 500, "internal_error", "Failed to create commission")
	s, ok := d.saleRecord(t, txn)
	if !ok || s.ID <= 0 || len(s.CommissionIDs) != 0 {
		t.Fatalf("after 500 Failed to create commission: sale %+v (found %v), want the sale without commission", s, ok)
	}
	details := wantDrillError(t, d.sale(t, p, txn, cid), 409, "duplicate_transaction",
		"Duplicate transaction_id. This sale has already been recorded.")
	if details["sale_id"] != float64(s.ID) {
		t.Fatalf("409 details %v, want sale_id %d", details, s.ID)
	}

	// Past the grace, the backstop tries and cannot: the program's terms
	// are still unreadable.
	d.clock.Advance(drillGrace + time.Second)
	d.waitBackstopRuns(t, 3)
	if s, _ := d.saleRecord(t, txn); len(s.CommissionIDs) != 0 {
		t.Fatalf("a commission without the program's terms: %+v", s)
	}
	if n := d.metric(t, "commissions_backstop_backlog"); n != 1 {
		t.Fatalf("commissions_backstop_backlog %v, want 1", n)
	}

	// The replica has the program again: exactly one commission.
	created := d.metric(t, "commissions_backstop_created_total")
	if _, err := pool.Exec(ctx, `INSERT INTO programs SELECT * FROM json_populate_record(NULL::programs, $1)`, row); err != nil {
		t.Fatal(err)
	}
	drillWait(t, "the backstop creates the commission", func() bool {
		s, _ = d.saleRecord(t, txn)
		return len(s.CommissionIDs) > 0
	})
	d.waitBackstopRuns(t, 3)
	s, _ = d.saleRecord(t, txn)
	if len(s.CommissionIDs) != 1 {
		t.Fatalf("sale %+v, want one commission", s)
	}
	if n := d.metric(t, "commissions_backstop_created_total"); n != created+1 {
		t.Fatalf("commissions_backstop_created_total %v, want %v (one, then none)", n, created+1)
	}
	if n := d.count(t, `SELECT count(*) FROM commissions WHERE sale_id = $1`, s.ID); n != 1 {
		t.Fatalf("%d commissions of sale %d, want 1", n, s.ID)
	}
	if n := d.metric(t, "commissions_backstop_backlog"); n != 0 {
		t.Fatalf("commissions_backstop_backlog %v, want 0", n)
	}
	var c struct {
		PartnerID int64 `json:"partner_id"`
		Amount    int64 `json:"amount"`
	}
	d.admin(t, "GET", fmt.Sprintf("/admin/v1/commissions/%d", s.CommissionIDs[0]), nil, &c)
	if c.PartnerID != p.partner || c.Amount != 1000 {
		t.Fatalf("commission %+v, want 1000 for partner %d", c, p.partner)
	}
}
