package delivery_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/svc-dev/svc/services/webhooks/internal/delivery"
	"github.com/svc-dev/svc/services/webhooks/internal/secret"
)

func TestBackoffFollowsTheScheduleWithJitter(t *testing.T) {
	t.Parallel()
	want := []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour, 10 * time.Hour}
	for i, w := range want {
		n := i + 1
		if got := delivery.Backoff(n, 0.5); got != w {
			t.Errorf("Backoff(%d, 0.5) = %s, want %s", n, got, w)
		}
		lo, hi := delivery.Backoff(n, 0), delivery.Backoff(n, 0.999999)
		if lo != time.Duration(float64(w)*0.9) {
			t.Errorf("Backoff(%d, 0) = %s, want %s (-10%%)", n, lo, time.Duration(float64(w)*0.9))
		}
		if hi <= w || hi > time.Duration(float64(w)*1.1) {
			t.Errorf("Backoff(%d, ~1) = %s, want in (%s, %s]", n, hi, w, time.Duration(float64(w)*1.1))
		}
	}
}

func TestSignatureVerifiesWithTheStandardWebhooksLibrary(t *testing.T) {
	t.Parallel()
	newer, _ := secret.New()
	older, _ := secret.New()
	body := []byte(`{"id":"evt_1","type":"ping"}`)
	at := time.Now()
	sig, err := delivery.Signature("evt_1", at, body, []string{newer, older})
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(sig, " ")
	if len(parts) != 2 || !strings.HasPrefix(parts[0], "v1,") || !strings.HasPrefix(parts[1], "v1,") {
		t.Fatalf("signature header %q, want two v1 values", sig)
	}
	h := http.Header{}
	h.Set("webhook-id", "evt_1")
	h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	for i, s := range []string{newer, older} {
		wh, _ := standardwebhooks.NewWebhook(s)
		h.Set("webhook-signature", parts[i])
		if err := wh.Verify(body, h); err != nil {
			t.Fatalf("signature %d does not verify with its secret: %v", i, err)
		}
	}
	if _, err := delivery.Signature("evt_1", at, body, nil); err == nil {
		t.Fatal("signing without a secret: no error")
	}
}

func TestCheckURLRefusesWhatIsNotPublicHTTPS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		url          string
		allowPrivate bool
		want         error
	}{
		{name: "http outside the local stack", url: "http://example.com/hooks", want: delivery.ErrURLScheme},
		{name: "loopback", url: "https://127.0.0.1/hooks", want: delivery.ErrURLBlocked},
		{name: "metadata", url: "https://169.254.169.254/latest/meta-data", want: delivery.ErrURLBlocked},
		{name: "private", url: "https://10.0.0.1/hooks", want: delivery.ErrURLBlocked},
		{name: "ipv6 loopback", url: "https://[::1]:8443/hooks", want: delivery.ErrURLBlocked},
		{name: "ipv4-mapped loopback", url: "https://[::ffff:127.0.0.1]/hooks", want: delivery.ErrURLBlocked},
		{name: "cgnat", url: "https://100.64.1.1/", want: delivery.ErrURLBlocked},
		{name: "name resolving to loopback", url: "https://localhost:8443/hooks", want: delivery.ErrURLBlocked},
		{name: "unspecified", url: "https://0.0.0.0/", want: delivery.ErrURLBlocked},
		{name: "no host", url: "https:///hooks", want: delivery.ErrURLInvalid},
		{name: "not http", url: "ftp://example.com/", want: delivery.ErrURLInvalid},
		{name: "public address", url: "https://93.184.215.14/hooks", want: nil},
		{name: "local stack: http loopback", url: "http://127.0.0.1:3000/hooks", allowPrivate: true, want: nil},
		{name: "local stack: still http(s) only", url: "file:///etc/passwd", allowPrivate: true, want: delivery.ErrURLInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := delivery.CheckURL(tt.url, tt.allowPrivate); !errors.Is(err, tt.want) {
				t.Fatalf("CheckURL(%q, %v) = %v, want %v", tt.url, tt.allowPrivate, err, tt.want)
			}
		})
	}
}

func TestBlockedAddresses(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255",
		"::1", "::", "fe80::1", "fc00::1", "fd12::1", "ff02::1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "64:ff9b::7f00:1", "2002:7f00:1::1"} {
		if !delivery.Blocked(netip.MustParseAddr(a)) {
			t.Errorf("%s not blocked", a)
		}
	}
	for _, a := range []string{"93.184.215.14", "8.8.8.8", "2606:4700::1111", "64:ff9b::808:808"} {
		if delivery.Blocked(netip.MustParseAddr(a)) {
			t.Errorf("%s blocked", a)
		}
	}
}

func sendTo(t *testing.T, s *delivery.Sender, url string) delivery.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Send(ctx, delivery.Request{URL: url, ID: "evt_1", Timestamp: time.Now(), Signature: "v1,x", Body: []byte(`{}`)})
}

func TestSenderPostsTheHeadersAndBody(t *testing.T) {
	t.Parallel()
	type got struct {
		method string
		h      http.Header
		body   string
	}
	ch := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- got{r.Method, r.Header.Clone(), string(b)}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	s := delivery.NewSender(delivery.SenderConfig{AllowPrivate: true, Timeout: 2 * time.Second})
	at := time.Unix(1700000000, 0)
	resp := s.Send(context.Background(), delivery.Request{URL: srv.URL, ID: "evt_9", Timestamp: at, Signature: "v1,abc v1,def", Body: []byte(`{"a":1}`)})
	if !resp.OK() || resp.Status != 204 || resp.Result != delivery.Result2xx || resp.Error != "" {
		t.Fatalf("response %+v", resp)
	}
	g := <-ch
	if g.method != http.MethodPost || g.body != `{"a":1}` {
		t.Fatalf("%s %q", g.method, g.body)
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "User-Agent": "svc-webhooks/1", "Webhook-Id": "evt_9", "Webhook-Timestamp": "1700000000", "Webhook-Signature": "v1,abc v1,def"} {
		if g.h.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, g.h.Get(k), v)
		}
	}
}

func TestSenderDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/hooks", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) })
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) { followed.Add(1) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	resp := sendTo(t, delivery.NewSender(delivery.SenderConfig{AllowPrivate: true, Timeout: 2 * time.Second}), srv.URL+"/hooks")
	if resp.OK() || resp.Status != http.StatusFound || resp.Result != delivery.Result3xx || !strings.HasPrefix(resp.Error, "HTTP 302") {
		t.Fatalf("response %+v, want a failed 302", resp)
	}
	if followed.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
}

func TestSenderReadsAtMost64KiB(t *testing.T) {
	t.Parallel()
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 32<<10)
		// Up to 1 GiB: a sender reading it all would take long and
		// the test's deadline would fail it.
		for range 1 << 15 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	started := time.Now()
	resp := sendTo(t, delivery.NewSender(delivery.SenderConfig{AllowPrivate: true, Timeout: 5 * time.Second}), srv.URL)
	if !resp.OK() {
		t.Fatalf("response %+v", resp)
	}
	if time.Since(started) > 3*time.Second {
		t.Fatalf("took %s", time.Since(started))
	}
	if written.Load() >= 1<<30 {
		t.Fatal("the whole response was read")
	}
}

func TestSenderRefusesLoopbackAtConnectionTime(t *testing.T) {
	t.Parallel()
	var hit atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit.Add(1) }))
	t.Cleanup(srv.Close)
	// srv.URL is https://127.0.0.1:port; named through "localhost" a
	// rebinding name would pass a check made before, but not the dialer's.
	s := delivery.NewSender(delivery.SenderConfig{Timeout: 2 * time.Second})
	for _, u := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		resp := sendTo(t, s, u)
		if resp.Result != delivery.ResultRefused || resp.Status != 0 || resp.Error != "destination address not allowed" {
			t.Fatalf("%s: response %+v, want refused", u, resp)
		}
	}
	if resp := sendTo(t, s, "http://example.com/"); resp.Result != delivery.ResultRefused {
		t.Fatalf("http outside the local stack: %+v", resp)
	}
	if hit.Load() != 0 {
		t.Fatal("the receiver was reached")
	}
}

func TestSenderClassifiesFailures(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) })
	s := delivery.NewSender(delivery.SenderConfig{AllowPrivate: true, Timeout: 200 * time.Millisecond})
	if resp := sendTo(t, s, hang.URL); resp.Result != delivery.ResultTimeout || resp.Error != "timeout" {
		t.Fatalf("hanging receiver: %+v", resp)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	url := closed.URL
	closed.Close()
	if resp := sendTo(t, s, url); resp.Result != delivery.ResultConnection || resp.Error != "connection refused" {
		t.Fatalf("closed port: %+v", resp)
	}
	fail := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "secret internal stack trace", http.StatusInternalServerError)
	}))
	t.Cleanup(fail.Close)
	if resp := sendTo(t, s, fail.URL); resp.Result != delivery.Result5xx || resp.Error != "HTTP 500" || resp.Status != 500 {
		t.Fatalf("500: %+v", resp)
	}
}
