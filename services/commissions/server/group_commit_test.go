package server_test

import (
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/obs/obstest"
	"github.com/svc-dev/svc/services/commissions/server"
	tracking "github.com/svc-dev/svc/services/tracking/server"
)

// Concurrent sales share their transactions (pg.Group): the reservations,
// tracking's decisions and the completions of the sales that arrive
// together are each committed by one transaction. Through the gateway,
// rounds of concurrent sales (fresh customers, a second sale of one
// customer, a duplicate transaction id, an unknown click id) are sent
// until each of the three writes has committed a group of more than one
// call; every answer and every row is what the sale alone would have had.
func TestConcurrentSalesShareTheirCommits(t *testing.T) {
	t.Parallel()
	s := startTrackOnly(t, nil, nil, "accounts", "tracking", "commissions")
	p := s.program(t, nil)
	grouped := func() map[string]bool {
		out := map[string]bool{}
		for name, writes := range map[string][]string{
			server.Name: {"sale_reservation", "sale_completion", "refund"}, tracking.Name: {"attribution"},
		} {
			reg := s.st.Instance(name).Platform().Registry
			for _, w := range writes {
				// Some committed transaction carried more than one call.
				out[w] = obstest.HistogramSum(t, reg, "db_group_commit_calls", "write", w) > obstest.Metric(t, reg, "db_group_commit_calls", "write", w)
			}
		}
		return out
	}
	deadline := time.Now().Add(60 * time.Second)
	for round := 0; ; round++ {
		if g := grouped(); g["sale_reservation"] && g["sale_completion"] && g["attribution"] && g["refund"] {
			t.Logf("every write committed a group after %d rounds", round)
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("after %d rounds, groups of more than one call: %v", round, g)
		}
		const fresh = 12
		type call struct {
			txn, click string
			cents      int64
			want       int // status
		}
		var calls []call
		clicks := make([]string, fresh)
		for i := range clicks {
			clicks[i] = s.click(t, p.code)
			calls = append(calls, call{s.txn(), clicks[i], int64(4000 + 400*i), 200})
		}
		dup := s.txn()
		calls = append(calls,
			call{s.txn(), clicks[0], 8000, 200}, // the first customer's second sale
			call{dup, clicks[1], 2000, 0},       // one of these two is recorded, the other answers 409
			call{dup, clicks[1], 2000, 0},
			call{s.txn(), "no_such_click_" + s.uniq(), 900, 400},
		)
		replies := make([]reply, len(calls))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, c := range calls {
			wg.Go(func() {
				<-start
				replies[i] = s.sale(t, p.key, saleOf(c.txn, c.click, c.cents, "USD", nil))
			})
		}
		close(start)
		wg.Wait()
		var dupOK, dupConflict int
		commissioned := map[string]int{}
		var dupSale float64
		for i, c := range calls {
			r := replies[i]
			switch {
			case c.txn == dup && r.status == 200:
				dupOK++
				dupSale, _ = r.body["sale_id"].(float64)
				if out := wantSale(t, r, c.txn, c.click); out.Commission != nil {
					commissioned[c.click]++
				}
			case c.txn == dup:
				e := wantError(t, r, 409, "duplicate_transaction", "Duplicate transaction_id. This sale has already been recorded.")
				d, _ := e["details"].(map[string]any)
				if d == nil {
					t.Fatalf("409 without details: %s", r.raw)
				}
				dupConflict++
				defer func() {
					if d["sale_id"] != dupSale {
						t.Errorf("the 409 names sale %v, the recorded one is %v", d["sale_id"], dupSale)
					}
				}()
			case c.want == 400:
				wantError(t, r, 400, "no_attribution", "Customer not found. Provide customer_key or click_id.")
				s.wantNoSale(t, c.txn)
			default:
				out := wantSale(t, r, c.txn, c.click)
				v, ok := s.saleRecord(t, c.txn, false)
				if !ok || v.ID != out.SaleID || v.AmountCents != c.cents {
					t.Fatalf("sale record %+v (found %v), want sale %d of %d cents", v, ok, out.SaleID, c.cents)
				}
				if out.Commission == nil {
					if len(v.CommissionIDs) != 0 {
						t.Fatalf("sale %s answered no commission but has %v", c.txn, v.CommissionIDs)
					}
					continue
				}
				commissioned[c.click]++
				// 10 % of the sale, credited at once (hold 0).
				if out.Commission.Amount != float64(c.cents)/1000 || out.Commission.Status != "approved" ||
					len(v.CommissionIDs) != 1 || v.CommissionIDs[0] != out.Commission.ID {
					t.Fatalf("sale %s of %d cents: commission %+v, record %+v", c.txn, c.cents, out.Commission, v)
				}
				if cm := s.commission(t, out.Commission.ID); cm.CustomerClick != c.click || cm.Amount != c.cents/10 {
					t.Fatalf("commission %+v of sale %s, want customer %s and %d cents", cm, c.txn, c.click, c.cents/10)
				}
			}
		}
		// A percent program pays once per customer: of the two sales of
		// the first customer (and of the second), exactly one earned.
		for _, click := range clicks {
			if commissioned[click] != 1 {
				t.Fatalf("customer %s: %d commissions, want 1 (%v)", click, commissioned[click], commissioned)
			}
		}
		if dupOK != 1 || dupConflict != 1 {
			t.Fatalf("duplicate pair: %d recorded, %d × 409; want one each", dupOK, dupConflict)
		}
		// Then every recorded sale refunded at once, a quarter of it (a
		// commissioned sale's commission is reduced by a quarter; one
		// without answers no_commission), with an unknown id among them.
		type refundCall struct {
			txn          string
			cents        int64
			commissioned bool
			status       int
			outcome      string
		}
		var refunds []refundCall
		for i, c := range calls {
			r := replies[i]
			if r.status != 200 {
				continue
			}
			_, commissioned := r.body["commission"]
			outcome := "no_commission"
			if commissioned {
				outcome = "refunded"
			}
			refunds = append(refunds, refundCall{c.txn, c.cents / 4, commissioned, 200, outcome})
		}
		refunds = append(refunds, refundCall{"txn_nowhere_" + s.uniq(), 100, false, 404, ""})
		refundReplies := make([]reply, len(refunds))
		start = make(chan struct{})
		for i, c := range refunds {
			wg.Go(func() {
				<-start
				refundReplies[i] = s.refund(t, p.key, refundOf(c.txn, c.cents, nil))
			})
		}
		close(start)
		wg.Wait()
		for i, c := range refunds {
			r := refundReplies[i]
			switch {
			case c.status == 404:
				wantError(t, r, 404, "not_found", "Sale not found for transaction_id")
			case c.commissioned:
				// A quarter of the sale: a quarter of its 10 % commission.
				wantRefund(t, r, "refunded", float64(c.cents*4)/1000/4, 0)
			default:
				wantRefund(t, r, c.outcome, 0, 0)
			}
			if c.status == 200 {
				if v, ok := s.saleRecord(t, c.txn, false); !ok || v.RefundedCents != c.cents {
					t.Fatalf("sale %s after its refund: %+v, want %d cents refunded", c.txn, v, c.cents)
				}
			}
		}
	}
}
