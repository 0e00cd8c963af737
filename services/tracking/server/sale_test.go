package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/libs/platform/platformtest"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// saleEvent decodes the outbox's sale event for a sale id.
func (s *stack) saleEvent(saleID int64) *eventsv1.SaleRecorded {
	s.t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT payload FROM outbox WHERE event_type = $1 ORDER BY id`, eventsv1.TypeSaleRecorded)
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			s.t.Fatal(err)
		}
		var env eventsv1.Envelope
		var ev eventsv1.SaleRecorded
		if err := proto.Unmarshal(raw, &env); err != nil {
			s.t.Fatal(err)
		}
		if err := proto.Unmarshal(env.GetPayload(), &ev); err != nil {
			s.t.Fatal(err)
		}
		if ev.GetSaleId() == saleID {
			if env.GetProgramId() != ev.GetProgramId() || env.GetSource() != "tracking" {
				s.t.Fatalf("envelope %v", &env)
			}
			return &ev
		}
	}
	s.t.Fatalf("no sale event for sale %d", saleID)
	return nil
}

func bearer(k string) []string { return []string{"Authorization", "Bearer " + k} }

func (s *stack) sale(body map[string]any, headers ...string) reply {
	s.t.Helper()
	return s.call("POST", "/api/v1/track/sale", jsonBody(body), headers...)
}

// saleBody is a valid sale for clickID under a fresh transaction id.
func saleBody(clickID string, extra map[string]any) map[string]any {
	b := map[string]any{"transaction_id": fmt.Sprintf("txn_%d", time.Now().UnixNano()), "amount_cents": 4900, "currency": "USD"}
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

func wantSaleOK(t *testing.T, r reply, status string) int64 {
	t.Helper()
	if r.status != 200 || r.body["success"] != true || r.body["message"] != "Sale tracked successfully" || r.body["customer_status"] != status {
		t.Fatalf("%d %s, want customer_status %s", r.status, r.raw, status)
	}
	if r.header.Get("X-Request-ID") == "" || r.header.Get("X-RateLimit-Limit") != "120" {
		t.Fatalf("headers %v", r.header)
	}
	id, _ := r.body["sale_id"].(float64)
	if id <= 0 {
		t.Fatalf("sale_id: %s", r.raw)
	}
	return int64(id)
}

// wantSaleError checks the platform envelope with the sale route's code.
func wantSaleError(t *testing.T, r reply, status int, name, code, message string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	if d, ok := r.body["data"]; !ok || d != nil {
		t.Fatalf("platform envelope needs data:null: %s", r.raw)
	}
	e, _ := r.body["error"].(map[string]any)
	if e == nil || e["status"] != float64(status) || e["name"] != name || e["code"] != code || e["message"] != message {
		t.Fatalf("error %s, want %d %s %s %q", r.raw, status, name, code, message)
	}
	if _, ok := e["details"].(map[string]any); !ok {
		t.Fatalf("details must be an object: %s", r.raw)
	}
	if r.header.Get("X-Request-ID") == "" {
		t.Fatal("missing X-Request-ID")
	}
}

type customerRow struct {
	status        string
	signup, first *time.Time
	saleAt        *time.Time
	processorID   *string
}

func (s *stack) customer(clickID string) customerRow {
	s.t.Helper()
	var c customerRow
	if err := s.pool.QueryRow(context.Background(), `SELECT status, signup_date, first_purchase_date, sale_recorded_at, processor_customer_id
		FROM customers WHERE click_id = $1`, clickID).Scan(&c.status, &c.signup, &c.first, &c.saleAt, &c.processorID); err != nil {
		s.t.Fatal(err)
	}
	return c
}

// saleRows counts what a sale may write.
func (s *stack) saleRows() [4]int {
	return [4]int{
		s.count(`SELECT count(*) FROM sales`),
		s.count(`SELECT count(*) FROM outbox WHERE event_type = 'tracking.sale.recorded'`),
		s.count(`SELECT count(*) FROM customers WHERE status = 'conversion' OR sale_recorded_at IS NOT NULL`),
		s.count(`SELECT count(*) FROM lead_events WHERE status = 'settled'`),
	}
}

// ageCustomer moves a customer's first click into the past: the only way
// to have a click older than the attribution window without waiting.
func (s *stack) ageCustomer(clickID string, age time.Duration) {
	s.t.Helper()
	if _, err := s.pool.Exec(context.Background(), `UPDATE customers SET created_at = now() - $2::interval WHERE click_id = $1`,
		clickID, fmt.Sprintf("%d seconds", int(age.Seconds()))); err != nil {
		s.t.Fatal(err)
	}
}

// Customer status table, the sale rows, through the sale route.
func TestSaleCustomerRows(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	f := s.fixture()

	t.Run("lead to conversion on an attributed sale; later payments keep the first purchase", func(t *testing.T) {
		cid := s.click(f.codeA2, nil)
		wantSettled(t, s.lead(map[string]any{"click_id": cid, "customer_key": "conv-1"}, bearer(f.keyServer)...))
		body := saleBody(cid, map[string]any{"provider": "processor", "provider_payment_id": "pi_1", "livemode": true})
		id := wantSaleOK(t, s.sale(body, bearer(f.keyServer)...), "conversion")
		c := s.customer(cid)
		if c.status != "conversion" || c.first == nil || c.saleAt == nil {
			t.Fatalf("customer %+v", c)
		}
		if n := s.count(`SELECT count(*) FROM sales WHERE id = $1 AND processor_event_id = $2 AND amount_cents = 4900 AND currency = 'USD'
				AND partner_id = $3 AND program_id = $4 AND provider = 'processor' AND provider_payment_id = 'pi_1' AND livemode AND NOT is_test AND source = 'api'`,
			id, body["transaction_id"], f.partner2, f.progServer); n != 1 {
			t.Fatal("sale row not stored as sent")
		}
		ev := s.saleEvent(id)
		if ev.GetTransactionId() != body["transaction_id"] || ev.GetPartnerId() != f.partner2 || ev.GetProgramId() != f.progServer ||
			ev.GetAmountCents() != 4900 || ev.GetCurrency() != "USD" || !ev.GetConverted() || ev.GetCustomerStatus() != "conversion" ||
			ev.GetIsTest() || ev.GetClickId() != cid || ev.GetFirstPurchaseDate() == nil || ev.GetSource() != "api" {
			t.Fatalf("sale event %v", ev)
		}
		// Found by customer_key alone, and the window is not checked again
		// once converted (the click is now far older than 60 days).
		s.ageCustomer(cid, 400*24*time.Hour)
		wantSaleOK(t, s.sale(saleBody("", map[string]any{"customer_key": "conv-1", "currency": "eur"}), bearer(f.keyServer)...), "conversion")
		if c2 := s.customer(cid); !c2.first.Equal(*c.first) {
			t.Fatalf("first purchase moved: %v -> %v", c.first, c2.first)
		}
		if n := s.count(`SELECT count(*) FROM sales WHERE customer_id = (SELECT id FROM customers WHERE click_id = $1) AND currency = 'EUR'`, cid); n != 1 {
			t.Fatal("second sale missing")
		}
		// A converted customer cannot go back to lead.
		wantPlatformError(t, s.lead(map[string]any{"click_id": cid}, bearer(f.keyServer)...), 400, "BadRequestError",
			"Customer status cannot be updated to lead. Current status: conversion")
	})

	t.Run("provisional lead: a sale leaves it unchanged, then a Bearer lead answers 400", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		wantProvisional(t, s.lead(map[string]any{"click_id": cid}))
		wantSaleOK(t, s.sale(saleBody(cid, nil), bearer(f.keyServer)...), "click")
		c := s.customer(cid)
		if c.status != "click" || c.signup != nil || c.first != nil || c.saleAt == nil {
			t.Fatalf("customer %+v", c)
		}
		if n := s.count(`SELECT count(*) FROM lead_events WHERE click_id = $1 AND status = 'provisional'`, cid); n != 1 {
			t.Fatal("the sale settled the provisional lead")
		}
		before := s.rows()
		wantPlatformError(t, s.lead(map[string]any{"click_id": cid}, bearer(f.keyServer)...), 400, "BadRequestError",
			"A sale was already recorded for this customer while its lead was provisional; the lead can no longer be settled")
		if after := s.rows(); after != before {
			t.Fatalf("refused lead wrote rows: %v -> %v", before, after)
		}
	})

	t.Run("click without a lead: an attributed sale converts it", func(t *testing.T) {
		cid := s.click(f.codeA, nil)
		wantSaleOK(t, s.sale(saleBody(cid, nil), bearer(f.keyServer)...), "conversion")
		if c := s.customer(cid); c.signup != nil || c.first == nil {
			t.Fatalf("customer %+v", c)
		}
	})

	t.Run("attribution window: refused and nothing written, the next payment is checked again", func(t *testing.T) {
		// progBrowser's window is 30 days.
		cid := s.click(f.codeB, nil)
		wantSettled(t, s.lead(map[string]any{"click_id": cid}, bearer(f.keyBrowser)...))
		s.ageCustomer(cid, 31*24*time.Hour)
		before := s.saleRows()
		wantSaleError(t, s.sale(saleBody(cid, nil), bearer(f.keyBrowser)...), 400, "BadRequestError", "no_attribution",
			"No affiliate attribution: the customer's click is more than 30 days (the program's attribution window) older than its signup or this payment")
		if after := s.saleRows(); after != before {
			t.Fatalf("refused sale wrote rows: %v -> %v", before, after)
		}
		if c := s.customer(cid); c.status != "lead" {
			t.Fatalf("status %s", c.status)
		}
		// The signup was within the window of a click 29 days before it.
		s.ageCustomer(cid, 29*24*time.Hour)
		wantSaleOK(t, s.sale(saleBody(cid, nil), bearer(f.keyBrowser)...), "conversion")
	})

	t.Run("without a signup the payment time is the reference", func(t *testing.T) {
		cid := s.click(f.codeB, nil)
		s.ageCustomer(cid, 45*24*time.Hour)
		// Paid 10 days ago: 35 days after the click, outside 30 days.
		paid := time.Now().Add(-10 * 24 * time.Hour).UTC().Format(time.RFC3339)
		before := s.saleRows()
		wantSaleError(t, s.sale(saleBody(cid, map[string]any{"occurred_at": paid}), bearer(f.keyBrowser)...), 400, "BadRequestError", "no_attribution",
			"No affiliate attribution: the customer's click is more than 30 days (the program's attribution window) older than its signup or this payment")
		if after := s.saleRows(); after != before {
			t.Fatalf("refused sale wrote rows: %v -> %v", before, after)
		}
		// Paid 20 days ago: 25 days after the click, inside.
		paid = time.Now().Add(-20 * 24 * time.Hour).UTC().Format(time.RFC3339)
		wantSaleOK(t, s.sale(saleBody(cid, map[string]any{"occurred_at": paid}), bearer(f.keyBrowser)...), "conversion")
		if c := s.customer(cid); c.first == nil || time.Since(*c.first) < 19*24*time.Hour {
			t.Fatalf("first purchase date should be the payment's: %+v", c.first)
		}
	})
}

// Track sale error table (and the authentication messages): every row
// answers its status, code and message, and writes nothing.
func TestSaleErrors(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	f := s.fixture()
	cid := s.click(f.codeA, nil)
	otherProgram := s.click(f.codeB, nil)
	// A partner with a link in the program but no partner-program record.
	p3 := s.id("POST", "/admin/v1/partners", map[string]any{"name": "P3", "email": "p3@partners.example"})
	s.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/links", f.progServer), map[string]any{"partner_id": p3, "code": "NOPP", "active": true})
	s.sync()
	unlinked := s.click("NOPP", nil)
	key := bearer(f.keyServer)

	oldDate := time.Now().Add(-31 * 24 * time.Hour).UTC().Format(time.RFC3339)
	future := time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
	const (
		bad  = "BadRequestError"
		auth = "UnauthorizedError"
	)
	rows := []struct {
		name          string
		body          map[string]any
		headers       []string
		status        int
		errName, code string
		message       string
	}{
		{"no header", saleBody(cid, nil), nil, 401, auth, "unauthorized", "Missing or malformed Authorization header. Expected: Bearer <token>"},
		{"not Bearer", saleBody(cid, nil), []string{"Authorization", "Basic abc"}, 401, auth, "unauthorized", "Missing or malformed Authorization header. Expected: Bearer <token>"},
		{"empty token", saleBody(cid, nil), []string{"Authorization", "Bearer "}, 401, auth, "unauthorized", "Missing API token"},
		{"unknown token", saleBody(cid, nil), bearer("svc_live_nothing"), 401, auth, "unauthorized", "Invalid API token"},
		{"transaction_id missing", saleBody(cid, map[string]any{"transaction_id": nil}), key, 400, bad, "invalid_request", "transaction_id is required and must be a string"},
		{"transaction_id a number", saleBody(cid, map[string]any{"transaction_id": 12}), key, 400, bad, "invalid_request", "transaction_id is required and must be a string"},
		{"transaction_id empty", saleBody(cid, map[string]any{"transaction_id": " "}), key, 400, bad, "invalid_request", "transaction_id is required and must be a string"},
		{"amount missing", saleBody(cid, map[string]any{"amount_cents": nil}), key, 400, bad, "invalid_request", "amount_cents is required and must be a positive integer"},
		{"amount zero", saleBody(cid, map[string]any{"amount_cents": 0}), key, 400, bad, "invalid_request", "amount_cents is required and must be a positive integer"},
		{"amount negative", saleBody(cid, map[string]any{"amount_cents": -5}), key, 400, bad, "invalid_request", "amount_cents is required and must be a positive integer"},
		{"amount fractional", saleBody(cid, map[string]any{"amount_cents": 10.5}), key, 400, bad, "invalid_request", "amount_cents is required and must be a positive integer"},
		{"amount a string", saleBody(cid, map[string]any{"amount_cents": "100"}), key, 400, bad, "invalid_request", "amount_cents is required and must be a positive integer"},
		{"occurred_at not a time", saleBody(cid, map[string]any{"occurred_at": "yesterday"}), key, 400, bad, "invalid_request", "occurred_at must be an ISO 8601 time within the last 30 days"},
		{"occurred_at without offset", saleBody(cid, map[string]any{"occurred_at": "2026-11-20T10:00:00"}), key, 400, bad, "invalid_request", "occurred_at must be an ISO 8601 time within the last 30 days"},
		{"occurred_at not a real date", saleBody(cid, map[string]any{"occurred_at": "2026-02-30T10:00:00Z"}), key, 400, bad, "invalid_request", "occurred_at must be an ISO 8601 time within the last 30 days"},
		{"occurred_at too old", saleBody(cid, map[string]any{"occurred_at": oldDate}), key, 400, bad, "invalid_request", "occurred_at must be an ISO 8601 time within the last 30 days"},
		{"occurred_at too far ahead", saleBody(cid, map[string]any{"occurred_at": future}), key, 400, bad, "invalid_request", "occurred_at must be an ISO 8601 time within the last 30 days"},
		{"provider unknown", saleBody(cid, map[string]any{"provider": "bank"}), key, 400, bad, "invalid_request", "provider must be one of: processor, paddle, lemonsqueezy, paypal, chargebee, recurly, braintree, manual, other"},
		{"provider_payment_id empty", saleBody(cid, map[string]any{"provider_payment_id": ""}), key, 400, bad, "invalid_request", "provider_payment_id must be a string of 1 to 255 characters"},
		{"provider_payment_id too long", saleBody(cid, map[string]any{"provider_payment_id": strings.Repeat("x", 256)}), key, 400, bad, "invalid_request", "provider_payment_id must be a string of 1 to 255 characters"},
		{"livemode not a boolean", saleBody(cid, map[string]any{"livemode": "yes"}), key, 400, bad, "invalid_request", "livemode must be a boolean"},
		{"currency unsupported", saleBody(cid, map[string]any{"currency": "GBP"}), key, 422, "UnprocessableEntityError", "unsupported_currency", "currency GBP is not supported"},
		{"currency missing", saleBody(cid, map[string]any{"currency": nil}), key, 400, bad, "invalid_request", "currency is required: one of USD, EUR, VND"},
		{"no customer identifiers", saleBody("", nil), key, 400, bad, "no_attribution", "Customer not found. Provide customer_key or click_id."},
		{"unknown click id", saleBody("cust_1_1", nil), key, 400, bad, "no_attribution", "Customer not found. Provide customer_key or click_id."},
		{"unknown customer key", saleBody("", map[string]any{"customer_key": "nobody"}), key, 400, bad, "no_attribution", "Customer not found. Provide customer_key or click_id."},
		{"customer of another program", saleBody(otherProgram, nil), key, 400, bad, "no_attribution", "No affiliate attribution found for this customer in this program"},
		{"no partner-program record", saleBody(unlinked, nil), key, 400, bad, "no_attribution", "No partner-program relationship found for this customer"},
		{"malformed JSON", nil, key, 400, bad, "invalid_request", "Request body is not valid JSON"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			before, beforeSales := s.rows(), s.saleRows()
			body := "{"
			if row.body != nil {
				body = jsonBody(row.body)
			}
			r := s.call("POST", "/api/v1/track/sale", body, row.headers...)
			wantSaleError(t, r, row.status, row.errName, row.code, row.message)
			if after, afterSales := s.rows(), s.saleRows(); after != before || afterSales != beforeSales {
				t.Fatalf("rejected sale wrote rows: %v %v -> %v %v", before, beforeSales, after, afterSales)
			}
		})
	}

	t.Run("retired key: typed 401", func(t *testing.T) {
		r := s.sale(saleBody(cid, nil), bearer(f.keyRetired)...)
		e, _ := r.body["error"].(map[string]any)
		if r.status != 401 || e["code"] != "api_key_rotation_required" || r.body["data"] != nil {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if _, ok := r.body["data"]; ok {
			t.Fatalf("typed envelope has no data key: %s", r.raw)
		}
	})

	t.Run("duplicate transaction_id: 409 naming the first sale, across programs", func(t *testing.T) {
		body := saleBody(cid, nil)
		first := wantSaleOK(t, s.sale(body, key...), "conversion")
		before := s.saleRows()
		for _, k := range [][]string{key, bearer(f.keyBrowser)} {
			b := saleBody(otherProgram, map[string]any{"transaction_id": body["transaction_id"], "amount_cents": 1})
			r := s.sale(b, k...)
			if r.status != 409 || r.body["error"].(map[string]any)["details"].(map[string]any)["sale_id"] != float64(first) {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			e := r.body["error"].(map[string]any)
			if e["name"] != "ConflictError" || e["code"] != "duplicate_transaction" || e["message"] != "Duplicate transaction_id. This sale has already been recorded." {
				t.Fatalf("%s", r.raw)
			}
		}
		if after := s.saleRows(); after != before {
			t.Fatalf("duplicate wrote rows: %v -> %v", before, after)
		}
	})

	t.Run("500 Sale tracking failed: nothing written, the retry records it", func(t *testing.T) {
		ctx := context.Background()
		fresh := s.click(f.codeA, nil)
		body := saleBody(fresh, nil)
		if _, err := s.pool.Exec(ctx, `ALTER TABLE sales RENAME TO sales_away`); err != nil {
			t.Fatal(err)
		}
		r := s.sale(body, key...)
		if _, err := s.pool.Exec(ctx, `ALTER TABLE sales_away RENAME TO sales`); err != nil {
			t.Fatal(err)
		}
		wantSaleError(t, r, 500, "InternalServerError", "internal_error", "Sale tracking failed")
		if c := s.customer(fresh); c.status != "click" || c.saleAt != nil {
			t.Fatalf("a failed sale moved the customer: %+v", c)
		}
		wantSaleOK(t, s.sale(body, key...), "conversion")
	})

	t.Run("rotating key: recorded, with the warnings", func(t *testing.T) {
		r := s.sale(saleBody(s.click(f.codeA, nil), nil), bearer(f.keyRotating)...)
		wantSaleOK(t, r, "conversion")
		if w, _ := r.body["warnings"].([]any); len(w) != 1 || r.header.Get("Deprecation") == "" || r.header.Get("Sunset") == "" {
			t.Fatalf("%s %v", r.raw, r.header)
		}
	})
}

func TestSaleTestModeAndLimit(t *testing.T) {
	t.Parallel()
	// The service's clock moves only when told, from the start of a minute:
	// the limit's burst must not straddle two minute windows. Each sale
	// below first moves it a millisecond (a generated test id is the time).
	clock := platformtest.NewClock(time.Now().Truncate(time.Minute).Add(time.Second))
	s := startStackOn(t, clock, map[string]string{"TRACK_SALE_RATE_LIMIT": "4"})
	f := s.fixture()
	cid := s.click(f.codeA, nil)

	wantTest := func(r reply) string {
		t.Helper()
		clock.Advance(time.Millisecond)
		d, _ := r.body["data"].(map[string]any)
		if r.status != 200 || r.body["success"] != true || r.body["message"] != "Test sale recorded" || d == nil ||
			d["test_mode"] != true || d["programId"] != float64(f.progServer) || d["eventId"] == nil {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		return d["transaction_id"].(string)
	}
	t.Run("test_mode without transaction_id: generated id, no attribution", func(t *testing.T) {
		txn := wantTest(s.sale(map[string]any{"amount_cents": 100, "currency": "VND", "click_id": cid, "additional_data": map[string]any{"test_mode": true}},
			bearer(f.keyServer)...))
		if !strings.HasPrefix(txn, "test_txn_") {
			t.Fatalf("transaction id %q", txn)
		}
		if n := s.count(`SELECT count(*) FROM sales WHERE processor_event_id = $1 AND is_test AND customer_id IS NOT NULL`, txn); n != 1 {
			t.Fatal("test sale not stored")
		}
		if c := s.customer(cid); c.status != "click" || c.saleAt != nil {
			t.Fatalf("test sale moved the customer: %+v", c)
		}
	})
	t.Run("test key: a test sale, with a generated id when none is sent", func(t *testing.T) {
		if txn := wantTest(s.sale(saleBody(cid, map[string]any{"transaction_id": nil}), bearer(f.keyTest)...)); !strings.HasPrefix(txn, "test_txn_") {
			t.Fatalf("transaction id %q", txn)
		}
		if c := s.customer(cid); c.status != "click" {
			t.Fatalf("status %s", c.status)
		}
	})
	t.Run("120 per minute per key, here 4: the key's fifth call is refused, another key is not", func(t *testing.T) {
		// keyServer made one call above: three more pass, the fifth is refused.
		for i := 0; i < 4; i++ {
			r := s.sale(saleBody(cid, map[string]any{"additional_data": map[string]any{"test_mode": true}}), bearer(f.keyServer)...)
			if i < 3 && r.status != 200 {
				t.Fatalf("call %d: %d %s", i, r.status, r.raw)
			}
			if i == 3 {
				e, _ := r.body["error"].(map[string]any)
				if r.status != 429 || e["code"] != "rate_limited" || r.header.Get("Retry-After") == "" {
					t.Fatalf("%d %s", r.status, r.raw)
				}
			}
		}
		if r := s.sale(saleBody(cid, nil), bearer(f.keyBrowser)...); r.status == 429 {
			t.Fatalf("another key was limited: %s", r.raw)
		}
	})
}

// Concurrent retries of one sale: exactly one is recorded, every other
// answer is 409 naming it, and one event is published.
func TestSaleConcurrentRetries(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	f := s.fixture()
	cid := s.click(f.codeA, nil)
	body := jsonBody(saleBody(cid, nil))
	const n = 8
	replies := make(chan reply, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		go func() {
			<-start
			replies <- s.call("POST", "/api/v1/track/sale", body, bearer(f.keyServer)...)
		}()
	}
	close(start)
	var ok, dup int
	var saleID float64
	var dupIDs []float64
	for i := 0; i < n; i++ {
		r := <-replies
		switch r.status {
		case 200:
			ok++
			saleID = r.body["sale_id"].(float64)
		case 409:
			dup++
			dupIDs = append(dupIDs, r.body["error"].(map[string]any)["details"].(map[string]any)["sale_id"].(float64))
		default:
			t.Fatalf("%d %s", r.status, r.raw)
		}
	}
	if ok != 1 || dup != n-1 {
		t.Fatalf("%d recorded, %d duplicates", ok, dup)
	}
	for _, id := range dupIDs {
		if id != saleID {
			t.Fatalf("409 names sale %v, recorded %v", id, saleID)
		}
	}
	if got := s.saleRows(); got[0] != 1 || got[1] != 1 {
		t.Fatalf("sales and events %v", got)
	}
}
