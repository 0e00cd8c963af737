package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// trackStack is the whole stack (accounts, tracking, commissions, …)
// in-process on a fresh database and an embedded broker, behind the real
// gateway: every call of these tests (click, lead, sale, refund and the
// admin API) goes through the gateway's URL, as a client's would.
type trackStack struct {
	st    *stack.Stack // for fault injection only; calls go through gw
	gw    string
	clock *platformtest.Clock
	http  *http.Client

	mu  sync.Mutex
	seq int64 // highest X-Catalog-Seq seen

	n atomic.Int64 // unique names and transaction ids
}

// trackEnv lifts the per-IP and per-token limits (click, lead, failed
// authentications, admin, sale) out of the way: the stack's clock may stand
// still, so a window never rolls over on its own. A test of a limit sets
// its own value on top. Each service's pool is kept small: several stacks
// (and other packages' tests) share one Postgres server and its 100
// connections.
func trackEnv(extra map[string]string) map[string]string {
	return platformtest.With(map[string]string{
		"DB_MAX_CONNS":           "6",
		"TRACK_CLICK_RATE_LIMIT": "1000000",
		"TRACK_LEAD_RATE_LIMIT":  "1000000",
		"FAILED_AUTH_RATE_LIMIT": "1000000",
		"ADMIN_RATE_LIMIT":       "1000000",
		"TRACK_SALE_RATE_LIMIT":  "1000000",
	}, extra)
}

// startTrack starts the stack on clock (a platformtest clock: time moves
// only when the test moves it) with trackEnv(env), and the gateway in
// front of it.
//
// A test whose subtests run in parallel on its stack must not itself be
// parallel. go test releases a parallel parent's slot while its subtests
// wait for theirs, so every such parent's stack stayed up at once: seven
// stacks in this package beside tracking's suite passed Postgres's 100
// connections, refused connections stalled the services, and catalog
// barriers and event waits timed out across make test. Run one at a time,
// they keep this package to two stacks at a time.
func startTrack(t *testing.T, clock *platformtest.Clock, env map[string]string) *trackStack {
	t.Helper()
	return startTrackOnly(t, clock, env)
}

// startTrackOnly is startTrack with only the services named (all when
// none): a test starts what it uses.
func startTrackOnly(t *testing.T, clock *platformtest.Clock, env map[string]string, only ...string) *trackStack {
	t.Helper()
	st := stacktest.StartOn(t, clock, trackEnv(env), only...)
	gw := httptest.NewServer(gateway.New(st.Handlers()))
	t.Cleanup(gw.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: 128}
	t.Cleanup(tr.CloseIdleConnections)
	return &trackStack{st: st, gw: gw.URL, clock: clock, http: &http.Client{Timeout: 30 * time.Second, Transport: tr}}
}

// uniq is a fresh suffix for names, codes and transaction ids.
func (s *trackStack) uniq() string {
	return strconv.FormatInt(s.n.Add(1), 10)
}

// reply is an answer of the gateway.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// do sends body (a string sent as is, anything else as JSON; nil: no body)
// to path through the gateway; headers are name/value pairs.
func (s *trackStack) do(t *testing.T, method, path string, body any, headers ...string) reply {
	t.Helper()
	resp, raw := send(t, s.http, method, s.gw+path, body, headers...)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// send is one HTTP request of the package's harnesses: body a string sent
// as is, anything else as JSON (nil: none); headers name/value pairs. It
// answers the response (body closed) and the body read.
func send(t *testing.T, hc *http.Client, method, url string, body any, headers ...string) (*http.Response, []byte) {
	t.Helper()
	var in io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		in = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		in = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, in)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, raw
}

// admin sends an admin request (Bearer stacktest.AdminToken) and returns
// the answer, remembering the catalog sequence it reports.
func (s *trackStack) admin(t *testing.T, method, path string, body any) reply {
	t.Helper()
	r := s.do(t, method, path, body, "Authorization", "Bearer "+stacktest.AdminToken)
	if n, err := strconv.ParseInt(r.header.Get("X-Catalog-Seq"), 10, 64); err == nil {
		s.mu.Lock()
		s.seq = max(s.seq, n)
		s.mu.Unlock()
	}
	return r
}

// adminData sends an admin request that must answer 2xx and decodes its
// data into out (when not nil).
func (s *trackStack) adminData(t *testing.T, method, path string, body, out any) {
	t.Helper()
	r := s.admin(t, method, path, body)
	if r.status < 200 || r.status > 299 {
		t.Fatalf("%s %s: %d %s", method, path, r.status, r.raw)
	}
	if out == nil {
		return
	}
	var env struct{ Data json.RawMessage }
	if err := json.Unmarshal([]byte(r.raw), &env); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, r.raw)
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, r.raw)
	}
}

// syncPath is the catalog barrier's request for everything up to seq. It
// waits 25 s, under the harness client's 30 s timeout (at 30 s the client
// gave up before the barrier could answer).
func syncPath(seq int64) string {
	return fmt.Sprintf("/admin/v1/catalog/sync?seq=%d&timeout=25s", seq)
}

// sync waits on the catalog barrier for everything written so far.
func (s *trackStack) sync(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	seq := s.seq
	s.mu.Unlock()
	s.adminData(t, "GET", syncPath(seq), nil, nil)
}

// prog is a program made for one test: its own advertiser, one approved
// partner with a link, and a live key; so balances and notifications of
// one test are not another's.
type prog struct {
	id, advertiser, partner int64
	code, key               string
	keyID                   int64
}

// program makes a program with the given admin fields on top of percent
// 10%, hold 0, USD, and waits for the catalog to reach the services.
func (s *trackStack) program(t *testing.T, fields map[string]any) prog {
	t.Helper()
	p := s.programNoSync(t, fields)
	s.sync(t)
	return p
}

func (s *trackStack) programNoSync(t *testing.T, fields map[string]any) prog {
	t.Helper()
	u := s.uniq()
	var id struct{ ID int64 }
	var p prog
	s.adminData(t, "POST", "/admin/v1/advertisers", map[string]any{"name": "Brand " + u, "email": "brand" + u + "@brand.example"}, &id)
	p.advertiser = id.ID
	body := map[string]any{"advertiser_id": p.advertiser, "name": "Program " + u, "domain": "brand.example",
		"commission_type": "percent", "commission_rate": 10, "hold_days": 0, "currency": "USD"}
	for k, v := range fields {
		body[k] = v
	}
	s.adminData(t, "POST", "/admin/v1/programs", body, &id)
	p.id = id.ID
	s.adminData(t, "POST", "/admin/v1/partners", map[string]any{"name": "Partner " + u, "email": "partner" + u + "@partners.example"}, &id)
	p.partner = id.ID
	s.adminData(t, "POST", fmt.Sprintf("/admin/v1/programs/%d/partners", p.id), map[string]any{"partner_id": p.partner, "approved": true}, nil)
	p.code = "C" + u
	s.adminData(t, "POST", fmt.Sprintf("/admin/v1/programs/%d/links", p.id), map[string]any{"partner_id": p.partner, "code": p.code, "active": true}, nil)
	p.key, p.keyID = s.newKey(t, p.id, false)
	return p
}

// newKey issues a key of program (a test key when test), not yet synced.
func (s *trackStack) newKey(t *testing.T, program int64, test bool) (string, int64) {
	t.Helper()
	var k struct {
		ID  int64  `json:"id"`
		Key string `json:"key"`
	}
	s.adminData(t, "POST", fmt.Sprintf("/admin/v1/programs/%d/keys", program), map[string]any{"test": test}, &k)
	if k.Key == "" {
		t.Fatal("no key issued")
	}
	return k.Key, k.ID
}

// markRotation marks a key for rotation with deadline (not yet synced).
func (s *trackStack) markRotation(t *testing.T, keyID int64, deadline time.Time) {
	t.Helper()
	s.adminData(t, "POST", fmt.Sprintf("/admin/v1/keys/%d/rotation", keyID), map[string]any{"deadline": deadline.UTC().Format(time.RFC3339)}, nil)
}

// click records a production click on code and returns its click id: a
// fresh customer of the link's program.
func (s *trackStack) click(t *testing.T, code string) string {
	t.Helper()
	r := s.do(t, "POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://brand.example/landing?via=" + code})
	cid, _ := r.body["click_id"].(string)
	if r.status != 200 || cid == "" {
		t.Fatalf("click %s: %d %s", code, r.status, r.raw)
	}
	return cid
}

// lead settles a lead of clickID with the program key (server mode),
// saving customerKey.
func (s *trackStack) lead(t *testing.T, key, clickID, customerKey string) {
	t.Helper()
	body := map[string]any{"click_id": clickID}
	if customerKey != "" {
		body["customer_key"] = customerKey
	}
	r := s.do(t, "POST", "/api/v1/track/lead", body, bearer(key)...)
	if r.status != 200 || r.body["success"] != true || r.body["provisional"] != nil {
		t.Fatalf("lead %s: %d %s", clickID, r.status, r.raw)
	}
}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

// txn is a fresh transaction id.
func (s *trackStack) txn() string { return "txn_" + s.uniq() }

// sale sends POST /api/v1/track/sale with key (empty: no header).
func (s *trackStack) sale(t *testing.T, key string, body any, headers ...string) reply {
	t.Helper()
	if key != "" {
		headers = append(bearer(key), headers...)
	}
	return s.do(t, "POST", "/api/v1/track/sale", body, headers...)
}

// refund sends POST /api/v1/track/refund with key (empty: no header).
func (s *trackStack) refund(t *testing.T, key string, body any, headers ...string) reply {
	t.Helper()
	if key != "" {
		headers = append(bearer(key), headers...)
	}
	return s.do(t, "POST", "/api/v1/track/refund", body, headers...)
}

// saleOf is a valid live sale body for clickID, with extra fields on top
// (a nil value deletes the field).
func saleOf(txn, clickID string, cents int64, currency string, extra map[string]any) map[string]any {
	b := map[string]any{"transaction_id": txn, "amount_cents": cents, "currency": currency}
	if clickID != "" {
		b["click_id"] = clickID
	}
	for k, v := range extra {
		if v == nil {
			delete(b, k)
			continue
		}
		b[k] = v
	}
	return b
}

// commissionOut is the commission object of a sale's answer.
type commissionOut struct {
	ID       int64   `json:"id"`
	Status   string  `json:"status"`
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// saleOut is a live sale's 200 answer.
type saleOut struct {
	Success        bool           `json:"success"`
	Message        string         `json:"message"`
	SaleID         int64          `json:"sale_id"`
	TransactionID  string         `json:"transaction_id"`
	ClickID        string         `json:"click_id"`
	CustomerStatus string         `json:"customer_status"`
	Commission     *commissionOut `json:"commission"`
}

// wantSale checks a live sale's 200 answer (shape, ids, headers) and
// returns it.
func wantSale(t *testing.T, r reply, txn, clickID string) saleOut {
	t.Helper()
	return wantSaleAs(t, r, txn, clickID, "conversion")
}

// wantSaleAs is wantSale for a customer left in customerStatus.
func wantSaleAs(t *testing.T, r reply, txn, clickID, customerStatus string) saleOut {
	t.Helper()
	var out saleOut
	if r.status != 200 {
		t.Fatalf("sale %s: %d %s, want 200", txn, r.status, r.raw)
	}
	if err := json.Unmarshal([]byte(r.raw), &out); err != nil {
		t.Fatalf("%v: %s", err, r.raw)
	}
	if !out.Success || out.Message != "Sale tracked successfully" || out.SaleID <= 0 || out.TransactionID != txn ||
		out.CustomerStatus != customerStatus || (clickID != "" && out.ClickID != clickID) {
		t.Fatalf("sale %s (click %s): %s", txn, clickID, r.raw)
	}
	if c, ok := r.body["commission"]; ok && c == nil {
		t.Fatalf("commission is omitted when there is none, never null: %s", r.raw)
	}
	if out.Commission != nil && (out.Commission.ID <= 0 || out.Commission.Currency == "") {
		t.Fatalf("commission: %s", r.raw)
	}
	wantTrackHeaders(t, r)
	return out
}

// wantTrackHeaders: every answer of a tracking route carries X-Request-ID
// and the rate-limit headers.
func wantTrackHeaders(t *testing.T, r reply) {
	t.Helper()
	for _, h := range []string{"X-Request-ID", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if r.header.Get(h) == "" {
			t.Fatalf("answer %d without %s: %v", r.status, h, r.header)
		}
	}
}

// wantError checks the platform envelope of an error with its code: data
// null, error {status, name, message, details {}, code}.
func wantError(t *testing.T, r reply, status int, code, message string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d %s %q: %s", r.status, status, code, message, r.raw)
	}
	if d, ok := r.body["data"]; !ok || d != nil {
		t.Fatalf("platform envelope needs data:null: %s", r.raw)
	}
	e, _ := r.body["error"].(map[string]any)
	name := map[int]string{400: "BadRequestError", 401: "UnauthorizedError", 403: "ForbiddenError", 404: "NotFoundError",
		409: "ConflictError", 422: "UnprocessableEntityError", 500: "InternalServerError"}[status]
	if e == nil || e["status"] != float64(status) || e["name"] != name || e["code"] != code || e["message"] != message {
		t.Fatalf("error %s, want %d %s %s %q", r.raw, status, name, code, message)
	}
	details, ok := e["details"].(map[string]any)
	if !ok {
		t.Fatalf("details must be an object: %s", r.raw)
	}
	if status != 409 && len(details) != 0 {
		t.Fatalf("details must be empty: %s", r.raw)
	}
	if r.header.Get("X-Request-ID") == "" {
		t.Fatalf("missing X-Request-ID: %v", r.header)
	}
	return e
}

// saleView is GET /admin/v1/sales/{transaction_id}.
type saleView struct {
	ID            int64   `json:"id"`
	TransactionID string  `json:"transaction_id"`
	ProgramID     int64   `json:"program_id"`
	AmountCents   int64   `json:"amount_cents"`
	Currency      string  `json:"currency"`
	RefundedCents int64   `json:"refunded_cents"`
	IsTest        bool    `json:"is_test"`
	CommissionIDs []int64 `json:"commission_ids"`
}

// saleRecord reads a sale (the test sale of that id when test); ok false
// on 404.
func (s *trackStack) saleRecord(t *testing.T, txn string, test bool) (saleView, bool) {
	t.Helper()
	path := "/admin/v1/sales/" + txn
	if test {
		path += "?test=true"
	}
	r := s.admin(t, "GET", path, nil)
	if r.status == 404 {
		return saleView{}, false
	}
	var v struct{ Data saleView }
	if r.status != 200 || json.Unmarshal([]byte(r.raw), &v) != nil {
		t.Fatalf("GET %s: %d %s", path, r.status, r.raw)
	}
	return v.Data, true
}

// wantNoSale: nothing was recorded under txn, live or test.
func (s *trackStack) wantNoSale(t *testing.T, txn string) {
	t.Helper()
	for _, test := range []bool{false, true} {
		if v, ok := s.saleRecord(t, txn, test); ok {
			t.Fatalf("a refused call recorded sale %s (test %v): %+v", txn, test, v)
		}
	}
}

// commissionView is GET /admin/v1/commissions/{id} (minor units).
type commissionView struct {
	ID             int64      `json:"id"`
	SaleID         *int64     `json:"sale_id"`
	TransactionID  string     `json:"transaction_id"`
	ProgramID      int64      `json:"program_id"`
	PartnerID      int64      `json:"partner_id"`
	CustomerClick  string     `json:"customer_click_id"`
	Kind           string     `json:"kind"`
	Status         string     `json:"status"`
	Amount         int64      `json:"amount"`
	Currency       string     `json:"currency"`
	RefundedAmount int64      `json:"refunded_amount"`
	Reason         string     `json:"reason"`
	PaidOut        bool       `json:"paid_out"`
	ApprovedAt     *time.Time `json:"approved_at"`
}

func (s *trackStack) commission(t *testing.T, id int64) commissionView {
	t.Helper()
	var c commissionView
	s.adminData(t, "GET", fmt.Sprintf("/admin/v1/commissions/%d", id), nil, &c)
	return c
}

// balance is one row of GET /admin/v1/partners/{id}/balances.
type balance struct {
	Currency        string `json:"currency"`
	Balance         int64  `json:"balance"`
	OpenWithdrawals int64  `json:"open_withdrawals"`
	Available       int64  `json:"available"`
}

// balances reads a partner's balances as "CUR balance/open/available"
// strings, in the order answered.
func (s *trackStack) balances(t *testing.T, partner int64) string {
	t.Helper()
	var bs []balance
	s.adminData(t, "GET", fmt.Sprintf("/admin/v1/partners/%d/balances", partner), nil, &bs)
	var out []string
	for _, b := range bs {
		out = append(out, fmt.Sprintf("%s %d/%d/%d", b.Currency, b.Balance, b.OpenWithdrawals, b.Available))
	}
	return strings.Join(out, ", ")
}

// notification is one item of the notifications routes.
type notification struct {
	ID      int64          `json:"id"`
	Kind    string         `json:"kind"`
	Payload map[string]any `json:"payload"`
}

func (s *trackStack) notifications(t *testing.T, recipient string, id int64) []notification {
	t.Helper()
	var ns []notification
	s.adminData(t, "GET", fmt.Sprintf("/admin/v1/%s/%d/notifications", recipient, id), nil, &ns)
	return ns
}

// waitNotifications polls until the recipient ("partners" or
// "advertisers") has n notifications (they are written after the
// response) and returns them, newest first.
func (s *trackStack) waitNotifications(t *testing.T, recipient string, id int64, n int) []notification {
	t.Helper()
	var ns []notification
	eventually(t, fmt.Sprintf("%d notifications of %s %d", n, recipient, id), func() bool {
		ns = s.notifications(t, recipient, id)
		return len(ns) >= n
	})
	if len(ns) != n {
		t.Fatalf("%s %d has %d notifications, want %d: %+v", recipient, id, len(ns), n, ns)
	}
	return ns
}

// approveDue runs the hold scheduler once now.
func (s *trackStack) approveDue(t *testing.T) {
	t.Helper()
	s.adminData(t, "POST", "/admin/v1/commissions/approve-due", nil, nil)
}

// withdrawAll opens a withdrawal of everything available in currency and
// returns its id.
func (s *trackStack) withdrawAll(t *testing.T, partner int64, currency string) int64 {
	t.Helper()
	var w struct {
		ID     int64  `json:"id"`
		Status string `json:"status"`
	}
	s.adminData(t, "POST", fmt.Sprintf("/admin/v1/partners/%d/withdrawals", partner), map[string]any{"currency": currency}, &w)
	if w.ID <= 0 || w.Status != "open" {
		t.Fatalf("withdrawal %+v", w)
	}
	return w.ID
}

// withdrawals reads a partner's withdrawals as "id status amount/requested".
func (s *trackStack) withdrawals(t *testing.T, partner int64) string {
	t.Helper()
	var ws []struct {
		ID        int64  `json:"id"`
		Amount    int64  `json:"amount"`
		Requested int64  `json:"requested_amount"`
		Status    string `json:"status"`
	}
	s.adminData(t, "GET", fmt.Sprintf("/admin/v1/partners/%d/withdrawals", partner), nil, &ws)
	var out []string
	for _, w := range ws {
		out = append(out, fmt.Sprintf("%d %s %d/%d", w.ID, w.Status, w.Amount, w.Requested))
	}
	return strings.Join(out, ", ")
}

// approvedSale records a live sale of cents USD for a fresh customer of
// p and returns its transaction id and commission (p must approve at
// once, hold_days 0, for an approved one).
func (s *trackStack) approvedSale(t *testing.T, p prog, cents int64) (string, commissionOut) {
	t.Helper()
	txn := s.txn()
	cid := s.click(t, p.code)
	out := wantSale(t, s.sale(t, p.key, saleOf(txn, cid, cents, "USD", nil)), txn, cid)
	if out.Commission == nil {
		t.Fatalf("sale %s created no commission", txn)
	}
	return txn, *out.Commission
}
