package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/services/commissions/internal/processor/httpapi"
)

const fuzzSecret = "whsec_fuzz"

// fuzzStack is the real stack behind the real gateway handler, called in
// process (a panic in the route fails the target instead of being
// swallowed by net/http), with a program connected to acct_1, a partner,
// and customers: clicks[0] and clicks[1] plain, clicks[2] with a
// provisional lead.
type fuzzStack struct {
	gw     http.Handler
	clicks []string
}

func (s *fuzzStack) post(tb testing.TB, path string, body []byte, header http.Header) *httptest.ResponseRecorder {
	tb.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	s.gw.ServeHTTP(rec, req)
	return rec
}

func (s *fuzzStack) admin(tb testing.TB, method, path string, body, out any) string {
	tb.Helper()
	raw, _ := json.Marshal(body)
	req := httptest.NewRequest(method, path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+stacktest.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.gw.ServeHTTP(rec, req)
	if rec.Code < 200 || rec.Code > 299 {
		tb.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
	}
	if out != nil {
		var env struct{ Data json.RawMessage }
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || json.Unmarshal(env.Data, out) != nil {
			tb.Fatalf("%s %s: %s", method, path, rec.Body)
		}
	}
	return rec.Header().Get("X-Catalog-Seq")
}

func startFuzzStack(tb testing.TB) *fuzzStack {
	tb.Helper()
	st := stacktest.Start(tb, map[string]string{
		"PROCESSOR_WEBHOOK_SECRET": fuzzSecret,
		"TRACK_CLICK_RATE_LIMIT":   "1000000",
		"TRACK_LEAD_RATE_LIMIT":    "1000000",
		"ADMIN_RATE_LIMIT":         "1000000",
		"BACKSTOP_INTERVAL":        "1h",
		"APPROVE_INTERVAL":         "1h",
	})
	s := &fuzzStack{gw: gateway.New(st.Handlers())}
	var id struct{ ID int64 }
	s.admin(tb, "POST", "/admin/v1/advertisers", map[string]any{"name": "Fuzz brand", "email": "fuzz@brand.example"}, &id)
	s.admin(tb, "POST", "/admin/v1/programs", map[string]any{"advertiser_id": id.ID, "name": "Fuzz", "domain": "brand.example",
		"commission_type": "recurring_percent", "commission_rate": 10, "duration_months": 0, "hold_days": 0, "currency": "USD"}, &id)
	program := id.ID
	s.admin(tb, "POST", "/admin/v1/partners", map[string]any{"name": "Fuzz partner", "email": "fuzz@partners.example"}, &id)
	partner := id.ID
	s.admin(tb, "POST", fmt.Sprintf("/admin/v1/programs/%d/partners", program), map[string]any{"partner_id": partner, "approved": true}, nil)
	s.admin(tb, "POST", fmt.Sprintf("/admin/v1/programs/%d/links", program), map[string]any{"partner_id": partner, "code": "FUZZ", "active": true}, nil)
	seq := s.admin(tb, "PATCH", fmt.Sprintf("/admin/v1/programs/%d", program), map[string]any{
		"processor_connection": map[string]any{"status": "connected", "account_id": "acct_1"}}, nil)
	s.admin(tb, "GET", "/admin/v1/catalog/sync?timeout=10s&seq="+seq, nil, nil)
	for range 3 {
		rec := s.post(tb, "/api/v1/track/click", []byte(`{"affiliate_url":"https://brand.example/?via=FUZZ"}`), nil)
		var c struct {
			ClickID string `json:"click_id"`
		}
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &c) != nil || c.ClickID == "" {
			tb.Fatalf("click: %d %s", rec.Code, rec.Body)
		}
		s.clicks = append(s.clicks, c.ClickID)
	}
	if rec := s.post(tb, "/api/v1/track/lead", []byte(`{"click_id":"`+s.clicks[2]+`","email":"buyer@shop.example"}`), nil); rec.Code != 200 {
		tb.Fatalf("provisional lead: %d %s", rec.Code, rec.Body)
	}
	return s
}

// eventSeeds are processor events of each type and outcome (cust_1_2 and
// cust_1_3 are replaced by the stack's customers), then broken shapes.
var eventSeeds = []string{
	`{"id":"evt_1","type":"checkout.session.completed","account":"acct_1","created":1800000000,"data":{"object":{"id":"cs_1","mode":"payment","payment_status":"paid","amount_total":1000,"currency":"usd","metadata":{"svc_click_id":"cust_1_2","program_id":"1"}}}}`,
	`{"id":"evt_2","type":"checkout.session.completed","account":"acct_1","created":1800000000,"livemode":false,"data":{"object":{"id":"cs_2","mode":"payment","payment_status":"paid","amount_total":500,"currency":"eur","payment_intent":"pi_2","customer":"cus_2","customer_details":{"email":"buyer@shop.example"},"metadata":{"svc_click_id":"cust_1_3"}}}}`,
	`{"id":"evt_3","type":"checkout.session.completed","account":"acct_1","data":{"object":{"id":"cs_3","mode":"payment","payment_status":"no_payment_required","amount_total":0,"currency":"usd","metadata":{"svc_click_id":"cust_1_3"}}}}`,
	`{"id":"evt_4","type":"checkout.session.completed","account":"acct_1","data":{"object":{"id":"cs_4","mode":"subscription","payment_status":"paid","amount_total":1000,"currency":"usd"}}}`,
	`{"id":"evt_5","type":"checkout.session.completed","data":{"object":{"id":"cs_5","mode":"payment","payment_status":"paid","amount_total":1000,"currency":"usd","client_reference_id":"cust_1_2","metadata":{"program_id":"1"}}}}`,
	`{"id":"evt_34","type":"checkout.session.completed","data":{"object":{"id":"cs_34","mode":"payment","payment_status":"paid","amount_total":1000,"currency":"usd","metadata":{"svc_click_id":"cust_1_2","program_id":"7"}}}}`,
	`{"id":"evt_36","type":"checkout.session.completed","account":"acct_1","data":{"object":{"id":"cs_36","mode":"payment","payment_status":"paid","amount_total":1000,"currency":"usd","metadata":{"svc_click_id":"cust_1_` + strings.Repeat("2", 300) + `"}}}}`,
	`{"id":"evt_6","type":"checkout.session.completed","account":"acct_1","data":{"object":{"id":"cs_6","mode":"payment","payment_status":"unpaid","amount_total":1000,"currency":"usd"}}}`,
	`{"id":"evt_7","type":"invoice.payment_succeeded","account":"acct_1","created":1800000000,"data":{"object":{"id":"in_1","customer":"cus_1","amount_paid":1500,"currency":"usd","billing_reason":"subscription_create","parent":{"subscription_details":{"metadata":{"svc_click_id":"cust_1_2"}}},"payments":{"data":[{"payment":{"payment_intent":"pi_7"}}]}}}}`,
	`{"id":"evt_8","type":"invoice.payment_succeeded","account":"acct_1","data":{"object":{"id":"in_2","amount_paid":1500,"currency":"vnd","billing_reason":"subscription_cycle","charge":"ch_8","payment_intent":"pi_8","subscription_details":{"metadata":{"svc_customer_key":"k"}}}}}`,
	`{"id":"evt_9","type":"invoice.payment_succeeded","account":"acct_1","data":{"object":{"amount_paid":1500,"currency":"usd"}}}`,
	`{"id":"evt_10","type":"charge.refunded","account":"acct_1","data":{"object":{"id":"ch_1","amount_refunded":1000,"payment_intent":"pi_2"}}}`,
	`{"id":"evt_40","type":"refund.created","account":"acct_1","data":{"object":{"id":"re_1","amount":300,"currency":"usd","charge":"ch_1","payment_intent":"cs_1","status":"succeeded","reason":"requested_by_customer"}}}`,
	`{"id":"evt_41","type":"refund.updated","account":"acct_1","data":{"object":{"id":"re_2","amount":-3,"currency":"usd","charge":{"id":"ch_1"},"status":"succeeded"}}}`,
	`{"id":"evt_42","type":"refund.created","data":{"object":{"id":"re_3","amount":99999999999999,"currency":"usd","payment_intent":"in_1","status":"succeeded"}}}`,
	`{"id":"evt_43","type":"refund.created","account":"acct_1","data":{"object":{"id":"re_4","amount":100,"currency":"usd","status":"succeeded"}}}`,
	`{"id":"evt_44","type":"charge.refunded","account":"acct_1","data":{"object":{"id":"ch_2","amount_refunded":1000,"currency":"usd","invoice":"in_1"}}}`,
	`{"id":"evt_45","type":"charge.dispute.created","account":"acct_1","data":{"object":{"id":"dp_1","charge":"ch_x","payment_intent":"cs_5","status":"needs_response"}}}`,
	`{"id":"evt_46","type":"charge.dispute.closed","account":"acct_1","data":{"object":{"id":"dp_1","charge":"ch_x","payment_intent":"cs_5","status":"lost"}}}`,
	`{"id":"evt_47","type":"charge.dispute.closed","account":"acct_1","data":{"object":{"id":"dp_2","payment_intent":"in_1","status":"charge_refunded"}}}`,
	`{"id":"evt_48","type":"charge.dispute.closed","data":{"object":{"id":"dp_3","charge":7,"status":"won"}}}`,
	`{"id":"evt_11","type":"customer.created","account":"acct_1","data":{"object":{"id":"cus_1"}}}`,
	`{"id":"evt_12","type":"checkout.session.completed","account":"acct_other","data":{"object":{"id":"cs_12","mode":"payment","payment_status":"paid","amount_total":1000,"currency":"usd"}}}`,
	`{"id":"evt_14","type":"checkout.session.completed","account":"acct_1","data":{"object":{"id":"cs_14","mode":"payment","payment_status":"paid","amount_total":1000,"currency":"gbp","metadata":{"svc_click_id":"cust_1_2"}}}}`,
	`{"id":"evt_18","type":"checkout.session.completed","account":"acct_1","data":{"object":{"id":"cs_18","mode":"payment","payment_status":"paid","amount_total":1000,"currency":"usd","metadata":{"svc_click_id":12,"program_id":1}}}}`,
	`{"id":"evt_19","type":"checkout.session.completed","account":"acct_1","data":{"object":{"id":"cs_19","mode":"payment","payment_status":"paid","amount_total":"1000","currency":"usd"}}}`,
	`{"id":"evt_20","type":"checkout.session.completed","account":"acct_1","data":{"object":{"id":"cs_20","mode":"payment","payment_status":"paid","amount_total":99999999999999999999,"currency":"usd"}}}`,
	`{"id":"evt_21","type":"checkout.session.completed","account":"acct_1","data":{"object":{"id":"cs_21","mode":"payment","payment_status":"paid","amount_total":-5,"currency":"usd","metadata":{"svc_click_id":"cust_1_3"}}}}`,
	`{"id":"evt_22","type":"checkout.session.completed","account":"acct_1","data":{"object":{"id":"cs_22","mode":"payment","payment_status":"paid","amount_total":9223372036854775807,"currency":"usd","metadata":{"svc_click_id":"cust_1_2"}}}}`,
	`{"id":"evt_23","type":"checkout.session.completed","account":"acct_1","data":{"object":{"id":"cs_23","mode":"payment","payment_status":"paid","amount_total":1000,"currency":"usd","metadata":"cust_1_2"}}}`,
	`{"id":"evt_24","type":"invoice.payment_succeeded","account":"acct_1","data":{"object":{"id":"in_24","amount_paid":1000,"currency":"usd","parent":{"subscription_details":{"metadata":{"program_id":"99999999999999999999"}}}}}}`,
	`{"id":"evt_25","type":"checkout.session.completed","created":1e30,"data":{"object":{}}}`,
	`{"id":"evt_26","type":"invoice.payment_succeeded","created":-1,"data":{"object":null}}`,
	`{"id":"evt_27","type":"invoice.payment_succeeded","account":"acct_1","created":9223372036854775807,"data":{"object":{"id":"in_27","amount_paid":1000,"currency":"usd","subscription_details":{"metadata":{"svc_click_id":"cust_1_2"}}}}}`,
	`{"id":"evt_28","type":"checkout.session.completed","data":{"object":"cs_28"}}`,
	`{"id":"evt_29","type":"invoice.payment_succeeded","data":{"object":[1,2]}}`,
	`{"id":"evt_30","type":"charge.refunded","data":{"object":5}}`,
	`{"id":5,"type":"charge.refunded","data":{"object":{}}}`,
	`{"id":"evt_32","type":"charge.refunded"}`,
	`{"id":"","type":"charge.refunded","data":{"object":{}}}`,
	`{"id":"evt_nul","type":"checkout.session.completed","account":"acct_1","data":{"object":{"id":"cs_nul","mode":"payment","payment_status":"paid","amount_total":1000,"currency":"usd","metadata":{"svc_click_id":"cust_1_2\u0000"}}}}`,
	`{"id":"evt_sur","type":"charge.refunded","data":{"object":{"note":"\ud800"}}}`,
	`{"id":"evt_num","type":"charge.refunded","data":{"object":{"n":1e999999}}}`,
	`{"id":"evt_37","type":"checkout.session.completed","account":"acct_1","data":{"object":{"id":" ","mode":"payment","payment_status":"paid","amount_total":1000,"currency":"usd","metadata":{"svc_click_id":"cust_1_2"}}}}`,
	`{"id":"evt_38","type":"invoice.payment_succeeded","account":"acct_1","created":1,"data":{"object":{"id":"in_38","amount_paid":1000,"currency":"usd","subscription_details":{"metadata":{"svc_click_id":"cust_1_2"}}}}}`,
	`[]`, `null`, ``, `{"a":1}{"b":2}`,
}

func checkJSON(t *testing.T, what, body string, rec *httptest.ResponseRecorder) *httptest.ResponseRecorder {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("%s %q: %d %s", what, body, rec.Code, rec.Body.String())
	}
	if !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("%s %q: content type %q", what, body, rec.Header().Get("Content-Type"))
	}
	return rec
}

// FuzzProcessorWebhook sends any body, correctly signed (so event parsing,
// the store and the sale path are reached), twice, to the webhook of the
// real stack through the gateway: never a panic, never a 5xx, always JSON,
// and an event acknowledged once is a duplicate the second time. The
// seeds' customers are the stack's (cust_1_2 → clicks[0], cust_1_3 →
// clicks[2], the provisional one). Needs the test Postgres.
func FuzzProcessorWebhook(f *testing.F) {
	s := startFuzzStack(f)
	for _, seed := range eventSeeds {
		f.Add(strings.NewReplacer("cust_1_2", s.clicks[0], "cust_1_3", s.clicks[2]).Replace(seed))
	}
	f.Fuzz(func(t *testing.T, body string) {
		signed := http.Header{httpapi.SignatureHeader: {httpapi.Sign(fuzzSecret, time.Now(), []byte(body))}}
		first := checkJSON(t, "webhook", body, s.post(t, httpapi.WebhookPath, []byte(body), signed))
		again := checkJSON(t, "webhook again", body, s.post(t, httpapi.WebhookPath, []byte(body), signed))
		if first.Code == http.StatusOK {
			var got map[string]any
			if err := json.Unmarshal(again.Body.Bytes(), &got); err != nil || again.Code != http.StatusOK || got["duplicate"] != true {
				t.Fatalf("event %q redelivered: %d %s", body, again.Code, again.Body.String())
			}
		}
	})
}

func TestProcessorWebhookSignature(t *testing.T) {
	s := startFuzzStack(t)
	now := time.Now()
	for i, tc := range []struct {
		name      string
		signature func(body []byte) string
		want      int
	}{
		{"missing signature is 400", func([]byte) string { return "" }, http.StatusBadRequest},
		{"signature without v1 is 400", func([]byte) string { return fmt.Sprintf("t=%d", now.Unix()) }, http.StatusBadRequest},
		{"signature under another secret is 400", func(b []byte) string { return httpapi.Sign("whsec_other", now, b) }, http.StatusBadRequest},
		{"signature of another body is 400", func(b []byte) string { return httpapi.Sign(fuzzSecret, now, append(b, ' ')) }, http.StatusBadRequest},
		{"timestamp over 5 minutes old is 400", func(b []byte) string { return httpapi.Sign(fuzzSecret, now.Add(-6*time.Minute), b) }, http.StatusBadRequest},
		{"correct signature is 200", func(b []byte) string { return httpapi.Sign(fuzzSecret, now, b) }, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(fmt.Sprintf(`{"id":"evt_sig_%d","type":"checkout.session.completed","account":"acct_1","data":{"object":{"id":"cs_sig_%d","mode":"payment","payment_status":"paid","amount_total":1000,"currency":"usd","metadata":{"svc_click_id":%q}}}}`,
				i, i, s.clicks[1]))
			header := http.Header{}
			if sig := tc.signature(body); sig != "" {
				header.Set(httpapi.SignatureHeader, sig)
			}
			rec := checkJSON(t, "webhook", string(body), s.post(t, httpapi.WebhookPath, body, header))
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body.String())
			}
			if tc.want == http.StatusOK {
				if !strings.Contains(rec.Body.String(), `"outcome":"sale_recorded"`) {
					t.Fatalf("body %s, want a recorded sale", rec.Body.String())
				}
				return
			}
			if !strings.Contains(rec.Body.String(), httpapi.SignatureHeader) {
				t.Fatalf("body %s does not name the signature header", rec.Body.String())
			}
		})
	}
}

// FuzzProcessorSignature sends one event under any Processor-Signature
// header to the webhook of the real stack: never a panic or a 5xx, always
// JSON, and accepted (200) only when the header carries, for one of its
// t= values within 5 minutes, the v1 HMAC this test computes on its own
// from the secret. Needs the test Postgres.
func FuzzProcessorSignature(f *testing.F) {
	s := startFuzzStack(f)
	body := []byte(`{"id":"evt_sig_fuzz","type":"customer.created","account":"acct_1","data":{"object":{"id":"cus_1"}}}`)
	now := time.Now()
	good := httpapi.Sign(fuzzSecret, now, body)
	ts := fmt.Sprint(now.Unix())
	for _, seed := range []string{
		good, "t=" + ts + ",v1=00" + good[len("t="+ts+",v1=00"):], good + ",v1=abc", "v1=" + good[len("t="+ts+",v1="):] + ",t=" + ts,
		"t=" + ts + ",v1=" + strings.Repeat("g", 64), "t=" + ts + ",v0=" + good[len("t="+ts+",v1="):], "t=,v1=", "t=-1,v1=00", ",,,",
		"t=99999999999999999999999,v1=00", "t=" + ts + ",v1=" + strings.Repeat("a", 10000), "t=" + ts + " , v1 = x", "\x00", "",
		httpapi.Sign(fuzzSecret, now.Add(-6*time.Minute), body), httpapi.Sign("whsec_other", now, body),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		h := http.Header{}
		h.Set(httpapi.SignatureHeader, header)
		rec := checkJSON(t, "signature", header, s.post(t, httpapi.WebhookPath, body, h))
		accepted := rec.Code == http.StatusOK
		if !accepted && rec.Code != http.StatusBadRequest {
			t.Fatalf("header %q: %d %s", header, rec.Code, rec.Body.String())
		}
		if accepted != validSignature(header, body, time.Now()) {
			t.Fatalf("header %q answered %d %s", header, rec.Code, rec.Body.String())
		}
	})
}

// validSignature is the processor's rule, written apart from the
// handler's: some t= within 5 minutes of now and some v1= equal to the
// hex HMAC-SHA256 of "<t>.<body>" under the secret (hex in either case).
func validSignature(header string, body []byte, now time.Time) bool {
	var stamps, sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(part, "=")
		switch {
		case !ok:
		case k == "t":
			stamps = append(stamps, v)
		case k == "v1":
			sigs = append(sigs, v)
		}
	}
	for _, ts := range stamps {
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || now.Sub(time.Unix(sec, 0)).Abs() > 5*time.Minute {
			continue
		}
		want := httpapi.Sign(fuzzSecret, time.Unix(sec, 0), body)
		want = want[strings.Index(want, "v1=")+3:]
		for _, sig := range sigs {
			// Hex digits in either case name the same MAC.
			if strings.EqualFold(sig, want) {
				return true
			}
		}
	}
	return false
}
