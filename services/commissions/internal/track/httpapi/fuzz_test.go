package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
)

// fuzzStack is the real stack behind the real gateway handler (called in
// process, so a panic in a route fails the fuzz target instead of being
// swallowed by net/http), with a program, its live key, an attributed
// sale (fuzz_sale_1) and a few fresh customers for the seeds to use.
type fuzzStack struct {
	gw     http.Handler
	key    string
	pool   *pgxpool.Pool // commissions' schema
	clicks []string
}

func (s *fuzzStack) post(tb testing.TB, path, key string, body []byte) *httptest.ResponseRecorder {
	tb.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	rec := httptest.NewRecorder()
	s.gw.ServeHTTP(rec, req)
	return rec
}

// admin calls the admin API and decodes data into out (when not nil).
func (s *fuzzStack) admin(tb testing.TB, method, path string, body, out any) string {
	tb.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		tb.Fatal(err)
	}
	var in *bytes.Reader
	if body != nil {
		in = bytes.NewReader(raw)
	} else {
		in = bytes.NewReader(nil)
	}
	req := httptest.NewRequest(method, path, in)
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

func startFuzzStack(f *testing.F) *fuzzStack {
	f.Helper()
	st := stacktest.Start(f, map[string]string{
		"TRACK_CLICK_RATE_LIMIT": "1000000",
		"TRACK_SALE_RATE_LIMIT":  "1000000",
		"FAILED_AUTH_RATE_LIMIT": "1000000",
		"ADMIN_RATE_LIMIT":       "1000000",
		// The backstop stays out of the way of the before/after counts.
		"BACKSTOP_INTERVAL": "1h",
		"APPROVE_INTERVAL":  "1h",
	})
	s := &fuzzStack{gw: gateway.New(st.Handlers()), pool: st.Instance("commissions").Platform().Pool}
	var id struct{ ID int64 }
	s.admin(f, "POST", "/admin/v1/advertisers", map[string]any{"name": "Fuzz brand", "email": "fuzz@brand.example"}, &id)
	// recurring_percent, lifetime: every attributed sale of a customer
	// computes a commission, so amounts reach the money arithmetic.
	s.admin(f, "POST", "/admin/v1/programs", map[string]any{"advertiser_id": id.ID, "name": "Fuzz", "domain": "brand.example",
		"commission_type": "recurring_percent", "commission_rate": 10, "duration_months": 0, "hold_days": 0, "currency": "USD"}, &id)
	program := id.ID
	s.admin(f, "POST", "/admin/v1/partners", map[string]any{"name": "Fuzz partner", "email": "fuzz@partners.example"}, &id)
	partner := id.ID
	s.admin(f, "POST", fmt.Sprintf("/admin/v1/programs/%d/partners", program), map[string]any{"partner_id": partner, "approved": true}, nil)
	s.admin(f, "POST", fmt.Sprintf("/admin/v1/programs/%d/links", program), map[string]any{"partner_id": partner, "code": "FUZZ", "active": true}, nil)
	var k struct{ Key string }
	seq := s.admin(f, "POST", fmt.Sprintf("/admin/v1/programs/%d/keys", program), map[string]any{"test": false}, &k)
	s.key = k.Key
	s.admin(f, "GET", "/admin/v1/catalog/sync?timeout=10s&seq="+seq, nil, nil)
	for range 3 {
		rec := s.post(f, "/api/v1/track/click", "", []byte(`{"affiliate_url":"https://brand.example/?via=FUZZ"}`))
		var c struct {
			ClickID string `json:"click_id"`
		}
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &c) != nil || c.ClickID == "" {
			f.Fatalf("click: %d %s", rec.Code, rec.Body)
		}
		s.clicks = append(s.clicks, c.ClickID)
	}
	// The customer of clicks[2] is known by a key too.
	s.post(f, "/api/v1/track/lead", s.key, []byte(`{"click_id":"`+s.clicks[2]+`","customer_key":"fuzz-customer"}`))
	rec := s.post(f, "/api/v1/track/sale", s.key, []byte(`{"transaction_id":"fuzz_sale_1","amount_cents":10000,"currency":"USD","click_id":"`+s.clicks[0]+`"}`))
	if rec.Code != 200 {
		f.Fatalf("the fixture's sale: %d %s", rec.Code, rec.Body)
	}
	return s
}

// ledgerState is every row count and total a sale or refund call changes
// before it answers (the outbox is left out: a refund's notifications are
// written after its answer, so they may land during the next call).
func (s *fuzzStack) ledgerState(tb testing.TB) string {
	tb.Helper()
	var out string
	err := s.pool.QueryRow(context.Background(), `SELECT concat_ws(' ',
		(SELECT count(*) FROM sales), (SELECT coalesce(sum(refunded_cents), 0) FROM sales),
		(SELECT count(*) FROM commissions), (SELECT coalesce(sum(refunded_amount), 0) FROM commissions),
		(SELECT count(*) FROM refunds), (SELECT count(*) FROM balance_entries))`).Scan(&out)
	if err != nil {
		tb.Fatalf("ledger state: %v", err)
	}
	return out
}

// errorNames are the platform envelope's error.name by status.
var errorNames = map[int]string{400: "BadRequestError", 401: "UnauthorizedError", 403: "ForbiddenError", 404: "NotFoundError",
	409: "ConflictError", 410: "GoneError", 413: "PayloadTooLargeError", 415: "UnsupportedMediaTypeError", 422: "UnprocessableEntityError"}

// errorCodes are the stable error.code values of sale and refund by
// status (the spec's Errors section; any other 4xx is invalid_request).
var errorCodes = map[int][]string{400: {"invalid_request", "no_attribution"}, 401: {"unauthorized"}, 404: {"not_found"},
	409: {"duplicate_transaction"}, 422: {"unsupported_currency"}}

// checkAnswer: never a 5xx, always JSON: a success body on 200, the
// platform envelope with the route's error.code otherwise.
func checkAnswer(t *testing.T, route string, body []byte, rec *httptest.ResponseRecorder) {
	t.Helper()
	raw := rec.Body.Bytes()
	fail := func(why string) {
		t.Helper()
		t.Fatalf("%s %q: %s: %d %s", route, body, why, rec.Code, raw)
	}
	if rec.Code >= 500 {
		fail("a 5xx")
	}
	if !json.Valid(raw) || !utf8.Valid(raw) {
		fail("not JSON")
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		fail("not a JSON object")
	}
	if rec.Code == http.StatusOK {
		if string(m["success"]) != "true" {
			fail("a 200 without success: true")
		}
		return
	}
	var env struct {
		Data  *json.RawMessage `json:"data"`
		Error *struct {
			Status  int             `json:"status"`
			Name    string          `json:"name"`
			Message string          `json:"message"`
			Details json.RawMessage `json:"details"`
			Code    string          `json:"code"`
		} `json:"error"`
	}
	if _, hasData := m["data"]; !hasData || json.Unmarshal(raw, &env) != nil || env.Data != nil || env.Error == nil {
		fail("not the platform envelope")
	}
	e := env.Error
	if e.Status != rec.Code || (errorNames[rec.Code] != "" && e.Name != errorNames[rec.Code]) || e.Message == "" ||
		len(e.Details) == 0 || e.Details[0] != '{' {
		fail("envelope fields")
	}
	if strings.ContainsRune(e.Message, 0) {
		fail("a NUL in error.message")
	}
	codes, ok := errorCodes[rec.Code]
	if !ok {
		codes = []string{"invalid_request"}
	}
	found := false
	for _, c := range codes {
		found = found || e.Code == c
	}
	if !found {
		fail(fmt.Sprintf("error.code %q, want one of %v", e.Code, codes))
	}
}

// FuzzSaleAndRefund posts each body to POST /api/v1/track/sale and POST
// /api/v1/track/refund of the real stack (gateway, commissions, tracking,
// Postgres) with a live key: never a 5xx or a panic, every answer JSON in
// the platform envelope or a success body, and a refusal writes nothing
// (sales, commissions, refunds, balance entries). `go test` runs
// the seeds only; `go test -fuzz FuzzSaleAndRefund` explores (each worker
// process builds its own stack).
func FuzzSaleAndRefund(f *testing.F) {
	s := startFuzzStack(f)
	c0, c1, c2 := s.clicks[0], s.clicks[1], s.clicks[2]
	huge := strings.Repeat("9", 400)
	deep := strings.Repeat(`{"a":`, 2000) + "1" + strings.Repeat("}", 2000)
	deepArr := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	long := strings.Repeat("x", 300)
	for _, seed := range []string{
		// Empty and wrong top-level types.
		``, ` `, `{}`, `null`, `[]`, `"sale"`, `0`, `true`, `{`, `}`, `{"transaction_id":"x"} {}`, `{"transaction_id":"x"}]`,
		// Valid ones: attributed sales (click id, customer key), a test
		// sale, refunds of the fixture's sale (partial, repeated, whole).
		`{"transaction_id":"fz_ok_1","amount_cents":1000,"currency":"USD","click_id":"` + c1 + `"}`,
		`{"transaction_id":"fz_ok_2","amount_cents":2500,"currency":"EUR","customer_key":"fuzz-customer"}`,
		`{"transaction_id":"fz_ok_3","amount_cents":100000,"currency":"VND","click_id":"` + c2 + `","customer_key":"fuzz-customer"}`,
		`{"transaction_id":"fz_test_1","amount_cents":1000,"currency":"USD","additional_data":{"test_mode":true}}`,
		`{"transaction_id":"fuzz_sale_1","refund_amount_cents":100,"refund_id":"r1","reason":"refund"}`,
		`{"transaction_id":"fuzz_sale_1","refund_amount_cents":100}`,
		`{"transaction_id":"fuzz_sale_1","refund_amount_cents":100}`,
		`{"transaction_id":"fuzz_sale_1","reason":"chargeback","refund_reason":"disputed"}`,
		`{"transaction_id":"fuzz_sale_1","amount_cents":10000,"currency":"USD","click_id":"` + c0 + `"}`,
		// NUL characters in every field, in keys, and raw.
		`{"transaction_id":"a\u0000b","amount_cents":100,"currency":"USD","click_id":"` + c1 + `"}`,
		`{"transaction_id":"fz_nul_1","amount_cents":100,"currency":"US\u0000D","click_id":"` + c1 + `"}`,
		`{"transaction_id":"fz_nul_2","amount_cents":100,"currency":"USD","click_id":"` + c1 + `\u0000"}`,
		`{"transaction_id":"fz_nul_3","amount_cents":100,"currency":"USD","customer_key":"\u0000"}`,
		`{"transaction_id":"fz_nul_4","amount_cents":100,"currency":"USD","click_id":"` + c1 + `","provider":"manual\u0000"}`,
		`{"transaction_id":"fz_nul_5","amount_cents":100,"currency":"USD","click_id":"` + c1 + `","provider_payment_id":"p\u0000"}`,
		`{"transaction_id":"fz_nul_6","amount_cents":100,"currency":"USD","click_id":"` + c1 + `","occurred_at":"2026-01-01T00:00:00Z\u0000"}`,
		`{"transaction_id":"fz_nul_7","amount_cents":100,"currency":"USD","additional_data":{"test_mode":true,"note":"\u0000"}}`,
		`{"transaction_id":"fuzz_sale_1","refund_id":"r\u0000","refund_amount_cents":1}`,
		`{"transaction_id":"fuzz_sale_1","refund_reason":"\u0000","refund_amount_cents":1}`,
		`{"transaction_id":"fuzz_sale_1","reason":"refund\u0000"}`,
		`{"transaction_id":"fuzz_sale_1\u0000"}`,
		`{"transaction\u0000_id":"fuzz_sale_1"}`,
		"{\"transaction_id\":\"a\x00b\",\"amount_cents\":1,\"currency\":\"USD\"}",
		"\x00",
		// Invalid UTF-8 and lone surrogates.
		"{\"transaction_id\":\"\xff\xfe\",\"amount_cents\":100,\"currency\":\"USD\",\"click_id\":\"" + c1 + "\"}",
		"{\"transaction_id\":\"fz_utf_1\",\"amount_cents\":100,\"currency\":\"\xc3\",\"click_id\":\"" + c1 + "\"}",
		"{\"transaction_id\":\"fz_utf_2\",\"amount_cents\":100,\"currency\":\"USD\",\"customer_key\":\"\xed\xa0\x80\"}",
		"{\"transaction_id\":\"fuzz_sale_1\",\"refund_reason\":\"\xff\",\"refund_amount_cents\":1}",
		"{\"\xff\":1}",
		`{"transaction_id":"\ud800","amount_cents":100,"currency":"USD","click_id":"` + c1 + `"}`,
		`{"transaction_id":"fuzz_sale_1","refund_id":"\udfff","refund_amount_cents":1}`,
		// Huge and odd numbers.
		`{"transaction_id":"fz_num_1","amount_cents":` + huge + `,"currency":"USD","click_id":"` + c1 + `"}`,
		`{"transaction_id":"fz_num_2","amount_cents":9223372036854775807,"currency":"USD","click_id":"` + c1 + `"}`,
		`{"transaction_id":"fz_num_3","amount_cents":9223372036854775808,"currency":"USD","click_id":"` + c1 + `"}`,
		`{"transaction_id":"fz_num_4","amount_cents":9223372036854775807,"currency":"VND","click_id":"` + c2 + `"}`,
		`{"transaction_id":"fz_num_5","amount_cents":-1,"currency":"USD","click_id":"` + c1 + `"}`,
		// Found by this target: ten sales near the int64 limit for one
		// partner overflowed the balance and left the tenth reserved;
		// amounts are capped at 10^12 now.
		`{"transaction_id":"fz_bal_0","amount_cents":9223372036854775807,"currency":"USD","click_id":"` + c1 + `","reason":"x"}`,
		`{"transaction_id":"fz_bal_1","amount_cents":1000000000000,"currency":"USD","click_id":"` + c1 + `","reason":"x"}`,
		`{"transaction_id":"fz_bal_2","amount_cents":1000000000001,"currency":"USD","click_id":"` + c1 + `","reason":"x"}`,
		`{"transaction_id":"fz_num_6","amount_cents":0,"currency":"USD","click_id":"` + c1 + `"}`,
		`{"transaction_id":"fz_num_7","amount_cents":1.5,"currency":"USD","click_id":"` + c1 + `"}`,
		`{"transaction_id":"fz_num_8","amount_cents":1e2,"currency":"USD","click_id":"` + c1 + `"}`,
		`{"transaction_id":"fz_num_9","amount_cents":1e400,"currency":"USD","click_id":"` + c1 + `"}`,
		`{"transaction_id":"fz_num_10","amount_cents":-0,"currency":"USD","click_id":"` + c1 + `"}`,
		`{"transaction_id":"fuzz_sale_1","refund_amount_cents":9223372036854775807}`,
		`{"transaction_id":"fuzz_sale_1","refund_amount_cents":` + huge + `}`,
		`{"transaction_id":"fuzz_sale_1","refund_amount_cents":-5}`,
		`{"transaction_id":"fuzz_sale_1","refund_amount_cents":0.5}`,
		// Wrong types.
		`{"transaction_id":123,"amount_cents":100,"currency":"USD"}`,
		`{"transaction_id":"fz_type_1","amount_cents":"100","currency":"USD","click_id":"` + c1 + `"}`,
		`{"transaction_id":"fz_type_2","amount_cents":100,"currency":840,"click_id":"` + c1 + `"}`,
		`{"transaction_id":"fz_type_3","amount_cents":100,"currency":"USD","click_id":{"id":"` + c1 + `"}}`,
		`{"transaction_id":"fz_type_4","amount_cents":100,"currency":"USD","click_id":"` + c1 + `","livemode":"yes"}`,
		`{"transaction_id":"fz_type_5","amount_cents":100,"currency":"USD","additional_data":[]}`,
		`{"transaction_id":"fz_type_6","amount_cents":100,"currency":"USD","additional_data":{"test_mode":"true"}}`,
		`{"transaction_id":"fz_type_7","amount_cents":100,"currency":"USD","occurred_at":1700000000,"click_id":"` + c1 + `"}`,
		`{"transaction_id":"fz_type_8","amount_cents":100,"currency":"USD","customer_key":["a"]}`,
		`{"transaction_id":null,"amount_cents":null,"currency":null}`,
		`{"transaction_id":["fuzz_sale_1"]}`,
		`{"transaction_id":"fuzz_sale_1","refund_amount_cents":"1"}`,
		`{"transaction_id":"fuzz_sale_1","reason":1}`,
		`{"transaction_id":"fuzz_sale_1","refund_id":7,"refund_amount_cents":1}`,
		// Nested objects, duplicate keys, long and odd values.
		deep, deepArr,
		`{"transaction_id":"fz_nest_1","amount_cents":100,"currency":"USD","additional_data":` + deep + `}`,
		`{"transaction_id":"fz_nest_2","amount_cents":100,"currency":"USD","additional_data":{"test_mode":{"test_mode":true}}}`,
		`{"transaction_id":"fz_dup","transaction_id":"fuzz_sale_1","amount_cents":100,"currency":"USD","click_id":"` + c1 + `"}`,
		`{"transaction_id":"` + long + `","amount_cents":100,"currency":"USD","click_id":"` + c1 + `"}`,
		`{"transaction_id":"fz_long_1","amount_cents":100,"currency":"USD","click_id":"` + c1 + `","provider_payment_id":"` + long + `"}`,
		`{"transaction_id":"fuzz_sale_1","refund_id":"` + long + `","refund_amount_cents":1}`,
		`{"transaction_id":"fuzz_sale_1","refund_reason":"` + strings.Repeat("r", 1001) + `"}`,
		`{"transaction_id":"fz_date_1","amount_cents":100,"currency":"USD","click_id":"` + c1 + `","occurred_at":"2026-02-30T00:00:00Z"}`,
		`{"transaction_id":"fz_date_2","amount_cents":100,"currency":"USD","click_id":"` + c1 + `","occurred_at":"+275760-09-13T00:00:00Z"}`,
		`{"transaction_id":"fz_date_3","amount_cents":100,"currency":"USD","click_id":"` + c1 + `","occurred_at":"0000-01-01T00:00:00Z"}`,
		`{"transaction_id":"","amount_cents":100,"currency":"USD","click_id":"` + c1 + `"}`,
		`{"transaction_id":" ","amount_cents":100,"currency":"usd","click_id":"` + c1 + `"}`,
		`{"transaction_id":"fz_unknown","amount_cents":100,"currency":"USD","click_id":"no-such-click"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, route := range []string{"/api/v1/track/sale", "/api/v1/track/refund"} {
			before := s.ledgerState(t)
			rec := s.post(t, route, s.key, body)
			checkAnswer(t, route, body, rec)
			if rec.Code != http.StatusOK {
				if after := s.ledgerState(t); after != before {
					t.Fatalf("%s %q answered %d %s and wrote: ledger %s, was %s", route, body, rec.Code, rec.Body, after, before)
				}
			}
		}
	})
}
