// Package trackingclient sends command-line test events through the public
// tracking routes in test mode, exactly as a brand's integration would, with
// the caller's own program key: POST /api/v1/track/click and /lead to the
// tracking service, POST /api/v1/track/sale to the commissions service,
// which serves the sale route.
// It implements integration.Tracker; it is an HTTP adapter over the public
// contract, not a client of either service's internals.
package trackingclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/integration"
)

// UserAgent identifies test events sent by accounts on a caller's behalf.
const UserAgent = "svc-accounts-test-event/1"

// maxBody bounds what is read of the services' answers.
const maxBody = 64 << 10

// The services the public routes belong to, as errors name them.
const (
	serviceTracking    = "tracking"
	serviceCommissions = "commissions"
)

// Client calls the tracking base address (click, lead) and the commissions
// base address (sale).
type Client struct {
	tracking    *url.URL
	commissions *url.URL // nil: test sales fail with ErrSalesUnconfigured
	http        *http.Client
}

// New returns a client for trackingURL (e.g. http://tracking:8080) and
// commissionsURL (e.g. http://commissions:8080; "" leaves test sales
// failing with ErrSalesUnconfigured). hc carries the timeout and transport
// (tracing); nil means a 10-second client.
func New(trackingURL, commissionsURL string, hc *http.Client) (*Client, error) {
	t, err := baseURL(serviceTracking, trackingURL)
	if err != nil {
		return nil, err
	}
	c := &Client{tracking: t, http: hc}
	if strings.TrimSpace(commissionsURL) != "" {
		if c.commissions, err = baseURL(serviceCommissions, commissionsURL); err != nil {
			return nil, err
		}
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: 10 * time.Second}
	}
	return c, nil
}

func baseURL(service, raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(raw), "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s base URL %q: want http(s)://host[:port]", service, raw)
	}
	return u, nil
}

var _ integration.Tracker = (*Client)(nil)

type additional struct {
	TestMode  bool   `json:"test_mode"`
	ProgramID int64  `json:"program_id"`
	EventName string `json:"event_name,omitempty"`
}

// TestClick posts a test-mode click on the program's fixture link. The
// top-level program_id scopes the link lookup to the caller's program.
func (c *Client) TestClick(ctx context.Context, caller integration.Caller, click integration.TestClick) (integration.Recorded, error) {
	body := map[string]any{
		"affiliate_url":   click.AffiliateURL,
		"page_url":        click.PageURL,
		"program_id":      click.ProgramID,
		"user_agent":      UserAgent,
		"additional_data": additional{TestMode: true, ProgramID: click.ProgramID},
	}
	return c.post(ctx, serviceTracking, c.tracking, "/api/v1/track/click", caller, body)
}

// TestLead posts a test-mode lead with the program key (server mode), the
// kind that counts toward integration verification.
func (c *Client) TestLead(ctx context.Context, caller integration.Caller, lead integration.TestLead) (integration.Recorded, error) {
	body := map[string]any{
		"additional_data": additional{TestMode: true, ProgramID: lead.ProgramID, EventName: lead.EventName},
	}
	return c.post(ctx, serviceTracking, c.tracking, "/api/v1/track/lead", caller, body)
}

// TestSale posts a test-mode sale with the program key to the commissions
// service, which serves the sale route. It sends no transaction_id: in test
// mode commissions makes one (test_txn_<unix nanos>), which keeps test sales
// apart from the brand's real transaction ids; two test sales in one
// nanosecond would get a 409, answered here as a failure that a retry
// clears. It sends no click_id either (see integration.TestSale).
func (c *Client) TestSale(ctx context.Context, caller integration.Caller, sale integration.TestSale) (integration.Recorded, error) {
	if c.commissions == nil {
		return integration.Recorded{}, ErrSalesUnconfigured
	}
	body := map[string]any{
		"amount_cents":    sale.AmountCents,
		"currency":        sale.Currency,
		"additional_data": map[string]bool{"test_mode": true},
	}
	return c.post(ctx, serviceCommissions, c.commissions, "/api/v1/track/sale", caller, body)
}

// testAnswer is the contract's test-mode answer of click, lead and sale
// (the sale's data also carries transaction_id, not read here).
type testAnswer struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
	Data    *struct {
		EventID   int64 `json:"eventId"`
		ProgramID int64 `json:"programId"`
		TestMode  bool  `json:"test_mode"`
	} `json:"data"`
}

type errorAnswer struct {
	Message string `json:"message"`
	Error   struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"error"`
}

// StatusError is a non-200 answer of tracking or commissions; its text is
// for logs only.
type StatusError struct {
	Service string // "tracking" or "commissions"
	Path    string
	Status  int
	Code    string
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s answered %d (code %q): %s", e.Service, e.Path, e.Status, e.Code, e.Message)
}

func (c *Client) post(ctx context.Context, service string, base *url.URL, path string, caller integration.Caller, body any) (integration.Recorded, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return integration.Recorded{}, fmt.Errorf("encode %s body: %w", path, err)
	}
	u := base.JoinPath(path)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(b))
	if err != nil {
		return integration.Recorded{}, fmt.Errorf("build %s request: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("Authorization", "Bearer "+caller.APIKey)
	// The same id in both services' logs; the callee keeps a valid one.
	if caller.RequestID != "" {
		req.Header.Set(httpkit.HeaderRequestID, caller.RequestID)
	}
	// Tracking limits clicks and leads per client address (commissions
	// sales per key, failed authentications per address). Naming the
	// caller's address lets them bucket (and locate) the event as the
	// caller's rather than accounts' own; each believes it only when
	// accounts is among its TRUSTED_PROXIES.
	if caller.ClientIP != "" {
		req.Header.Set("X-Forwarded-For", caller.ClientIP)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return integration.Recorded{}, fmt.Errorf("call %s %s: %w", service, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return integration.Recorded{}, fmt.Errorf("read %s %s answer: %w", service, path, err)
	}
	if resp.StatusCode == http.StatusOK {
		var a testAnswer
		if err := json.Unmarshal(raw, &a); err != nil {
			return integration.Recorded{}, fmt.Errorf("decode %s %s answer: %w", service, path, err)
		}
		if !a.Success || a.Data == nil || !a.Data.TestMode || a.Data.EventID == 0 {
			return integration.Recorded{}, fmt.Errorf("%s %s answered 200 without a test event: %.200s", service, path, raw)
		}
		return integration.Recorded{EventID: a.Data.EventID, ProgramID: a.Data.ProgramID, Message: a.Message}, nil
	}
	var e errorAnswer
	_ = json.Unmarshal(raw, &e)
	se := &StatusError{Service: service, Path: path, Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	if se.Message == "" {
		se.Message = e.Message
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return integration.Recorded{}, &integration.UpstreamLimitError{Message: se.Message, RetryAfter: retryAfter(resp.Header)}
	}
	return integration.Recorded{}, se
}

// retryAfter reads Retry-After in seconds; at least a second.
func retryAfter(h http.Header) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if err != nil || n < 1 {
		n = 1
	}
	return time.Duration(n) * time.Second
}

// Unconfigured is the Tracker of an accounts instance without TRACKING_URL:
// every test event fails (500) with a cause that names the setting.
type Unconfigured struct{}

// ErrUnconfigured is returned by Unconfigured.
var ErrUnconfigured = errors.New("TRACKING_URL is not set: test events cannot reach tracking")

// ErrSalesUnconfigured is returned by TestSale of a Client without a
// commissions address (COMMISSIONS_URL unset): test clicks and leads work,
// test sales fail (500) with a cause that names the setting.
var ErrSalesUnconfigured = errors.New("COMMISSIONS_URL is not set: test sales cannot reach commissions, which serves the sale route")

func (Unconfigured) TestClick(context.Context, integration.Caller, integration.TestClick) (integration.Recorded, error) {
	return integration.Recorded{}, ErrUnconfigured
}

func (Unconfigured) TestLead(context.Context, integration.Caller, integration.TestLead) (integration.Recorded, error) {
	return integration.Recorded{}, ErrUnconfigured
}

func (Unconfigured) TestSale(context.Context, integration.Caller, integration.TestSale) (integration.Recorded, error) {
	return integration.Recorded{}, ErrUnconfigured
}
