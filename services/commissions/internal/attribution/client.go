// Package attribution is commissions' client of tracking's
// POST /internal/v1/attributions: it asks tracking whether a payment is
// attributed, and to whom (services/tracking/README.md, "Attribution
// decisions"). It is go-kit's HTTP client transport (httptransport.NewClient)
// over an otelhttp transport, so the caller's trace continues in tracking,
// with a deadline on every call and the internal token as a Bearer header.
//
// The client never retries: a retry belongs to the caller, and is safe,
// because tracking stores the first decision for a transaction_id and
// answers it again (replayed) to every later call with that id, whatever the
// body, without moving anything twice.
package attribution

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	httptransport "github.com/go-kit/kit/transport/http"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/obs"
)

// Path is tracking's internal attribution route.
const Path = "/internal/v1/attributions"

// DefaultTimeout is the deadline of a call when New is given none.
const DefaultTimeout = 5 * time.Second

// maxBody bounds what is read of tracking's answers (a decision is a few
// hundred bytes).
const maxBody = 64 << 10

// Sources of a payment, as tracking stores them with the decision.
const (
	SourceAPI       = "api"
	SourceProcessor = "processor"
)

// Outcomes of a decision.
const (
	OutcomeAttributed = "attributed"
	OutcomeRefused    = "refused"
)

// Request is the body of POST /internal/v1/attributions, field for field
// (tracking's README table; tracking checks them in that order). The
// customer is found by click_id, else email_hash, processor_customer_id,
// client_reference_id, customer_key: send what the payment has; empty ones
// are left out.
type Request struct {
	ProgramID int64 `json:"program_id"`
	// TransactionID is the idempotency key: the same id answers the
	// same decision (replayed) forever.
	TransactionID       string `json:"transaction_id"`
	ClickID             string `json:"click_id,omitempty"`
	CustomerKey         string `json:"customer_key,omitempty"`
	EmailHash           string `json:"email_hash,omitempty"` // lower-case hex SHA-256 of the trimmed, lower-cased address
	ProcessorCustomerID string `json:"processor_customer_id,omitempty"`
	// ClientReferenceID is a processor checkout's client_reference_id (the
	// tracker's click for payment links), sent only without a click id.
	ClientReferenceID string `json:"client_reference_id,omitempty"`
	// AmountCents 0 (with SettleLead) only settles a provisional lead.
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	// OccurredAt becomes the customer's first purchase date; sent as RFC
	// 3339 in UTC.
	OccurredAt time.Time `json:"-"`
	// SettleLead: a processor checkout settles a provisional lead first.
	SettleLead bool   `json:"settle_lead,omitempty"`
	Source     string `json:"source"` // SourceAPI or SourceProcessor
}

// MarshalJSON writes occurred_at as RFC 3339 in UTC (seconds, or more when
// the time has them).
func (r Request) MarshalJSON() ([]byte, error) {
	type plain Request
	return json.Marshal(struct {
		plain
		OccurredAt string `json:"occurred_at"`
	}{plain(r), r.OccurredAt.UTC().Format(time.RFC3339Nano)})
}

// Decision is tracking's answer (the envelope's data), field for field.
type Decision struct {
	Outcome        string `json:"outcome"` // OutcomeAttributed or OutcomeRefused
	CustomerID     int64  `json:"customer_id"`
	ClickID        string `json:"click_id"`
	PartnerID      int64  `json:"partner_id"` // the customer's first partner: who earns the commission
	LinkID         int64  `json:"link_id"`
	CustomerStatus string `json:"customer_status"`
	// FirstPurchaseDate is set once the customer has converted.
	FirstPurchaseDate *time.Time `json:"first_purchase_date,omitempty"`
	// Refusal says why a refused payment is not attributed (code
	// "no_attribution" and the sale route's message for the rule).
	Refusal *Refusal `json:"refusal,omitempty"`
	// Replayed: the decision was stored by an earlier call with the
	// transaction id, and nothing moved this time.
	Replayed bool `json:"replayed"`
}

// Attributed reports whether the payment earns the partner a commission.
func (d Decision) Attributed() bool { return d.Outcome == OutcomeAttributed }

// Refusal is why a payment is not attributed.
type Refusal struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// The errors of Attribute, for the caller to branch on with errors.Is. Each
// wraps one errkind kind; the *Error that carries them has tracking's
// status, code and message.
var (
	// ErrCustomerNotFound: tracking knows no customer for the identifiers
	// sent (404 customer_not_found). Nothing was stored; the message is
	// tracking's ("Customer not found. Provide customer_key or click_id.").
	ErrCustomerNotFound = fmt.Errorf("attribution: customer not found: %w", errkind.NotFound)
	// ErrInvalid: tracking refused the request (400, its message). The
	// caller checks the same fields first, so this is a bug on our side or
	// a catalog replica behind ours ("Unknown program_id").
	ErrInvalid = fmt.Errorf("attribution: request refused by tracking: %w", errkind.Invalid)
	// ErrUnavailable: tracking could not decide. A network error, the
	// deadline, any 5xx, 503 not_configured (tracking has no
	// INTERNAL_TOKEN), 401 (our INTERNAL_TOKEN is not tracking's: a
	// misconfiguration, never the client's fault) or an answer outside the
	// contract. The sale route answers it as its 500; a retry with the same
	// transaction id is safe.
	ErrUnavailable = fmt.Errorf("attribution: tracking could not decide: %w", errkind.Unavailable)
)

// Error is a failed call: Kind is one of the Err* sentinels above, Status,
// Code and Message what tracking answered (0 and "" when it answered
// nothing), Err the cause of a call that got no usable answer. Its text
// never holds the token.
type Error struct {
	Kind    error
	Status  int
	Code    string
	Message string
	Err     error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind.Error())
	if e.Status != 0 {
		fmt.Fprintf(&b, " (tracking answered %d", e.Status)
		if e.Code != "" {
			fmt.Fprintf(&b, " %s", e.Code)
		}
		if e.Message != "" {
			fmt.Fprintf(&b, ": %s", e.Message)
		}
		b.WriteString(")")
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap makes errors.Is see the sentinel (and its errkind kind) and the
// cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// Client calls one tracking base address. It is safe for concurrent use;
// build one per process (in the wiring) and share it.
type Client struct {
	attribute func(context.Context, any) (any, error)
	timeout   time.Duration
}

// Option configures New.
type Option func(*options)

type options struct {
	base       http.RoundTripper
	tracer     trace.TracerProvider
	propagator propagation.TextMapPropagator
}

// WithTracing makes the client's spans with tp and injects the trace
// context with prop (the platform's p.Tracer and p.Propagator). Without it
// otelhttp uses the global ones.
func WithTracing(tp trace.TracerProvider, prop propagation.TextMapPropagator) Option {
	return func(o *options) { o.tracer, o.propagator = tp, prop }
}

// WithTransport sets the round tripper under otelhttp (otherwise a clone
// of http.DefaultTransport that keeps MaxIdleConnsPerHost connections to
// tracking idle, see defaultTransport).
func WithTransport(rt http.RoundTripper) Option {
	return func(o *options) { o.base = rt }
}

// New returns the client of tracking at baseURL (http(s)://host[:port], as
// TRACKING_URL), sending token as Authorization: Bearer, each call bounded
// by timeout (DefaultTimeout when 0). The token lives in the client only.
func New(baseURL, token string, timeout time.Duration, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(baseURL), "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tracking base URL %q: want http(s)://host[:port]", baseURL)
	}
	if token == "" {
		return nil, errors.New("attribution client: no internal token")
	}
	if timeout < 0 {
		return nil, fmt.Errorf("attribution client: negative timeout %s", timeout)
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	o := options{base: defaultTransport()}
	for _, opt := range opts {
		opt(&o)
	}
	var transport http.RoundTripper = otelhttp.NewTransport(o.base)
	if o.tracer != nil {
		prop := o.propagator
		if prop == nil {
			prop = otel.GetTextMapPropagator()
		}
		transport = obs.TracingTransport(o.base, o.tracer, prop)
	}
	hc := &http.Client{
		Transport: transport,
		// Tracking answers a decision or an error; a redirect is not
		// the contract (and would drop nothing but the deadline's time).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	auth := "Bearer " + token
	kc := httptransport.NewClient(http.MethodPost, u.JoinPath(Path), encodeRequest, decodeResponse,
		httptransport.SetClient(hc),
		httptransport.ClientBefore(func(ctx context.Context, r *http.Request) context.Context {
			r.Header.Set("Authorization", auth)
			return ctx
		}),
	)
	return &Client{attribute: kc.Endpoint(), timeout: timeout}, nil
}

// MaxIdleConnsPerHost is how many idle keep-alive connections to tracking
// the default transport keeps. http.DefaultTransport keeps 2: with more
// concurrent sales than that, every call beyond the second closed its
// connection after the answer and the next one dialled a new one (a TCP
// handshake, a goroutine pair and a TIME_WAIT socket per sale; bench-sale at
// 32 connections). Sized above the sale route's expected concurrency.
const MaxIdleConnsPerHost = 256

// defaultTransport is http.DefaultTransport with MaxIdleConnsPerHost idle
// connections kept to the one host the client calls.
func defaultTransport() http.RoundTripper {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t = t.Clone()
	t.MaxIdleConns = max(t.MaxIdleConns, MaxIdleConnsPerHost)
	t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	return t
}

// Timeout is the deadline of each call.
func (c *Client) Timeout() time.Duration { return c.timeout }

// Attribute asks tracking for req's decision, within the client's deadline
// (or ctx's, if sooner). A refusal is a Decision, not an error. Errors are
// *Error wrapping ErrCustomerNotFound, ErrInvalid or
// ErrUnavailable. Nothing is retried here.
func (c *Client) Attribute(ctx context.Context, req Request) (Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.attribute(ctx, req)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return Decision{}, e
		}
		// go-kit returns the transport's error as is: no answer (refused
		// connection, reset, the deadline).
		return Decision{}, &Error{Kind: ErrUnavailable, Err: err}
	}
	return resp.(Decision), nil
}

func encodeRequest(_ context.Context, r *http.Request, request any) error {
	b, err := json.Marshal(request.(Request))
	if err != nil {
		return fmt.Errorf("encode attribution request: %w", err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json")
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return nil
}

// envelope is the platform envelope of tracking's answers.
type envelope struct {
	Data  *Decision `json:"data"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeResponse(_ context.Context, resp *http.Response) (any, error) {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, &Error{Kind: ErrUnavailable, Status: resp.StatusCode, Err: fmt.Errorf("read answer: %w", err)}
	}
	var env envelope
	jsonErr := json.Unmarshal(raw, &env)
	if resp.StatusCode == http.StatusOK {
		d := env.Data
		if jsonErr != nil || d == nil || (d.Outcome != OutcomeAttributed && d.Outcome != OutcomeRefused) {
			return nil, &Error{Kind: ErrUnavailable, Status: resp.StatusCode, Err: fmt.Errorf("answer outside the contract: %.200q", raw)}
		}
		return *d, nil
	}
	e := &Error{Kind: ErrUnavailable, Status: resp.StatusCode}
	if jsonErr == nil && env.Error != nil {
		e.Code, e.Message = env.Error.Code, env.Error.Message
	}
	switch {
	case resp.StatusCode == http.StatusNotFound && e.Code == "customer_not_found":
		e.Kind = ErrCustomerNotFound
	case resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusRequestEntityTooLarge:
		e.Kind = ErrInvalid
	}
	// Anything else (401: our token is not tracking's; 503
	// not_configured; 5xx; a 409, which tracking never answers since it
	// keeps decisions per program; a 404 without tracking's code, i.e. a
	// TRACKING_URL that is not tracking) stays ErrUnavailable.
	return nil, e
}
