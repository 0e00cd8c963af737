package attribution_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/deploy/devstack/seed"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/errkind"
	accounts "github.com/svc-dev/svc/services/accounts/server"
	"github.com/svc-dev/svc/services/commissions/internal/attribution"
	tracking "github.com/svc-dev/svc/services/tracking/server"
)

// world is a catalog made through accounts' admin API and the customers
// made on tracking's public routes, as a brand's integration makes them.
type world struct {
	t                  *testing.T
	tracking           string // tracking's base URL (its own port)
	progA, progB       int64
	partnerA, partnerB int64
	keyA               string
}

func newWorld(t *testing.T, trackingURL string, admin *seed.Client) *world {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var adv, progA, progB, partnerA, partnerB, key struct {
		ID  int64  `json:"id"`
		Key string `json:"key"`
	}
	must(admin.Call(ctx, "POST", "/admin/v1/advertisers", map[string]any{"name": "Attr Brand", "email": "attr@brand.example"}, &adv))
	for _, p := range []struct {
		name string
		out  any
	}{{"A", &progA}, {"B", &progB}} {
		must(admin.Call(ctx, "POST", "/admin/v1/programs", map[string]any{"advertiser_id": adv.ID, "name": p.name, "domain": "brand.example",
			"commission_type": "percent", "commission_rate": 10}, p.out))
	}
	must(admin.Call(ctx, "POST", "/admin/v1/partners", map[string]any{"name": "PA", "email": "pa@partners.example"}, &partnerA))
	must(admin.Call(ctx, "POST", "/admin/v1/partners", map[string]any{"name": "PB", "email": "pb@partners.example"}, &partnerB))
	for _, l := range []struct {
		prog, partner int64
		code          string
	}{{progA.ID, partnerA.ID, "ATTRA"}, {progB.ID, partnerB.ID, "ATTRB"}} {
		must(admin.Call(ctx, "POST", fmt.Sprintf("/admin/v1/programs/%d/partners", l.prog), map[string]any{"partner_id": l.partner, "approved": true}, nil))
		must(admin.Call(ctx, "POST", fmt.Sprintf("/admin/v1/programs/%d/links", l.prog), map[string]any{"partner_id": l.partner, "code": l.code, "active": true}, nil))
	}
	must(admin.Call(ctx, "POST", fmt.Sprintf("/admin/v1/programs/%d/keys", progA.ID), map[string]any{"test": false}, &key))
	must(admin.Sync(ctx, 30*time.Second))
	return &world{t: t, tracking: trackingURL, progA: progA.ID, progB: progB.ID, partnerA: partnerA.ID, partnerB: partnerB.ID, keyA: key.Key}
}

// post calls a public tracking route and decodes the answer.
func (w *world) post(path, body, key string) map[string]any {
	w.t.Helper()
	req, err := http.NewRequest("POST", w.tracking+path, strings.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := jsonDecode(resp, &out); err != nil || resp.StatusCode != 200 {
		w.t.Fatalf("%s: %d %v %v", path, resp.StatusCode, out, err)
	}
	return out
}

// click records a click on the link code and returns its click id.
func (w *world) click(code string) string {
	w.t.Helper()
	out := w.post("/api/v1/track/click", fmt.Sprintf(`{"affiliate_url":"https://brand.example/landing?via=%s"}`, code), "")
	cid, _ := out["click_id"].(string)
	if cid == "" {
		w.t.Fatalf("click %s: %v", code, out)
	}
	return cid
}

// lead settles a lead (server mode, program A's key) for the click.
func (w *world) lead(cid, customerKey string) {
	w.t.Helper()
	w.post("/api/v1/track/lead", fmt.Sprintf(`{"click_id":%q,"customer_key":%q}`, cid, customerKey), w.keyA)
}

var txnSeq sync.Mutex
var txnN int

func txn() string {
	txnSeq.Lock()
	defer txnSeq.Unlock()
	txnN++
	return fmt.Sprintf("attr_client_%d_%d", time.Now().UnixNano(), txnN)
}

func wantKind(t *testing.T, err error, sentinel, kind error) *attribution.Error {
	t.Helper()
	var e *attribution.Error
	if !errors.Is(err, sentinel) || !errors.Is(err, kind) || !errors.As(err, &e) {
		t.Fatalf("error %v, want %v (kind %v) as *attribution.Error", err, sentinel, kind)
	}
	return e
}

// The client against the real tracking (and accounts for the catalog) of
// the stack: every answer of the contract, the deadline and the trace.
func TestAttributeAgainstTracking(t *testing.T) {
	t.Parallel()
	st := stacktest.Start(t, nil, tracking.Name, accounts.Name)
	trackingURL := st.URL(tracking.Name)
	admin := &seed.Client{BaseURL: st.URL(accounts.Name), AdminToken: stacktest.AdminToken, HTTP: http.DefaultClient}
	w := newWorld(t, trackingURL, admin)
	client, err := attribution.New(trackingURL, stacktest.InternalToken, 5*time.Second,
		attribution.WithTracing(nil, propagation.TraceContext{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	paid := time.Now().Add(-time.Hour).Truncate(time.Second)

	cidA := w.click("ATTRA")
	w.lead(cidA, "buyer-a")
	first := attribution.Request{ProgramID: w.progA, TransactionID: txn(), ClickID: cidA, AmountCents: 4900, Currency: "USD",
		OccurredAt: paid, Source: attribution.SourceAPI}
	var decided attribution.Decision

	t.Run("attributed: the first partner, the customer converted", func(t *testing.T) {
		d, err := client.Attribute(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Attributed() || d.Outcome != attribution.OutcomeAttributed || d.ClickID != cidA || d.PartnerID != w.partnerA ||
			d.CustomerID == 0 || d.LinkID == 0 || d.CustomerStatus != "conversion" || d.Refusal != nil || d.Replayed {
			t.Fatalf("decision %+v", d)
		}
		if d.FirstPurchaseDate == nil || !d.FirstPurchaseDate.Equal(paid) {
			t.Fatalf("first_purchase_date %v, want %v", d.FirstPurchaseDate, paid)
		}
		decided = d
	})

	t.Run("replay: the stored decision, replayed", func(t *testing.T) {
		again := first
		again.AmountCents = 1 // whatever the body: the id decides
		d, err := client.Attribute(ctx, again)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Replayed {
			t.Fatalf("not replayed: %+v", d)
		}
		d.Replayed = false
		if fmt.Sprint(d) != fmt.Sprint(decided) || !d.FirstPurchaseDate.Equal(*decided.FirstPurchaseDate) {
			t.Fatalf("replay %+v, first %+v", d, decided)
		}
	})

	t.Run("the id for another program: decided for that program, never the other's decision", func(t *testing.T) {
		other := first
		other.ProgramID = w.progB
		d, err := client.Attribute(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		if d.Attributed() || d.Replayed || d.Refusal == nil || d.Refusal.Message != "No affiliate attribution found for this customer in this program" {
			t.Fatalf("%+v", d)
		}
	})

	t.Run("refused: another program's click id", func(t *testing.T) {
		cidB := w.click("ATTRB")
		d, err := client.Attribute(ctx, attribution.Request{ProgramID: w.progA, TransactionID: txn(), ClickID: cidB, AmountCents: 100,
			Currency: "usd", OccurredAt: time.Now(), Source: attribution.SourceProcessor})
		if err != nil {
			t.Fatal(err)
		}
		if d.Attributed() || d.Outcome != attribution.OutcomeRefused || d.ClickID != cidB || d.Refusal == nil || d.Refusal.Code != "no_attribution" ||
			d.Refusal.Message != "No affiliate attribution found for this customer in this program" || d.Replayed {
			t.Fatalf("decision %+v (refusal %+v)", d, d.Refusal)
		}
	})

	t.Run("customer not found: ErrCustomerNotFound with tracking's message", func(t *testing.T) {
		_, err := client.Attribute(ctx, attribution.Request{ProgramID: w.progA, TransactionID: txn(), CustomerKey: "nobody", AmountCents: 100,
			Currency: "USD", OccurredAt: time.Now(), Source: attribution.SourceAPI})
		e := wantKind(t, err, attribution.ErrCustomerNotFound, errkind.NotFound)
		if e.Status != 404 || e.Code != "customer_not_found" || e.Message != "Customer not found. Provide customer_key or click_id." {
			t.Fatalf("%+v", e)
		}
	})

	t.Run("a request tracking refuses: ErrInvalid with its message", func(t *testing.T) {
		_, err := client.Attribute(ctx, attribution.Request{ProgramID: w.progA, TransactionID: txn(), ClickID: cidA, AmountCents: 100,
			Currency: "GBP", OccurredAt: time.Now(), Source: attribution.SourceAPI})
		e := wantKind(t, err, attribution.ErrInvalid, errkind.Invalid)
		if e.Status != 400 || e.Message != "currency is required: one of USD, EUR, VND" {
			t.Fatalf("%+v", e)
		}
	})

	t.Run("a token tracking does not hold: ErrUnavailable, the token in no error", func(t *testing.T) {
		const wrong = "not-the-internal-token"
		bad, err := attribution.New(trackingURL, wrong, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, err = bad.Attribute(ctx, first)
		e := wantKind(t, err, attribution.ErrUnavailable, errkind.Unavailable)
		if e.Status != 401 || e.Code != "unauthorized" || strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), stacktest.InternalToken) {
			t.Fatalf("%+v: %v", e, err)
		}
	})

	t.Run("the trace context reaches tracking (traceparent of the caller's trace)", func(t *testing.T) {
		target, _ := url.Parse(trackingURL)
		proxy := httputil.NewSingleHostReverseProxy(target)
		var mu sync.Mutex
		var seen, auth string
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen, auth = r.Header.Get("traceparent"), r.Header.Get("Authorization")
			mu.Unlock()
			proxy.ServeHTTP(rw, r)
		}))
		defer srv.Close()
		traced, err := attribution.New(srv.URL, stacktest.InternalToken, 5*time.Second, attribution.WithTracing(nil, propagation.TraceContext{}))
		if err != nil {
			t.Fatal(err)
		}
		sc := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
			TraceFlags: trace.FlagsSampled,
		})
		d, err := traced.Attribute(trace.ContextWithSpanContext(ctx, sc), first)
		if err != nil || !d.Replayed {
			t.Fatalf("through the proxy: %+v %v", d, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if !strings.HasPrefix(seen, "00-"+sc.TraceID().String()+"-") {
			t.Fatalf("traceparent %q, want trace %s", seen, sc.TraceID())
		}
		if auth != "Bearer "+stacktest.InternalToken {
			t.Fatalf("Authorization %q", auth)
		}
	})

	t.Run("a server slower than the deadline: ErrUnavailable at the deadline", func(t *testing.T) {
		release := make(chan struct{})
		slow := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer slow.Close()
		defer close(release)
		quick, err := attribution.New(slow.URL, "t", 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = quick.Attribute(ctx, first)
		took := time.Since(start)
		wantKind(t, err, attribution.ErrUnavailable, errkind.Unavailable)
		if !errors.Is(err, context.DeadlineExceeded) || took > 2*time.Second {
			t.Fatalf("after %s: %v", took, err)
		}
	})

	t.Run("tracking stopped: ErrUnavailable within the deadline", func(t *testing.T) {
		if err := st.Instance(tracking.Name).Stop(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := client.Attribute(ctx, first)
		took := time.Since(start)
		e := wantKind(t, err, attribution.ErrUnavailable, errkind.Unavailable)
		if e.Status != 0 || took > client.Timeout() {
			t.Fatalf("after %s: %+v", took, e)
		}
	})
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, url, token string
		timeout          time.Duration
		ok               bool
	}{
		{"http URL", "http://tracking:8080", "secret-token", 0, true},
		{"trailing slash", "https://tracking.example/", "secret-token", time.Second, true},
		{"no scheme", "tracking:8080", "secret-token", 0, false},
		{"no host", "http://", "secret-token", 0, false},
		{"no token", "http://tracking:8080", "", 0, false},
		{"negative timeout", "http://tracking:8080", "secret-token", -time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cl, err := attribution.New(c.url, c.token, c.timeout)
			if (err == nil) != c.ok {
				t.Fatalf("err %v, want ok %v", err, c.ok)
			}
			if err != nil && strings.Contains(err.Error(), c.token) && c.token != "" {
				t.Fatalf("token in error %v", err)
			}
			if c.ok && c.timeout == 0 && cl.Timeout() != attribution.DefaultTimeout {
				t.Fatalf("timeout %s", cl.Timeout())
			}
		})
	}
}

func jsonDecode(resp *http.Response, out any) error {
	return json.NewDecoder(resp.Body).Decode(out)
}
