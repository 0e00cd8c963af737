package trackingclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/accounts/internal/integration"
	"github.com/svc-dev/svc/services/accounts/internal/integration/trackingclient"
)

type seen struct {
	calls   int
	path    string
	headers http.Header
	body    map[string]any
}

// fakeTracking answers every request with status and body and records it;
// the client's tracking and commissions addresses are both this fake.
func fakeTracking(t *testing.T, status int, body string, header map[string]string) (*trackingclient.Client, *seen) {
	t.Helper()
	u, got := fakeService(t, status, body, header)
	c, err := trackingclient.New(u+"/", u+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, got
}

// fakeService answers every request with status and body and records it
// (the last one, and how many it got).
func fakeService(t *testing.T, status int, body string, header map[string]string) (string, *seen) {
	t.Helper()
	got := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.calls++
		got.path, got.headers = r.URL.Path, r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &got.body)
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, got
}

var who = integration.Caller{ProgramID: 7, APIKey: "svc_live_abc", ClientIP: "203.0.113.9", RequestID: "req-42"}

func TestTestClickSendsTheContractBodyWithTheCallersKey(t *testing.T) {
	c, got := fakeTracking(t, 200, `{"success":true,"message":"Test click recorded","data":{"eventId":31,"programId":7,"test_mode":true}}`, nil)
	rec, err := c.TestClick(context.Background(), who, integration.TestClick{ProgramID: 7, AffiliateURL: "https://shop.example/?via=svc-test-7", PageURL: "https://shop.example/"})
	if err != nil {
		t.Fatal(err)
	}
	if rec != (integration.Recorded{EventID: 31, ProgramID: 7, Message: "Test click recorded"}) {
		t.Fatalf("recorded %+v", rec)
	}
	if got.path != "/api/v1/track/click" {
		t.Fatalf("path %q", got.path)
	}
	for h, want := range map[string]string{
		"Authorization": "Bearer svc_live_abc", "X-Request-Id": "req-42", "X-Forwarded-For": "203.0.113.9",
		"Content-Type": "application/json", "User-Agent": trackingclient.UserAgent,
	} {
		if got.headers.Get(h) != want {
			t.Fatalf("%s = %q, want %q", h, got.headers.Get(h), want)
		}
	}
	want := `{"additional_data":{"program_id":7,"test_mode":true},"affiliate_url":"https://shop.example/?via=svc-test-7","page_url":"https://shop.example/","program_id":7,"user_agent":"svc-accounts-test-event/1"}`
	if b, _ := json.Marshal(got.body); string(b) != want {
		t.Fatalf("body %s\nwant %s", b, want)
	}
}

func TestTestLeadIsAKeyedTestModeLead(t *testing.T) {
	c, got := fakeTracking(t, 200, `{"success":true,"message":"Test lead recorded","data":{"eventId":5,"programId":7,"test_mode":true}}`, nil)
	rec, err := c.TestLead(context.Background(), who, integration.TestLead{ProgramID: 7, EventName: "svc_cli_test_event"})
	if err != nil || rec.EventID != 5 {
		t.Fatalf("%+v %v", rec, err)
	}
	want := `{"additional_data":{"event_name":"svc_cli_test_event","program_id":7,"test_mode":true}}`
	if b, _ := json.Marshal(got.body); got.path != "/api/v1/track/lead" || string(b) != want {
		t.Fatalf("%s %s", got.path, b)
	}
}

// The sale route is the commissions service's: the test sale goes there,
// never to tracking, and its answer (data with transaction_id) is read.
func TestTestSaleIsAKeyedTestModeSaleOfTheFixedAmountOnCommissions(t *testing.T) {
	trackingURL, trackingSeen := fakeService(t, 404, `{}`, nil)
	commissionsURL, got := fakeService(t, 200, `{"success":true,"message":"Test sale recorded","data":{"eventId":9,"programId":7,"test_mode":true,"transaction_id":"test_txn_1"}}`, nil)
	c, err := trackingclient.New(trackingURL, commissionsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.TestSale(context.Background(), who, integration.TestSale{ProgramID: 7, AmountCents: 1000, Currency: "USD"})
	if err != nil {
		t.Fatal(err)
	}
	if rec != (integration.Recorded{EventID: 9, ProgramID: 7, Message: "Test sale recorded"}) {
		t.Fatalf("recorded %+v", rec)
	}
	if got.calls != 1 || trackingSeen.calls != 0 {
		t.Fatalf("commissions got %d calls, tracking %d; want 1 and 0", got.calls, trackingSeen.calls)
	}
	if got.path != "/api/v1/track/sale" || got.headers.Get("Authorization") != "Bearer svc_live_abc" || got.headers.Get("X-Request-Id") != "req-42" ||
		got.headers.Get("X-Forwarded-For") != "203.0.113.9" {
		t.Fatalf("path %q headers %v", got.path, got.headers)
	}
	// No transaction_id (commissions makes one in test mode), no click_id.
	want := `{"additional_data":{"test_mode":true},"amount_cents":1000,"currency":"USD"}`
	if b, _ := json.Marshal(got.body); string(b) != want {
		t.Fatalf("body %s\nwant %s", b, want)
	}
}

func TestTrackingRefusals(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		body      string
		header    map[string]string
		limited   bool
		retry     time.Duration
		errStatus int
	}{
		{"rate limited", 429, `{"error":{"status":429,"code":"rate_limited","message":"Too many requests. Retry after 12 seconds.","retry_after_seconds":12}}`,
			map[string]string{"Retry-After": "12"}, true, 12 * time.Second, 0},
		{"rate limited without Retry-After", 429, `{}`, nil, true, time.Second, 0},
		{"unknown link", 400, `{"data":null,"error":{"status":400,"name":"BadRequestError","message":"Referral link not found","details":{}}}`, nil, false, 0, 400},
		{"unknown key", 401, `{"data":null,"error":{"status":401,"name":"UnauthorizedError","message":"Invalid API token","details":{},"code":"unauthorized"}}`, nil, false, 0, 401},
		{"duplicate transaction", 409, `{"data":null,"error":{"status":409,"name":"ConflictError","message":"Duplicate transaction_id. This sale has already been recorded.","details":{},"code":"duplicate_transaction"}}`, nil, false, 0, 409},
		{"service failure", 500, `not json`, nil, false, 0, 500},
		{"200 that is not a test answer", 200, `{"success":true,"click_id":"cust_1_2"}`, nil, false, 0, 0},
	} {
		for _, route := range []struct {
			name    string
			service string
			send    func(*trackingclient.Client) error
		}{
			{"click", "tracking", func(c *trackingclient.Client) error {
				_, err := c.TestClick(context.Background(), who, integration.TestClick{ProgramID: 7})
				return err
			}},
			{"lead", "tracking", func(c *trackingclient.Client) error {
				_, err := c.TestLead(context.Background(), who, integration.TestLead{ProgramID: 7})
				return err
			}},
			{"sale", "commissions", func(c *trackingclient.Client) error {
				_, err := c.TestSale(context.Background(), who, integration.TestSale{ProgramID: 7, AmountCents: 1000, Currency: "USD"})
				return err
			}},
		} {
			t.Run(route.name+" "+tc.name, func(t *testing.T) {
				c, _ := fakeTracking(t, tc.status, tc.body, tc.header)
				err := route.send(c)
				if err == nil {
					t.Fatal("no error")
				}
				var lim *integration.UpstreamLimitError
				if errors.As(err, &lim) != tc.limited || (tc.limited && lim.RetryAfter != tc.retry) {
					t.Fatalf("err %v (limited %t)", err, errors.As(err, &lim))
				}
				if tc.limited && !errors.Is(err, integration.ErrRateLimited) {
					t.Fatal("limit is not the rate-limited kind")
				}
				var se *trackingclient.StatusError
				if tc.errStatus != 0 && (!errors.As(err, &se) || se.Status != tc.errStatus || se.Service != route.service) {
					t.Fatalf("err %v, want status %d from %s", err, tc.errStatus, route.service)
				}
				if !tc.limited && (errors.Is(err, errkind.Invalid) || errors.Is(err, integration.ErrRateLimited)) {
					t.Fatalf("tracking refusal %v leaked as a business kind", err)
				}
			})
		}
	}
}

func TestNewRefusesABadBaseURL(t *testing.T) {
	for _, u := range []string{"", "tracking:8080", "ftp://x", "http://"} {
		if _, err := trackingclient.New(u, "http://commissions:8080", nil); err == nil {
			t.Fatalf("New(%q, commissions) accepted", u)
		}
	}
	for _, u := range []string{"commissions:8080", "ftp://x", "http://"} {
		if _, err := trackingclient.New("http://tracking:8080", u, nil); err == nil {
			t.Fatalf("New(tracking, %q) accepted", u)
		}
	}
}

// Without a commissions address, clicks and leads still reach tracking;
// test sales fail with the cause naming COMMISSIONS_URL.
func TestNoCommissionsURLFailsOnlyTheSale(t *testing.T) {
	u, got := fakeService(t, 200, `{"success":true,"message":"Test lead recorded","data":{"eventId":5,"programId":7,"test_mode":true}}`, nil)
	c, err := trackingclient.New(u, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TestLead(context.Background(), who, integration.TestLead{ProgramID: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TestSale(context.Background(), who, integration.TestSale{ProgramID: 7, AmountCents: 1000, Currency: "USD"}); !errors.Is(err, trackingclient.ErrSalesUnconfigured) {
		t.Fatalf("sale without COMMISSIONS_URL: %v", err)
	}
	if got.calls != 1 {
		t.Fatalf("%d calls, want the lead only", got.calls)
	}
}

func TestUnreachableServiceIsAFailure(t *testing.T) {
	c, err := trackingclient.New("http://127.0.0.1:1", "http://127.0.0.1:1", &http.Client{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TestLead(context.Background(), who, integration.TestLead{ProgramID: 7}); err == nil {
		t.Fatal("no error")
	}
	if _, err := c.TestSale(context.Background(), who, integration.TestSale{ProgramID: 7}); err == nil {
		t.Fatal("no error")
	}
	u := trackingclient.Unconfigured{}
	if _, err := u.TestClick(context.Background(), who, integration.TestClick{}); !errors.Is(err, trackingclient.ErrUnconfigured) {
		t.Fatalf("unconfigured click: %v", err)
	}
	if _, err := u.TestLead(context.Background(), who, integration.TestLead{}); !errors.Is(err, trackingclient.ErrUnconfigured) {
		t.Fatalf("unconfigured lead: %v", err)
	}
	if _, err := u.TestSale(context.Background(), who, integration.TestSale{}); !errors.Is(err, trackingclient.ErrUnconfigured) {
		t.Fatalf("unconfigured sale: %v", err)
	}
}
