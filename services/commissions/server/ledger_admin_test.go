package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/obs/obstest"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
	"github.com/svc-dev/svc/services/commissions/internal/ledger/pgstore"
	"github.com/svc-dev/svc/services/commissions/server"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

// ledgerEnv is commissions alone, on a fake clock, with a ledger of its
// own over the service's pool to record sales and refunds (their routes
// come later) and the admin API to read them back.
type ledgerEnv struct {
	inst  *platform.Instance
	base  string
	clock *platformtest.Clock
	svc   *ledger.Service
	pool  *pgxpool.Pool
}

func startLedger(t *testing.T, env map[string]string) *ledgerEnv {
	t.Helper()
	clock := platformtest.NewClock(t0)
	st := stacktest.StartOn(t, clock, env, server.Name)
	inst := st.Instance(server.Name)
	svc, err := ledger.New(ledger.Config{Store: pgstore.New(inst.Platform().Pool), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return &ledgerEnv{inst: inst, base: "http://" + inst.Addr(), clock: clock, svc: svc, pool: inst.Platform().Pool}
}

// program puts a program in the catalog replica (as the catalog consumer
// would): percent commission of rate, hold days, USD; its advertiser is
// id+1000.
func (e *ledgerEnv) program(t *testing.T, id int64, rate string, hold int) {
	t.Helper()
	if _, err := e.pool.Exec(context.Background(), `INSERT INTO programs (id, advertiser_id, commission_type, commission_rate,
			duration_months, hold_days, currency, lead_commission, catalog_seq, updated_at)
		VALUES ($1::bigint, $1::bigint + 1000, 'percent', $2, 0, $3, 'USD', '0', 1, now())`, id, rate, hold); err != nil {
		t.Fatal(err)
	}
}

func (e *ledgerEnv) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	return obstest.Metric(t, e.inst.Platform().Registry, name, labels...)
}

// call sends an admin request (token "" sends none) and returns the status
// and body.
func (e *ledgerEnv) call(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(bytes.TrimSpace(b))
}

// admin sends an authenticated request and checks status and, when want
// is not empty, the body exactly (compact JSON).
func (e *ledgerEnv) admin(t *testing.T, method, path, body string, status int, want string) string {
	t.Helper()
	got, b := e.call(t, method, path, stacktest.AdminToken, body)
	if got != status {
		t.Fatalf("%s %s: %d %s, want %d", method, path, got, b, status)
	}
	if want != "" {
		var c bytes.Buffer
		if err := json.Compact(&c, []byte(want)); err != nil {
			t.Fatalf("want is not JSON: %v", err)
		}
		if b != c.String() {
			t.Fatalf("%s %s:\n got %s\nwant %s", method, path, b, c.String())
		}
	}
	return b
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitRuns waits until the runner counted by the runs counter name has
// finished n more runs (outcome ok) than when called.
func (e *ledgerEnv) waitRuns(t *testing.T, name string, n float64) {
	t.Helper()
	from := e.metric(t, name, "outcome", "ok")
	eventually(t, fmt.Sprintf("%v more runs (%s)", n, name), func() bool { return e.metric(t, name, "outcome", "ok") >= from+n })
}

func (e *ledgerEnv) sale(t *testing.T, tid string, program, customer, cents int64) ledger.SaleResult {
	t.Helper()
	res, err := e.svc.RecordSale(context.Background(), ledger.SaleInput{
		TransactionID: tid, ProgramID: program, CustomerID: customer, CustomerClickID: "click_of_" + tid, PartnerID: 7, AmountCents: cents,
		Currency: "USD", Source: ledger.SourceAPI,
	})
	if err != nil {
		t.Fatalf("record sale %s: %v", tid, err)
	}
	return res
}

// The scheduler approves a pending commission once the injected clock
// passes its hold; then every admin route answers what the ledger holds.
func TestLedgerAdminRoutes(t *testing.T) {
	t.Parallel()
	e := startLedger(t, map[string]string{"APPROVE_INTERVAL": "20ms", "BACKSTOP_INTERVAL": "1h"})
	e.program(t, 501, "10", 14)
	res := e.sale(t, "tx-a", 501, 1, 10000)
	c := res.Commission
	if c == nil || c.Status != "pending" {
		t.Fatalf("sale without a pending commission: %+v", res)
	}
	commission := fmt.Sprintf("/admin/v1/commissions/%d", c.ID)
	pending := fmt.Sprintf(`{"data":{"id":%d,"sale_id":%d,"transaction_id":"tx-a","program_id":501,"partner_id":7,"customer_click_id":"click_of_tx-a",
		"kind":"sale","status":"pending","amount":1000,"currency":"USD","refunded_amount":0,"reason":"","paid_out":false,
		"created_at":"2026-03-10T12:00:00Z","approved_at":null}}`, c.ID, res.Sale.ID)
	e.admin(t, "GET", commission, "", 200, pending)
	saleBody := fmt.Sprintf(`{"data":{"id":%d,"transaction_id":"tx-a","program_id":501,"amount_cents":10000,"currency":"USD",
		"refunded_cents":0,"is_test":false,"commission_ids":[%d]}}`, res.Sale.ID, c.ID)
	e.admin(t, "GET", "/admin/v1/sales/tx-a", "", 200, saleBody)
	e.admin(t, "GET", "/admin/v1/sales/tx-a?test=false", "", 200, saleBody)
	e.admin(t, "GET", "/admin/v1/partners/7/balances", "", 200, `{"data":[]}`)

	// A day before the hold ends nothing moves; once the clock passes it,
	// the runner approves and credits the commission.
	e.clock.Advance(13 * day)
	e.waitRuns(t, "commissions_approval_runs_total", 3) // none may approve early
	e.admin(t, "GET", commission, "", 200, pending)
	approvedAt := e.clock.Advance(day + time.Second)
	eventually(t, "the runner approves the commission", func() bool {
		_, b := e.call(t, "GET", commission, stacktest.AdminToken, "")
		return strings.Contains(b, `"status":"approved"`)
	})
	approved := func(paidOut bool) string {
		return fmt.Sprintf(`{"data":{"id":%d,"sale_id":%d,"transaction_id":"tx-a","program_id":501,"partner_id":7,"customer_click_id":"click_of_tx-a",
		"kind":"sale","status":"approved","amount":1000,"currency":"USD","refunded_amount":0,"reason":"","paid_out":%t,
		"created_at":"2026-03-10T12:00:00Z","approved_at":%q}}`, c.ID, res.Sale.ID, paidOut, approvedAt.Format(time.RFC3339))
	}
	e.admin(t, "GET", commission, "", 200, approved(false))
	if n := e.metric(t, "commissions_approved_total"); n != 1 {
		t.Fatalf("commissions_approved_total %v, want 1", n)
	}
	if n := e.metric(t, "commissions_approval_runs_total", "outcome", "ok"); n < 2 {
		t.Fatalf("approval runs ok %v", n)
	}
	e.admin(t, "GET", "/admin/v1/partners/7/balances", "", 200, `{"data":[{"currency":"USD","balance":1000,"open_withdrawals":0,"available":1000}]}`)

	// Withdrawals: more than available, or not positive, is 400.
	e.admin(t, "POST", "/admin/v1/partners/7/withdrawals", `{"currency":"USD","amount":1001}`, 400, "")
	e.admin(t, "POST", "/admin/v1/partners/7/withdrawals", `{"currency":"USD","amount":0}`, 400,
		errBody(400, "amount must be a positive integer (minor units)", "amount"))
	e.admin(t, "POST", "/admin/v1/partners/7/withdrawals", `{"currency":"USD","amount":-5}`, 400, "")
	e.admin(t, "POST", "/admin/v1/partners/8/withdrawals", `{"currency":"USD"}`, 400, "") // nothing available
	e.admin(t, "POST", "/admin/v1/partners/7/withdrawals", `{"amount":5}`, 400,
		errBody(400, "currency is required", "currency"))
	e.admin(t, "POST", "/admin/v1/partners/7/withdrawals", `{"currency":"GBP"}`, 422, "")
	e.admin(t, "POST", "/admin/v1/partners/7/withdrawals", `{"currency":"US\u0000D"}`, 400,
		errBody(400, "currency must not contain the NUL character", "currency"))
	e.admin(t, "POST", "/admin/v1/partners/7/withdrawals", `{"currency":"USD","amount":"5"}`, 400, "")
	e.admin(t, "POST", "/admin/v1/partners/7/withdrawals", `not json`, 400, "")
	w1 := e.openWithdrawal(t, `{"currency":"USD","amount":400}`, 400)
	e.admin(t, "GET", "/admin/v1/partners/7/balances", "", 200, `{"data":[{"currency":"USD","balance":1000,"open_withdrawals":400,"available":600}]}`)
	at := approvedAt.Format(time.RFC3339)
	view := func(id, amount, requested int64, status string) string {
		return fmt.Sprintf(`{"id":%d,"partner_id":7,"currency":"USD","amount":%d,"requested_amount":%d,"status":%q,"created_at":%q,"updated_at":%q}`,
			id, amount, requested, status, at, at)
	}
	e.admin(t, "POST", fmt.Sprintf("/admin/v1/withdrawals/%d/cancel", w1), "", 200, `{"data":`+view(w1, 400, 400, "cancelled")+`}`)
	e.admin(t, "POST", fmt.Sprintf("/admin/v1/withdrawals/%d/cancel", w1), "", 409, "")
	e.admin(t, "POST", fmt.Sprintf("/admin/v1/withdrawals/%d/pay", w1), "", 409, "")
	w2 := e.openWithdrawal(t, `{"currency":"USD"}`, 1000) // all available
	e.admin(t, "GET", "/admin/v1/partners/7/withdrawals", "", 200, `{"data":[`+view(w2, 1000, 1000, "open")+`,`+view(w1, 400, 400, "cancelled")+`]}`)
	e.admin(t, "POST", fmt.Sprintf("/admin/v1/withdrawals/%d/pay", w2), "", 200, `{"data":`+view(w2, 1000, 1000, "paid")+`}`)
	e.admin(t, "GET", "/admin/v1/partners/7/balances", "", 200, `{"data":[{"currency":"USD","balance":0,"open_withdrawals":0,"available":0}]}`)
	e.admin(t, "GET", commission, "", 200, approved(true))

	// Refunds (through the ledger; their route comes later) write the
	// notifications, newest first. (Their outcome counter is fed by the
	// service's ledger: ledger's TestRefundOutcomesAreReported.)
	ctx := context.Background()
	for _, cents := range []int64{5000, 0} {
		if _, err := e.svc.Refund(ctx, ledger.RefundInput{ProgramID: 501, TransactionID: "tx-a", AmountCents: cents}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []struct {
		path, kind string
		id         int64
		kinds      []string
	}{
		{"/admin/v1/partners/7/notifications", ledger.RecipientPartner, 7, []string{"commission_reversed", "commission_refunded"}},
		{"/admin/v1/advertisers/1501/notifications", ledger.RecipientAdvertiser, 1501, []string{"refund_manual_review", "refund_manual_review"}},
		{"/admin/v1/partners/8/notifications", ledger.RecipientPartner, 8, nil},
	} {
		ns, err := e.svc.Notifications(ctx, r.kind, r.id)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		items := []string{}
		for _, n := range ns {
			kinds = append(kinds, n.Kind)
			payload, err := json.Marshal(n.Payload)
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, fmt.Sprintf(`{"id":%d,"kind":%q,"payload":%s,"created_at":%q}`, n.ID, n.Kind, payload, n.CreatedAt.Format(time.RFC3339Nano)))
		}
		if fmt.Sprint(kinds) != fmt.Sprint(r.kinds) {
			t.Fatalf("%s: kinds %v, want %v", r.path, kinds, r.kinds)
		}
		e.admin(t, "GET", r.path, "", 200, `{"data":[`+strings.Join(items, ",")+`]}`)
	}
	e.admin(t, "GET", "/admin/v1/sales/tx-a", "", 200, fmt.Sprintf(`{"data":{"id":%d,"transaction_id":"tx-a","program_id":501,
		"amount_cents":10000,"currency":"USD","refunded_cents":10000,"is_test":false,"commission_ids":[%d]}}`, res.Sale.ID, c.ID))

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			name, method, path, token string
			status                    int
			body                      string
		}{
			{"no token", "GET", commission, "", 401, errBody(401, "Missing or malformed Authorization header. Expected: Bearer <admin_token>", "")},
			{"wrong token", "GET", commission, "nope", 401, errBody(401, "Invalid admin token", "")},
			{"bad id", "GET", "/admin/v1/commissions/abc", stacktest.AdminToken, 400, errBody(400, "id must be a positive integer", "id")},
			{"zero id", "GET", "/admin/v1/commissions/0", stacktest.AdminToken, 400, ""},
			{"unknown commission", "GET", "/admin/v1/commissions/999999", stacktest.AdminToken, 404, ""},
			{"unknown sale", "GET", "/admin/v1/sales/nope", stacktest.AdminToken, 404, ""},
			{"live sale asked as test", "GET", "/admin/v1/sales/tx-a?test=true", stacktest.AdminToken, 404, ""},
			{"bad test flag", "GET", "/admin/v1/sales/tx-a?test=maybe", stacktest.AdminToken, 400, ""},
			{"NUL in transaction id", "GET", "/admin/v1/sales/a%00b", stacktest.AdminToken, 400, errBody(400, "transaction_id must not contain the NUL character", "transaction_id")},
			{"NUL in query", "GET", "/admin/v1/sales/tx-a?test=%00", stacktest.AdminToken, 400, ""},
			{"bad partner id", "GET", "/admin/v1/partners/x/balances", stacktest.AdminToken, 400, ""},
			{"unknown withdrawal", "POST", "/admin/v1/withdrawals/999999/pay", stacktest.AdminToken, 404, ""},
			{"bad advertiser id", "GET", "/admin/v1/advertisers/-1/notifications", stacktest.AdminToken, 400, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, body := e.call(t, tc.method, tc.path, tc.token, "")
				if status != tc.status || (tc.body != "" && body != tc.body) || !strings.HasPrefix(body, `{"data":null,"error":{"status":`) {
					t.Fatalf("%d %s, want %d %s", status, body, tc.status, tc.body)
				}
			})
		}
	})
}

// errBody is the platform envelope of an error, with details.field when
// field is set.
func errBody(status int, message, field string) string {
	name := map[int]string{400: "BadRequestError", 401: "UnauthorizedError"}[status]
	details := `,"details":{}`
	if field != "" {
		details = fmt.Sprintf(`,"details":{"field":%q}`, field)
	}
	return fmt.Sprintf(`{"data":null,"error":{"status":%d,"name":%q,"message":%q%s}}`, status, name, message, details)
}

// openWithdrawal opens a withdrawal and checks the 201 body.
func (e *ledgerEnv) openWithdrawal(t *testing.T, body string, amount int64) int64 {
	t.Helper()
	b := e.admin(t, "POST", "/admin/v1/partners/7/withdrawals", body, 201, "")
	var got struct{ Data struct{ ID int64 } }
	if err := json.Unmarshal([]byte(b), &got); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`{"data":{"id":%d,"amount":%d,"status":"open"}}`, got.Data.ID, amount); b != want || got.Data.ID <= 0 {
		t.Fatalf("open withdrawal: %s, want %s", b, want)
	}
	return got.Data.ID
}

// approve-due runs the scheduler once now (the lag gauge measured first);
// the backstop creates a sale's missing commission once its program
// reaches the replica, and counts it once.
func TestApproveDueRouteAndBackstop(t *testing.T) {
	t.Parallel()
	e := startLedger(t, map[string]string{"APPROVE_INTERVAL": "1h", "BACKSTOP_INTERVAL": "20ms", "BACKSTOP_GRACE": "1m"})
	// The scheduler's first run (at start) is done before anything is due.
	eventually(t, "the scheduler's first run", func() bool { return e.metric(t, "commissions_approval_runs_total", "outcome", "ok") >= 1 })
	e.program(t, 601, "10", 14)
	e.sale(t, "tx-due", 601, 1, 5000)
	e.admin(t, "POST", "/admin/v1/commissions/approve-due", "", 200, `{"data":{"approved":0}}`)
	e.clock.Advance(14*day + 90*time.Second)
	e.admin(t, "POST", "/admin/v1/commissions/approve-due", "", 200, `{"data":{"approved":1}}`)
	if lag := e.metric(t, "commissions_oldest_due_pending_seconds"); lag != 90 {
		t.Fatalf("scheduler lag %v s, want 90", lag)
	}
	e.admin(t, "POST", "/admin/v1/commissions/approve-due", "", 200, `{"data":{"approved":0}}`)
	if lag := e.metric(t, "commissions_oldest_due_pending_seconds"); lag != 0 {
		t.Fatalf("scheduler lag %v s after approving, want 0", lag)
	}
	if n := e.metric(t, "commissions_approved_total"); n != 1 {
		t.Fatalf("commissions_approved_total %v, want 1", n)
	}

	// A sale whose program is not in the replica yet is stored without
	// commission; the backstop leaves it for the grace, then counts it in
	// its backlog until the program arrives, then creates it once.
	_, err := e.svc.RecordSale(context.Background(), ledger.SaleInput{
		TransactionID: "tx-late", ProgramID: 602, CustomerID: 2, PartnerID: 7, AmountCents: 20000, Currency: "USD", Source: ledger.SourceProcessor,
	})
	var nc *ledger.CommissionNotCreatedError
	if !errors.As(err, &nc) || !errors.Is(err, ledger.ErrProgramUnknown) {
		t.Fatalf("sale of a program not in the replica: %v", err)
	}
	noCommission := fmt.Sprintf(`{"data":{"id":%d,"transaction_id":"tx-late","program_id":602,"amount_cents":20000,"currency":"USD",
		"refunded_cents":0,"is_test":false,"commission_ids":[]}}`, nc.SaleID)
	e.waitRuns(t, "commissions_backstop_runs_total", 3) // within the grace
	e.admin(t, "GET", "/admin/v1/sales/tx-late", "", 200, noCommission)
	if n := e.metric(t, "commissions_backstop_backlog"); n != 0 {
		t.Fatalf("backlog %v within the grace, want 0", n)
	}
	e.clock.Advance(2 * time.Minute)
	eventually(t, "the backlog counts the sale", func() bool { return e.metric(t, "commissions_backstop_backlog") == 1 })
	e.waitRuns(t, "commissions_backstop_runs_total", 3) // past the grace, program still absent
	e.admin(t, "GET", "/admin/v1/sales/tx-late", "", 200, noCommission)
	if n := e.metric(t, "commissions_backstop_created_total"); n != 0 {
		t.Fatalf("commissions_backstop_created_total %v before the program arrives", n)
	}

	e.program(t, 602, "10", 0)
	var created string
	eventually(t, "the backstop creates the commission", func() bool {
		_, created = e.call(t, "GET", "/admin/v1/sales/tx-late", stacktest.AdminToken, "")
		return !strings.Contains(created, `"commission_ids":[]`)
	})
	eventually(t, "the backlog empties", func() bool { return e.metric(t, "commissions_backstop_backlog") == 0 })
	e.waitRuns(t, "commissions_backstop_runs_total", 3) // more runs create nothing more
	e.admin(t, "GET", "/admin/v1/sales/tx-late", "", 200, created)
	if n := e.metric(t, "commissions_backstop_created_total"); n != 1 {
		t.Fatalf("commissions_backstop_created_total %v, want 1", n)
	}
	var sale struct {
		Data struct {
			CommissionIDs []int64 `json:"commission_ids"`
		}
	}
	if err := json.Unmarshal([]byte(created), &sale); err != nil || len(sale.Data.CommissionIDs) != 1 {
		t.Fatalf("sale after the backstop: %s %v", created, err)
	}
	// hold_days 0: approved and credited at once (2000 = 10% of 20000).
	b := e.admin(t, "GET", fmt.Sprintf("/admin/v1/commissions/%d", sale.Data.CommissionIDs[0]), "", 200, "")
	if !strings.Contains(b, `"status":"approved","amount":2000,`) {
		t.Fatalf("backstop commission: %s", b)
	}
}

// The admin routes are limited per token (ADMIN_RATE_LIMIT a minute) and,
// before the token is compared, per client IP once its 401s used up
// FAILED_AUTH_RATE_LIMIT.
func TestLedgerAdminRateLimits(t *testing.T) {
	t.Parallel()
	e := startLedger(t, map[string]string{"ADMIN_RATE_LIMIT": "3", "FAILED_AUTH_RATE_LIMIT": "2"})
	for i, want := range []int{200, 200, 200, 429} {
		if status, body := e.call(t, "GET", "/admin/v1/partners/7/balances", stacktest.AdminToken, ""); status != want {
			t.Fatalf("request %d with the token: %d %s, want %d", i+1, status, body, want)
		}
	}
	for i, want := range []int{401, 401, 429} {
		if status, body := e.call(t, "GET", "/admin/v1/partners/7/balances", "guess", ""); status != want {
			t.Fatalf("request %d with a wrong token: %d %s, want %d", i+1, status, body, want)
		}
	}
	if n := e.metric(t, "rate_limit_refusals_total"); n != 2 {
		t.Fatalf("rate_limit_refusals_total %v, want 2", n)
	}
}
