package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// refundOut is a refund's 200 answer.
type refundOut struct {
	Success         bool     `json:"success"`
	Status          string   `json:"status"`
	DeductionAmount *float64 `json:"deductionAmount"`
	CommissionID    int64    `json:"commission_id"`
	Reason          string   `json:"reason"`
	Message         string   `json:"message"`
	Test            bool     `json:"test"`
}

// wantRefund checks a 200 refund answer: its status, the exact set of
// fields the spec's Responses table gives that case, and (for reversed
// and refunded) the deduction in major units; commission, when not 0, is
// the commission it must name.
func wantRefund(t *testing.T, r reply, status string, deduction float64, commission int64) refundOut {
	t.Helper()
	var out refundOut
	if r.status != 200 || json.Unmarshal([]byte(r.raw), &out) != nil || !out.Success || out.Status != status {
		t.Fatalf("%d %s, want 200 status %s", r.status, r.raw, status)
	}
	fields := map[string][]string{
		"reversed":      {"success", "status", "deductionAmount", "commission_id"},
		"refunded":      {"success", "status", "deductionAmount", "commission_id"},
		"skipped":       {"success", "status", "reason", "commission_id"},
		"no_commission": {"success", "status", "message"},
	}[status]
	if len(r.body) != len(fields) {
		t.Fatalf("fields of %s: %s, want %v", status, r.raw, fields)
	}
	for _, f := range fields {
		if _, ok := r.body[f]; !ok {
			t.Fatalf("no %s: %s", f, r.raw)
		}
	}
	switch status {
	case "reversed", "refunded":
		if out.DeductionAmount == nil || (deduction >= 0 && *out.DeductionAmount != deduction) {
			t.Fatalf("%s, want deductionAmount %v", r.raw, deduction)
		}
	case "skipped":
		if out.Reason == "" {
			t.Fatalf("skipped without a reason: %s", r.raw)
		}
	case "no_commission":
		if out.Message == "" {
			t.Fatalf("no message: %s", r.raw)
		}
	}
	if commission != 0 && out.CommissionID != commission {
		t.Fatalf("%s, want commission_id %d", r.raw, commission)
	}
	wantTrackHeaders(t, r)
	return out
}

// anyAmount: wantRefund does not check the deduction.
const anyAmount = -1

func refundOf(txn string, cents int64, extra map[string]any) map[string]any {
	b := map[string]any{"transaction_id": txn}
	if cents != 0 {
		b["refund_amount_cents"] = cents
	}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// POST /api/v1/track/refund through the gateway (spec: POST /track/refund,
// Commission status, Errors "Track refund", "Authentication messages
// (sale, refund)"; the issue's refund arithmetic and balances).
func TestRefundRoute(t *testing.T) {
	// Not parallel: its subtests are, on its stack (see startTrack).
	clock := platformtest.NewClock(t0)
	s := startTrack(t, clock, nil)
	p := s.programNoSync(t, nil)
	other := s.programNoSync(t, nil)
	testKey, _ := s.newKey(t, p.id, true)
	keyed := s.programNoSync(t, nil)
	rotating, rotID := s.newKey(t, keyed.id, false)
	retired, retID := s.newKey(t, keyed.id, false)
	s.markRotation(t, rotID, clock.Now().Add(72*time.Hour))
	s.markRotation(t, retID, clock.Now().Add(-time.Minute))
	s.sync(t)

	t.Run("rows", func(t *testing.T) {
		t.Run("test key: {success, test} before the body is checked or the sale looked up; nothing refunded", func(t *testing.T) {
			t.Parallel()
			txn, c := s.approvedSale(t, p, 10000)
			for _, body := range []any{"", "{", "[]", `{"transaction_id":5,"reason":"other","refund_amount_cents":-1}`, map[string]any{},
				refundOf("nope", 0, nil), refundOf(txn, 0, nil), refundOf(txn, 2500, map[string]any{"refund_id": "t1"})} {
				r := s.refund(t, testKey, body)
				if r.status != 200 || len(r.body) != 2 || r.body["success"] != true || r.body["test"] != true {
					t.Fatalf("body %v: %d %s, want 200 {success:true,test:true}", body, r.status, r.raw)
				}
				wantTrackHeaders(t, r)
			}
			if v, _ := s.saleRecord(t, txn, false); v.RefundedCents != 0 {
				t.Fatalf("a test key refunded %d cents", v.RefundedCents)
			}
			if cv := s.commission(t, c.ID); cv.Status != "approved" || cv.RefundedAmount != 0 {
				t.Fatalf("a test key touched the commission: %+v", cv)
			}
			if got := s.balances(t, p.partner); got != "USD 1000/0/1000" {
				t.Fatalf("balances %q", got)
			}
		})

		t.Run("errors: status, code and message of each row, nothing refunded", func(t *testing.T) {
			t.Parallel()
			pe := s.program(t, nil)
			txn, c := s.approvedSale(t, pe, 10000)
			otherTxn, _ := s.approvedSale(t, other, 10000)
			const (
				malformed = "Missing or malformed Authorization header. Expected: Bearer <token>"
				amount    = "refund_amount_cents must be a positive integer"
			)
			rows := []struct {
				name    string
				body    any
				headers []string
				status  int
				code    string
				message string
			}{
				{"401 no header", refundOf(txn, 0, nil), []string{}, 401, "unauthorized", malformed},
				{"401 not Bearer", refundOf(txn, 0, nil), []string{"Authorization", "Basic " + pe.key}, 401, "unauthorized", malformed},
				{"401 empty token", refundOf(txn, 0, nil), []string{"Authorization", "Bearer "}, 401, "unauthorized", "Invalid API token"},
				{"401 unknown token", refundOf(txn, 0, nil), bearer("svc_live_nothing"), 401, "unauthorized", "Invalid API token"},
				{"400 transaction_id missing", map[string]any{"refund_amount_cents": 100}, nil, 400, "invalid_request", "transaction_id is required"},
				{"400 transaction_id empty", refundOf("", 100, nil), nil, 400, "invalid_request", "transaction_id is required"},
				// Not missing: our own messages, each naming what is wrong.
				{"400 transaction_id too long", refundOf(strings.Repeat("t", 256), 100, nil), nil, 400, "invalid_request", "transaction_id must be at most 255 characters"},
				{"400 transaction_id with a NUL", refundOf("a\x00b", 100, nil), nil, 400, "invalid_request", "transaction_id must not contain the NUL character"},
				{"400 refund_id with a NUL", refundOf(txn, 100, map[string]any{"refund_id": "r\x00"}), nil, 400, "invalid_request", "refund_id must not contain the NUL character"},
				{"400 refund_reason with a NUL", refundOf(txn, 100, map[string]any{"refund_reason": "a\x00b"}), nil, 400, "invalid_request", "refund_reason must not contain the NUL character"},
				{"400 refund_id too long", refundOf(txn, 100, map[string]any{"refund_id": strings.Repeat("r", 256)}), nil, 400, "invalid_request", "refund_id must be a string of at most 255 characters"},
				{"400 reason with a NUL", refundOf(txn, 0, map[string]any{"reason": "refund\x00"}), nil, 400, "invalid_request", "reason must be refund or chargeback"},
				{"400 reason other", refundOf(txn, 0, map[string]any{"reason": "other"}), nil, 400, "invalid_request", "reason must be refund or chargeback"},
				{"400 reason capitalised", refundOf(txn, 0, map[string]any{"reason": "Refund"}), nil, 400, "invalid_request", "reason must be refund or chargeback"},
				{"400 refund_amount_cents negative", refundOf(txn, -5, nil), nil, 400, "invalid_request", amount},
				{"400 refund_amount_cents fractional", refundOf(txn, 0, map[string]any{"refund_amount_cents": 10.5}), nil, 400, "invalid_request", amount},
				{"400 refund_amount_cents a string", refundOf(txn, 0, map[string]any{"refund_amount_cents": "100"}), nil, 400, "invalid_request", amount},
				{"404 unknown transaction_id", refundOf("txn_nowhere", 0, nil), nil, 404, "not_found", "Sale not found for transaction_id"},
				{"404 a sale of another program", refundOf(otherTxn, 0, nil), nil, 404, "not_found", "Sale not found for transaction_id"},
			}
			for _, row := range rows {
				t.Run(row.name, func(t *testing.T) {
					headers := row.headers
					if headers == nil {
						headers = bearer(pe.key)
					}
					r := s.refund(t, "", row.body, headers...)
					wantError(t, r, row.status, row.code, row.message)
					wantTrackHeaders(t, r)
				})
			}
			t.Run("400 malformed JSON", func(t *testing.T) {
				r := s.refund(t, pe.key, "{")
				e, _ := r.body["error"].(map[string]any)
				if r.status != 400 || r.body["data"] != nil || e == nil || e["code"] != "invalid_request" || e["name"] != "BadRequestError" {
					t.Fatalf("%d %s", r.status, r.raw)
				}
			})
			for _, tx := range []string{txn, otherTxn} {
				if v, _ := s.saleRecord(t, tx, false); v.RefundedCents != 0 {
					t.Fatalf("a refused refund refunded %d cents of %s", v.RefundedCents, tx)
				}
			}
			if cv := s.commission(t, c.ID); cv.Status != "approved" || cv.RefundedAmount != 0 {
				t.Fatalf("a refused refund touched the commission: %+v", cv)
			}
			if a, b := s.balances(t, pe.partner), s.balances(t, other.partner); a != "USD 1000/0/1000" || b != "USD 1000/0/1000" {
				t.Fatalf("balances %q and %q", a, b)
			}
			if ns := s.notifications(t, "partners", pe.partner); len(ns) != 0 {
				t.Fatalf("notifications after refused refunds: %+v", ns)
			}
		})

		t.Run("401 retired key: typed envelope api_key_rotation_required", func(t *testing.T) {
			t.Parallel()
			r := s.refund(t, retired, refundOf("txn_any", 0, nil))
			e, _ := r.body["error"].(map[string]any)
			if r.status != 401 || e == nil || e["code"] != "api_key_rotation_required" || e["hint"] == nil || e["docs_url"] == nil {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			if _, ok := r.body["data"]; ok {
				t.Fatalf("the typed envelope has no data key: %s", r.raw)
			}
		})

		t.Run("rotating key: refunded, with Deprecation, Sunset, Link and warnings", func(t *testing.T) {
			t.Parallel()
			txn, c := s.approvedSale(t, keyed, 10000)
			r := s.refund(t, rotating, refundOf(txn, 0, nil))
			var out refundOut
			if r.status != 200 || json.Unmarshal([]byte(r.raw), &out) != nil || out.Status != "reversed" || out.CommissionID != c.ID {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			wantRotationSignals(t, r, clock.Now().Add(72*time.Hour))
		})

		t.Run("full refund of an approved commission: reversed, balance down; again: skipped, already reversed", func(t *testing.T) {
			t.Parallel()
			p := s.program(t, nil)
			txn, c := s.approvedSale(t, p, 10000)
			if got := s.balances(t, p.partner); got != "USD 1000/0/1000" {
				t.Fatalf("balances %q", got)
			}
			wantRefund(t, s.refund(t, p.key, refundOf(txn, 0, map[string]any{"reason": "chargeback"})), "reversed", 10, c.ID)
			if got := s.balances(t, p.partner); got != "USD 0/0/0" {
				t.Fatalf("balances %q, want USD 0/0/0", got)
			}
			cv := s.commission(t, c.ID)
			if cv.Status != "reversed" || cv.RefundedAmount != 1000 || cv.Reason != "chargeback" {
				t.Fatalf("commission %+v, want reversed, 1000 refunded, reason chargeback", cv)
			}
			if v, _ := s.saleRecord(t, txn, false); v.RefundedCents != 10000 {
				t.Fatalf("sale refunded %d, want 10000", v.RefundedCents)
			}
			for _, body := range []map[string]any{refundOf(txn, 0, nil), refundOf(txn, 500, map[string]any{"refund_id": "late"})} {
				out := wantRefund(t, s.refund(t, p.key, body), "skipped", 0, c.ID)
				if out.Reason != "already reversed" {
					t.Fatalf("reason %q, want already reversed", out.Reason)
				}
			}
			if got := s.balances(t, p.partner); got != "USD 0/0/0" {
				t.Fatalf("balances %q after skipped refunds", got)
			}
			ns := s.waitNotifications(t, "partners", p.partner, 1)
			if ns[0].Kind != "commission_reversed" {
				t.Fatalf("notification %+v", ns[0])
			}
			if ns := s.notifications(t, "advertisers", p.advertiser); len(ns) != 0 {
				t.Fatalf("advertiser notified of a commission not paid out: %+v", ns)
			}
		})

		t.Run("partial refunds of an approved commission: refunded fraction, refund_id dedup, the last takes what is left", func(t *testing.T) {
			t.Parallel()
			p := s.program(t, nil)
			txn, c := s.approvedSale(t, p, 10000)
			wantRefund(t, s.refund(t, p.key, refundOf(txn, 2500, map[string]any{"refund_id": "r1", "refund_reason": "damaged", "reason": "refund"})), "refunded", 2.5, c.ID)
			if got := s.balances(t, p.partner); got != "USD 750/0/750" {
				t.Fatalf("balances %q, want USD 750/0/750", got)
			}
			if cv := s.commission(t, c.ID); cv.Status != "refunded" || cv.RefundedAmount != 250 || cv.Reason != "damaged" {
				t.Fatalf("commission %+v, want refunded, 250, damaged", cv)
			}
			out := wantRefund(t, s.refund(t, p.key, refundOf(txn, 2500, map[string]any{"refund_id": "r1"})), "skipped", 0, c.ID)
			if out.Reason != "refund already applied" {
				t.Fatalf("reason %q, want refund already applied", out.Reason)
			}
			wantRefund(t, s.refund(t, p.key, refundOf(txn, 7500, map[string]any{"refund_id": "r2"})), "reversed", 7.5, c.ID)
			if got := s.balances(t, p.partner); got != "USD 0/0/0" {
				t.Fatalf("balances %q, want USD 0/0/0", got)
			}
			if v, _ := s.saleRecord(t, txn, false); v.RefundedCents != 10000 {
				t.Fatalf("sale refunded %d", v.RefundedCents)
			}
			if cv := s.commission(t, c.ID); cv.Status != "reversed" || cv.RefundedAmount != 1000 {
				t.Fatalf("commission %+v", cv)
			}
			ns := s.waitNotifications(t, "partners", p.partner, 2)
			if ns[0].Kind != "commission_reversed" || ns[1].Kind != "commission_refunded" {
				t.Fatalf("notifications %+v, want reversed then refunded (newest first)", ns)
			}
			// The partner's notification names the sale, the reason and the
			// amount (the issue: "amount, reason, sale").
			if pl := ns[1].Payload; !hasValue(pl, "damaged") || !(hasValue(pl, txn) || hasValue(pl, float64(c.ID))) || !hasValue(pl, float64(250)) {
				t.Fatalf("notification payload %v, want the reason, the sale and the 250 deducted", pl)
			}
		})

		t.Run("without refund_id the same amount again is a retry; omitted amount refunds what is left", func(t *testing.T) {
			t.Parallel()
			p := s.program(t, nil)
			txn, c := s.approvedSale(t, p, 10000)
			wantRefund(t, s.refund(t, p.key, refundOf(txn, 3000, nil)), "refunded", 3, c.ID)
			wantRefund(t, s.refund(t, p.key, refundOf(txn, 3000, nil)), "skipped", 0, c.ID)
			wantRefund(t, s.refund(t, p.key, refundOf(txn, 2000, nil)), "refunded", 2, c.ID)
			if got := s.balances(t, p.partner); got != "USD 500/0/500" {
				t.Fatalf("balances %q, want USD 500/0/500", got)
			}
			// refund_id is ignored when the amount is 0: not the first
			// refund's id, all that is left is refunded.
			wantRefund(t, s.refund(t, p.key, refundOf(txn, 1000, map[string]any{"refund_id": "once"})), "refunded", 1, c.ID)
			wantRefund(t, s.refund(t, p.key, map[string]any{"transaction_id": txn, "refund_amount_cents": 0, "refund_id": "once",
				"refund_reason": "", "reason": "chargeback"}), "reversed", 4, c.ID)
			if got := s.balances(t, p.partner); got != "USD 0/0/0" {
				t.Fatalf("balances %q, want USD 0/0/0", got)
			}
			if cv := s.commission(t, c.ID); cv.Reason != "chargeback" {
				t.Fatalf("reason %q, want chargeback (refund_reason empty)", cv.Reason)
			}
			s.waitNotifications(t, "partners", p.partner, 4)
		})

		t.Run("split refunds add up exactly to the commission; the total is capped at the sale", func(t *testing.T) {
			t.Parallel()
			p := s.program(t, nil)
			txn, c := s.approvedSale(t, p, 10001) // 1000.1 -> 1000 cents
			if c.Amount != 10 {
				t.Fatalf("commission %+v, want 10", c)
			}
			var sum int64
			for i, cents := range []int64{3333, 3333, 6000} { // the last asks more than is left
				status := "refunded"
				if i == 2 {
					status = "reversed"
				}
				out := wantRefund(t, s.refund(t, p.key, refundOf(txn, cents, map[string]any{"refund_id": "s" + strconv.Itoa(i)})), status, anyAmount, c.ID)
				sum += cents100(*out.DeductionAmount)
			}
			if sum != 1000 {
				t.Fatalf("deductions add up to %d cents, want the commission's 1000", sum)
			}
			if v, _ := s.saleRecord(t, txn, false); v.RefundedCents != 10001 {
				t.Fatalf("sale refunded %d, want capped at 10001", v.RefundedCents)
			}
			if got := s.balances(t, p.partner); got != "USD 0/0/0" {
				t.Fatalf("balances %q, want USD 0/0/0", got)
			}
		})

		t.Run("deductionAmount in the commission's currency: VND whole numbers, EUR", func(t *testing.T) {
			t.Parallel()
			vnd := s.programNoSync(t, map[string]any{"commission_type": "fixed", "commission_rate": 50000, "currency": "VND"})
			eur := s.programNoSync(t, nil)
			s.sync(t)
			txn := s.txn()
			out := wantSale(t, s.sale(t, vnd.key, saleOf(txn, s.click(t, vnd.code), 100000, "VND", nil)), txn, "")
			wantRefund(t, s.refund(t, vnd.key, refundOf(txn, 25000, nil)), "refunded", 12500, out.Commission.ID)
			if got := s.balances(t, vnd.partner); got != "VND 37500/0/37500" {
				t.Fatalf("balances %q, want VND 37500/0/37500", got)
			}
			txn = s.txn()
			out = wantSale(t, s.sale(t, eur.key, saleOf(txn, s.click(t, eur.code), 2000, "EUR", nil)), txn, "")
			wantRefund(t, s.refund(t, eur.key, refundOf(txn, 500, nil)), "refunded", 0.5, out.Commission.ID)
			if got := s.balances(t, eur.partner); got != "EUR 150/0/150" {
				t.Fatalf("balances %q, want EUR 150/0/150", got)
			}
			// A fixed EUR reward on a USD sale: a quarter of the sale
			// refunded takes a quarter of 5 EUR.
			fixed := s.program(t, map[string]any{"commission_type": "fixed", "commission_rate": 5, "currency": "EUR"})
			txn = s.txn()
			out = wantSale(t, s.sale(t, fixed.key, saleOf(txn, s.click(t, fixed.code), 1000, "USD", nil)), txn, "")
			wantRefund(t, s.refund(t, fixed.key, refundOf(txn, 250, nil)), "refunded", 1.25, out.Commission.ID)
			if got := s.balances(t, fixed.partner); got != "EUR 375/0/375" {
				t.Fatalf("balances %q, want EUR 375/0/375", got)
			}
		})

		t.Run("pending commission (hold 30): cancelled whole by its first partial refund, no balance change", func(t *testing.T) {
			t.Parallel()
			p := s.program(t, map[string]any{"hold_days": 30})
			txn := s.txn()
			out := wantSale(t, s.sale(t, p.key, saleOf(txn, s.click(t, p.code), 10000, "USD", nil)), txn, "")
			if out.Commission == nil || out.Commission.Status != "pending" {
				t.Fatalf("commission %+v, want pending", out.Commission)
			}
			wantRefund(t, s.refund(t, p.key, refundOf(txn, 2500, map[string]any{"refund_id": "p1"})), "refunded", anyAmount, out.Commission.ID)
			if cv := s.commission(t, out.Commission.ID); cv.Status != "refunded" {
				t.Fatalf("commission %+v, want refunded (cancelled whole)", cv)
			}
			if got := s.balances(t, p.partner); got != "" && got != "USD 0/0/0" {
				t.Fatalf("a pending commission's refund moved the balance: %q", got)
			}
			s.approveDue(t)
			if cv := s.commission(t, out.Commission.ID); cv.Status != "refunded" {
				t.Fatalf("commission %+v after approve-due", cv)
			}
			// Refunds covering the whole sale reverse a pending commission,
			// still without touching the balance.
			txn = s.txn()
			out = wantSale(t, s.sale(t, p.key, saleOf(txn, s.click(t, p.code), 10000, "USD", nil)), txn, "")
			wantRefund(t, s.refund(t, p.key, refundOf(txn, 0, nil)), "reversed", anyAmount, out.Commission.ID)
			if cv := s.commission(t, out.Commission.ID); cv.Status != "reversed" {
				t.Fatalf("commission %+v, want reversed", cv)
			}
			if got := s.balances(t, p.partner); got != "" && got != "USD 0/0/0" {
				t.Fatalf("a pending commission's reversal moved the balance: %q", got)
			}
		})

		t.Run("sale without commission: no_commission", func(t *testing.T) {
			t.Parallel()
			p := s.program(t, nil)
			cid := s.click(t, p.code)
			first := s.txn()
			wantSale(t, s.sale(t, p.key, saleOf(first, cid, 1000, "USD", nil)), first, cid)
			second := s.txn()
			if out := wantSale(t, s.sale(t, p.key, saleOf(second, cid, 1000, "USD", nil)), second, cid); out.Commission != nil {
				t.Fatalf("second percent sale has a commission: %+v", out.Commission)
			}
			wantRefund(t, s.refund(t, p.key, refundOf(second, 0, nil)), "no_commission", 0, 0)
			if got := s.balances(t, p.partner); got != "USD 100/0/100" {
				t.Fatalf("balances %q, want USD 100/0/100", got)
			}
		})

		t.Run("paid out: the balance goes negative and the advertiser gets a manual-review warning", func(t *testing.T) {
			t.Parallel()
			p := s.program(t, nil)
			txn, c := s.approvedSale(t, p, 10000)
			w := s.withdrawAll(t, p.partner, "USD")
			s.adminData(t, "POST", fmt.Sprintf("/admin/v1/withdrawals/%d/pay", w), nil, nil)
			if cv := s.commission(t, c.ID); !cv.PaidOut {
				t.Fatalf("commission %+v, want paid out", cv)
			}
			if got := s.balances(t, p.partner); got != "USD 0/0/0" {
				t.Fatalf("balances %q after the payout", got)
			}
			wantRefund(t, s.refund(t, p.key, refundOf(txn, 0, nil)), "reversed", 10, c.ID)
			var bs []balance
			s.adminData(t, "GET", fmt.Sprintf("/admin/v1/partners/%d/balances", p.partner), nil, &bs)
			if len(bs) != 1 || bs[0].Balance != -1000 || bs[0].OpenWithdrawals != 0 || bs[0].Available > 0 {
				t.Fatalf("balances %+v, want USD -1000 with nothing available", bs)
			}
			ns := s.waitNotifications(t, "advertisers", p.advertiser, 1)
			if ns[0].Kind != "refund_manual_review" {
				t.Fatalf("advertiser notification %+v", ns[0])
			}
			s.waitNotifications(t, "partners", p.partner, 1)
		})

		t.Run("open withdrawals are reduced to fit the balance", func(t *testing.T) {
			t.Parallel()
			p := s.program(t, nil)
			txn, c := s.approvedSale(t, p, 10000)
			w := s.withdrawAll(t, p.partner, "USD")
			wantRefund(t, s.refund(t, p.key, refundOf(txn, 2500, nil)), "refunded", 2.5, c.ID)
			if got := s.balances(t, p.partner); got != "USD 750/750/0" {
				t.Fatalf("balances %q, want USD 750/750/0", got)
			}
			if got, want := s.withdrawals(t, p.partner), fmt.Sprintf("%d open 750/1000", w); got != want {
				t.Fatalf("withdrawals %q, want %q", got, want)
			}
			if ns := s.notifications(t, "advertisers", p.advertiser); len(ns) != 0 {
				t.Fatalf("advertiser notified though nothing was paid out: %+v", ns)
			}
		})

		t.Run("50 concurrent refunds with distinct refund_ids: capped at the sale, deductions sum to the commission", func(t *testing.T) {
			t.Parallel()
			p := s.program(t, nil)
			txn, c := s.approvedSale(t, p, 10000)
			const n = 50
			replies := make([]reply, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					replies[i] = s.refund(t, p.key, refundOf(txn, 300, map[string]any{"refund_id": "c" + strconv.Itoa(i)}))
				})
			}
			close(start)
			wg.Wait()
			var sum int64
			count := map[string]int{}
			for _, r := range replies {
				var out refundOut
				if r.status != 200 || json.Unmarshal([]byte(r.raw), &out) != nil || out.CommissionID != c.ID {
					t.Fatalf("%d %s", r.status, r.raw)
				}
				count[out.Status]++
				if out.Status == "refunded" || out.Status == "reversed" {
					if out.DeductionAmount == nil {
						t.Fatalf("no deductionAmount: %s", r.raw)
					}
					sum += cents100(*out.DeductionAmount)
				}
			}
			// 33 × 300 = 9900, the 34th takes the last 100, 16 find it reversed.
			if count["refunded"] != 33 || count["reversed"] != 1 || count["skipped"] != 16 {
				t.Fatalf("statuses %v, want 33 refunded, 1 reversed, 16 skipped", count)
			}
			if sum != 1000 {
				t.Fatalf("deductions add up to %d cents, want 1000", sum)
			}
			if v, _ := s.saleRecord(t, txn, false); v.RefundedCents != 10000 {
				t.Fatalf("sale refunded %d, want 10000", v.RefundedCents)
			}
			if cv := s.commission(t, c.ID); cv.Status != "reversed" || cv.RefundedAmount != 1000 {
				t.Fatalf("commission %+v", cv)
			}
			if got := s.balances(t, p.partner); got != "USD 0/0/0" {
				t.Fatalf("balances %q, want USD 0/0/0", got)
			}
			s.waitNotifications(t, "partners", p.partner, 34)
		})
	})

	// Alone, after every row: it breaks the notifications table for a
	// moment.
	t.Run("notifications never change the response: refunded even when the notification cannot be written", func(t *testing.T) {
		p := s.program(t, nil)
		txn, c := s.approvedSale(t, p, 10000)
		pool := s.st.Instance("commissions").Platform().Pool
		ctx := context.Background()
		if _, err := pool.Exec(ctx, `ALTER TABLE notifications RENAME TO notifications_away`); err != nil {
			t.Fatal(err)
		}
		r := s.refund(t, p.key, refundOf(txn, 0, nil))
		if _, err := pool.Exec(ctx, `ALTER TABLE notifications_away RENAME TO notifications`); err != nil {
			t.Fatal(err)
		}
		wantRefund(t, r, "reversed", 10, c.ID)
		if got := s.balances(t, p.partner); got != "USD 0/0/0" {
			t.Fatalf("balances %q, want USD 0/0/0", got)
		}
	})

	// Moves the clock: after every row.
	t.Run("a pending commission cancelled by a refund is never approved, even past its hold", func(t *testing.T) {
		p := s.program(t, map[string]any{"hold_days": 30})
		txn := s.txn()
		out := wantSale(t, s.sale(t, p.key, saleOf(txn, s.click(t, p.code), 10000, "USD", nil)), txn, "")
		wantRefund(t, s.refund(t, p.key, refundOf(txn, 100, nil)), "refunded", anyAmount, out.Commission.ID)
		clock.Advance(31 * day)
		s.approveDue(t)
		if cv := s.commission(t, out.Commission.ID); cv.Status != "refunded" || cv.ApprovedAt != nil {
			t.Fatalf("commission %+v, want refunded, never approved", cv)
		}
		if got := s.balances(t, p.partner); got != "" && got != "USD 0/0/0" {
			t.Fatalf("balances %q: a cancelled commission was credited", got)
		}
	})
}

// hasValue reports whether one of m's values is v.
func hasValue(m map[string]any, v any) bool {
	for _, x := range m {
		if x == v {
			return true
		}
	}
	return false
}

// Sale and refund count against one bucket per API key (spec: Limits,
// 120/min combined, here 6), on a clock that stands still so the window
// cannot roll over.
func TestSaleAndRefundShareOneRateLimit(t *testing.T) {
	t.Parallel()
	clock := platformtest.NewClock(t0) // the start of a minute
	s := startTrack(t, clock, map[string]string{"TRACK_SALE_RATE_LIMIT": "6"})
	p := s.programNoSync(t, nil)
	q := s.programNoSync(t, nil)
	s.sync(t)
	cid := s.click(t, p.code)
	reset := strconv.FormatInt(t0.Add(time.Minute).Unix(), 10)

	calls := []func() reply{
		func() reply { txn := s.txn(); return s.sale(t, p.key, saleOf(txn, cid, 1000, "USD", nil)) },
		func() reply { return s.refund(t, p.key, refundOf("txn_nowhere", 0, nil)) },
	}
	for i := range 6 {
		r := calls[i%2]()
		if r.status == 429 {
			t.Fatalf("call %d refused: %s", i+1, r.raw)
		}
		if r.header.Get("X-RateLimit-Limit") != "6" || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(5-i) ||
			r.header.Get("X-RateLimit-Reset") != reset || r.header.Get("Retry-After") != "" {
			t.Fatalf("call %d: headers %v, want limit 6, remaining %d, reset %s, no Retry-After", i+1, r.header, 5-i, reset)
		}
	}
	for i, call := range calls {
		r := call()
		if r.status != 429 {
			t.Fatalf("call %d past the limit: %d %s", 7+i, r.status, r.raw)
		}
		if _, ok := r.body["data"]; ok {
			t.Fatalf("the typed envelope has no data key: %s", r.raw)
		}
		e, _ := r.body["error"].(map[string]any)
		retry, err := strconv.Atoi(r.header.Get("Retry-After"))
		if e == nil || e["status"] != float64(429) || e["code"] != "rate_limited" || e["message"] == nil || err != nil ||
			retry <= 0 || retry > 60 || e["retry_after_seconds"] != float64(retry) {
			t.Fatalf("429: %s, Retry-After %q", r.raw, r.header.Get("Retry-After"))
		}
		if r.header.Get("X-RateLimit-Limit") != "6" || r.header.Get("X-RateLimit-Remaining") != "0" || r.header.Get("X-RateLimit-Reset") != reset {
			t.Fatalf("429 headers %v", r.header)
		}
	}
	// The refused sale wrote nothing: only the three first sales exist.
	var bs []balance
	s.adminData(t, "GET", fmt.Sprintf("/admin/v1/partners/%d/balances", p.partner), nil, &bs)
	if len(bs) != 1 || bs[0].Balance != 100 {
		t.Fatalf("balances %+v, want the first sale's 100 only (percent: first sale)", bs)
	}
	// Another key of another program is not limited.
	txn := s.txn()
	r := s.sale(t, q.key, saleOf(txn, s.click(t, q.code), 1000, "USD", nil))
	wantSale(t, r, txn, "")
	if r.header.Get("X-RateLimit-Remaining") != "5" {
		t.Fatalf("another key's first call: remaining %q, want 5", r.header.Get("X-RateLimit-Remaining"))
	}
	// A minute on, the key is served again.
	clock.Advance(time.Minute)
	if r := calls[1](); r.status != 404 || r.header.Get("X-RateLimit-Remaining") != "5" {
		t.Fatalf("next window: %d %s remaining %q", r.status, r.raw, r.header.Get("X-RateLimit-Remaining"))
	}
}

// cents100 converts a major-unit amount of a 2-decimal currency to cents.
func cents100(major float64) int64 { return int64(math.Round(major * 100)) }
