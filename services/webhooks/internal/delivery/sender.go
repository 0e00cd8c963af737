package delivery

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// MaxResponse is how much of a response is read (and thrown away): enough
// for any acknowledgement, never a receiver's whole page.
const MaxResponse = 64 << 10

// UserAgent is sent with every attempt.
const UserAgent = "svc-webhooks/1"

// Results, the attempts_total label: the class of the status, or why there
// was none.
const (
	Result2xx        = "2xx"
	Result3xx        = "3xx"
	Result4xx        = "4xx"
	Result5xx        = "5xx"
	ResultTimeout    = "timeout"
	ResultConnection = "connection"
	ResultRefused    = "refused"
)

// Request is one attempt to send.
type Request struct {
	URL       string
	ID        string
	Timestamp time.Time
	Signature string
	Body      []byte
}

// Response is what an attempt came to.
type Response struct {
	// Status is the HTTP status; 0 when no response came.
	Status int
	// Result is the attempts_total label.
	Result string
	// Error is a short text for the delivery log (never the response
	// body, nor internal detail beyond the kind of failure); empty on 2xx.
	Error    string
	Duration time.Duration
}

// OK says whether the endpoint accepted the event.
func (r Response) OK() bool { return r.Status >= 200 && r.Status < 300 }

// SenderConfig configures a Sender.
type SenderConfig struct {
	// AllowPrivate allows http:// and private, loopback and link-local
	// destinations (the local stack and tests).
	AllowPrivate bool
	// Timeout cuts an attempt, response included.
	Timeout time.Duration
	// MaxIdlePerHost is the connections kept for reuse per endpoint host:
	// EndpointConcurrency.
	MaxIdlePerHost int
}

// Sender posts events. Redirects are not followed (a 3xx is a failure) and
// outside AllowPrivate every connection's address is checked when it is
// made.
type Sender struct {
	client       *http.Client
	allowPrivate bool
}

// NewSender returns a Sender.
func NewSender(cfg SenderConfig) *Sender {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		dialer.Control = dialControl
	}
	transport := &http.Transport{
		// No proxy from the environment: the dialer's check must see the
		// destination itself.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   max(cfg.MaxIdlePerHost, 2),
		IdleConnTimeout:       90 * time.Second,
	}
	return &Sender{
		allowPrivate: cfg.AllowPrivate,
		client: &http.Client{
			Transport: transport,
			Timeout:   cfg.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
	}
}

// Close drops the idle connections.
func (s *Sender) Close() { s.client.CloseIdleConnections() }

// Send makes one attempt.
func (s *Sender) Send(ctx context.Context, r Request) Response {
	started := time.Now()
	u, err := url.Parse(r.URL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return Response{Result: ResultRefused, Error: "invalid url"}
	}
	if u.Scheme == "http" && !s.allowPrivate {
		return Response{Result: ResultRefused, Error: "url must use https"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return Response{Result: ResultRefused, Error: "invalid url"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("webhook-id", r.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(r.Timestamp.Unix(), 10))
	req.Header.Set("webhook-signature", r.Signature)
	resp, err := s.client.Do(req)
	if err != nil {
		out := classify(err)
		out.Duration = time.Since(started)
		return out
	}
	// Read at most MaxResponse so the connection can be reused when the
	// answer is short; a longer one is cut by closing.
	// A 2xx whose body then fails still counts: the endpoint said so.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponse))
	_ = resp.Body.Close()
	out := Response{Status: resp.StatusCode, Duration: time.Since(started)}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		out.Result = Result2xx
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		out.Result, out.Error = Result3xx, "HTTP "+strconv.Itoa(resp.StatusCode)+" (redirects are not followed)"
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		out.Result, out.Error = Result4xx, "HTTP "+strconv.Itoa(resp.StatusCode)
	default:
		out.Result, out.Error = Result5xx, "HTTP "+strconv.Itoa(resp.StatusCode)
	}
	return out
}

// classify turns a transport error into a result and a safe text.
func classify(err error) Response {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var netErr net.Error
	switch {
	case errors.Is(err, errBlockedDial):
		return Response{Result: ResultRefused, Error: "destination address not allowed"}
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return Response{Result: ResultTimeout, Error: "timeout"}
	case errors.Is(err, context.Canceled):
		return Response{Result: ResultConnection, Error: "canceled"}
	case errors.As(err, &dnsErr):
		return Response{Result: ResultConnection, Error: "dns lookup failed"}
	case errors.Is(err, syscall.ECONNREFUSED):
		return Response{Result: ResultConnection, Error: "connection refused"}
	case errors.Is(err, syscall.ECONNRESET):
		return Response{Result: ResultConnection, Error: "connection reset"}
	case errors.As(err, &certErr):
		return Response{Result: ResultConnection, Error: "tls certificate not valid"}
	default:
		return Response{Result: ResultConnection, Error: "connection error"}
	}
}
