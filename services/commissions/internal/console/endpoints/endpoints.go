// Package endpoints adapts the console's commissions and payouts to go-kit
// endpoints. Business errors (refusals) travel in the response (Failer);
// only infrastructure failures are endpoint errors. Every amount is an
// integer in minor units beside its currency.
package endpoints

import (
	"context"
	"time"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/commissions/internal/console"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
)

// Service is the console's use cases (console.Service).
type Service interface {
	Check(ctx context.Context, userID, programID int64, write bool) error
	Commissions(ctx context.Context, userID, programID int64, f console.Filter, after *console.Cursor, limit int) (func(context.Context, func(console.Commission) error) error, error)
	Money(ctx context.Context, userID, programID int64, after console.MoneyCursor, limit int) ([]console.PartnerMoney, error)
	Payouts(ctx context.Context, userID, programID int64) (func(ctx context.Context, afterID int64, limit int, each func(ledger.Withdrawal) error) error, error)
	OpenPayout(ctx context.Context, userID, programID, partnerID int64, currency string, amount int64) (ledger.Withdrawal, error)
	PayPayout(ctx context.Context, userID, programID, id int64, reference string) (ledger.Withdrawal, error)
	CancelPayout(ctx context.Context, userID, programID, id int64) (ledger.Withdrawal, error)
}

// Set holds one endpoint per route.
type Set struct {
	Commissions, Payouts, OpenPayout, PayPayout, CancelPayout endpoint.Endpoint
}

// New builds the set, every endpoint decorated with mw, outermost first.
func New(svc Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		Commissions:  obs.Decorate("console_commissions", makeCommissions(svc), mw...),
		Payouts:      obs.Decorate("console_payouts", makePayouts(svc), mw...),
		OpenPayout:   obs.Decorate("console_open_payout", makeOpenPayout(svc), mw...),
		PayPayout:    obs.Decorate("console_pay_payout", makeClosePayout(svc, true), mw...),
		CancelPayout: obs.Decorate("console_cancel_payout", makeClosePayout(svc, false), mw...),
	}
}

// failed is a refusal (a business error) or an infrastructure failure: the
// first travels in the response, the second is the endpoint's error.
func failed(err error) bool { return errkind.Of(err) != errkind.Internal }

// Target is who asks about which program; Err is what the transport could
// not decode, reported after the access check.
type Target struct {
	UserID, ProgramID int64
	Err               error
}

// CommissionsRequest lists commissions; CSV reads every row from the
// cursor on instead of a page.
type CommissionsRequest struct {
	Target
	Filter console.Filter
	After  *console.Cursor
	Limit  int
	CSV    bool
}

// CommissionView is one commission as the console shows it.
type CommissionView struct {
	ID              int64      `json:"id"`
	SaleID          *int64     `json:"sale_id"`
	TransactionID   *string    `json:"transaction_id"`
	PartnerID       int64      `json:"partner_id"`
	CustomerClickID string     `json:"customer_click_id"`
	Kind            string     `json:"kind"`
	Status          string     `json:"status"`
	Amount          int64      `json:"amount"`
	Currency        string     `json:"currency"`
	RefundedAmount  int64      `json:"refunded_amount"`
	Test            bool       `json:"test"`
	HoldUntil       time.Time  `json:"hold_until"`
	CreatedAt       time.Time  `json:"created_at"`
	ApprovedAt      *time.Time `json:"approved_at"`
}

// ViewCommission shows c.
func ViewCommission(c console.Commission) CommissionView {
	v := CommissionView{ID: c.ID, PartnerID: c.PartnerID, CustomerClickID: c.CustomerClickID, Kind: c.Kind, Status: c.Status,
		Amount: c.Amount, Currency: c.Currency, RefundedAmount: c.Refunded, Test: c.Test, HoldUntil: c.HoldUntil, CreatedAt: c.CreatedAt,
		ApprovedAt: c.ApprovedAt}
	if c.SaleID != 0 {
		id, tid := c.SaleID, c.TransactionID
		v.SaleID, v.TransactionID = &id, &tid
	}
	return v
}

// CommissionsResponse is a page (Data, Next: nil on the last) or, for CSV,
// the reader of the rows (Rows), which the transport streams.
type CommissionsResponse struct {
	Data []CommissionView
	Next *console.Cursor
	Rows func(context.Context, func(console.Commission) error) error
	Err  error
}

// Failed is the refusal.
func (r CommissionsResponse) Failed() error { return r.Err }

func makeCommissions(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(CommissionsRequest)
		if req.Err != nil {
			return CommissionsResponse{Err: checkFirst(ctx, svc, req.Target, false)}, nil
		}
		limit := req.Limit + 1 // one more: is there a next page?
		if req.CSV {
			limit = 0
		}
		rows, err := svc.Commissions(ctx, req.UserID, req.ProgramID, req.Filter, req.After, limit)
		if err != nil {
			if failed(err) {
				return CommissionsResponse{Err: err}, nil
			}
			return nil, err
		}
		if req.CSV {
			return CommissionsResponse{Rows: rows}, nil
		}
		resp := CommissionsResponse{Data: []CommissionView{}}
		var last console.Commission
		err = rows(ctx, func(c console.Commission) error {
			if len(resp.Data) == req.Limit {
				resp.Next = &console.Cursor{CreatedAt: last.CreatedAt, ID: last.ID}
				return nil
			}
			resp.Data, last = append(resp.Data, ViewCommission(c)), c
			return nil
		})
		if err != nil {
			return nil, err
		}
		return resp, nil
	}
}

// checkFirst answers a request the transport could not decode: the access
// refusal when there is one, otherwise the decoding problem.
func checkFirst(ctx context.Context, svc Service, t Target, write bool) error {
	if err := svc.Check(ctx, t.UserID, t.ProgramID, write); err != nil {
		return err
	}
	return t.Err
}

// PayoutsRequest lists the program's money and payouts; AfterID pages the
// payouts (0: from the newest), MoneyAfter the partners' money (Limit rows
// each). CSV reads every payout instead of a page.
type PayoutsRequest struct {
	Target
	AfterID    int64
	MoneyAfter console.MoneyCursor
	Limit      int
	CSV        bool
}

// MoneyView is a partner's money in the program and one currency.
type MoneyView struct {
	PartnerID   int64  `json:"partner_id"`
	Currency    string `json:"currency"`
	Earned      int64  `json:"earned"`
	Paid        int64  `json:"paid"`
	OpenPayouts int64  `json:"open_payouts"`
	Balance     int64  `json:"balance"`
	Available   int64  `json:"available"`
}

// PayoutView is a payout (a withdrawal of the program).
type PayoutView struct {
	ID              int64     `json:"id"`
	PartnerID       int64     `json:"partner_id"`
	Currency        string    `json:"currency"`
	Amount          int64     `json:"amount"`
	RequestedAmount int64     `json:"requested_amount"`
	Status          string    `json:"status"`
	Reference       *string   `json:"reference"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
}

// ViewPayout shows w.
func ViewPayout(w ledger.Withdrawal) PayoutView {
	v := PayoutView{ID: w.ID, PartnerID: w.PartnerID, Currency: string(w.Amount.Currency), Amount: w.Amount.Minor,
		RequestedAmount: w.Requested, Status: w.Status, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
	if w.Reference != "" {
		ref := w.Reference
		v.Reference = &ref
	}
	return v
}

// PayoutsData is the JSON answer's data: a page of the partners' money
// and a page of payouts.
type PayoutsData struct {
	Balances []MoneyView  `json:"balances"`
	Payouts  []PayoutView `json:"payouts"`
}

// PayoutsResponse is the JSON page (Data; Next: the payout id to continue
// after, 0 on the last page; MoneyNext: the money row to continue after,
// nil on the last page) or, for CSV, the reader of every payout (Rows).
type PayoutsResponse struct {
	Data      PayoutsData
	Next      int64
	MoneyNext *console.MoneyCursor
	Rows      func(ctx context.Context, each func(ledger.Withdrawal) error) error
	Err       error
}

// Failed is the refusal.
func (r PayoutsResponse) Failed() error { return r.Err }

func makePayouts(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(PayoutsRequest)
		if req.Err != nil {
			return PayoutsResponse{Err: checkFirst(ctx, svc, req.Target, false)}, nil
		}
		read, err := svc.Payouts(ctx, req.UserID, req.ProgramID)
		if err != nil {
			if failed(err) {
				return PayoutsResponse{Err: err}, nil
			}
			return nil, err
		}
		if req.CSV {
			return PayoutsResponse{Rows: func(ctx context.Context, each func(ledger.Withdrawal) error) error {
				return read(ctx, req.AfterID, 0, each)
			}}, nil
		}
		money, err := svc.Money(ctx, req.UserID, req.ProgramID, req.MoneyAfter, req.Limit+1)
		if err != nil {
			return nil, err
		}
		resp := PayoutsResponse{Data: PayoutsData{Balances: make([]MoneyView, 0, len(money)), Payouts: []PayoutView{}}}
		if len(money) > req.Limit {
			money = money[:req.Limit]
			last := money[len(money)-1]
			resp.MoneyNext = &console.MoneyCursor{PartnerID: last.PartnerID, Currency: last.Currency}
		}
		for _, m := range money {
			resp.Data.Balances = append(resp.Data.Balances, MoneyView{PartnerID: m.PartnerID, Currency: m.Currency, Earned: m.Earned,
				Paid: m.Paid, OpenPayouts: m.Open, Balance: m.Balance, Available: m.Available})
		}
		err = read(ctx, req.AfterID, req.Limit+1, func(w ledger.Withdrawal) error {
			if len(resp.Data.Payouts) == req.Limit {
				resp.Next = resp.Data.Payouts[len(resp.Data.Payouts)-1].ID
				return nil
			}
			resp.Data.Payouts = append(resp.Data.Payouts, ViewPayout(w))
			return nil
		})
		if err != nil {
			return nil, err
		}
		return resp, nil
	}
}

// OpenPayoutRequest opens a payout; Amount 0: all that is available.
type OpenPayoutRequest struct {
	Target
	PartnerID int64
	Currency  string
	Amount    int64
}

// PayoutRequest pays (with an optional reference) or cancels a payout.
type PayoutRequest struct {
	Target
	PayoutID  int64
	Reference string
}

// PayoutResponse is one payout.
type PayoutResponse struct {
	Data PayoutView `json:"data"`
	Err  error      `json:"-"`
}

// Failed is the refusal.
func (r PayoutResponse) Failed() error { return r.Err }

func payoutResponse(w ledger.Withdrawal, err error) (any, error) {
	if err != nil {
		if failed(err) {
			return PayoutResponse{Err: err}, nil
		}
		return nil, err
	}
	return PayoutResponse{Data: ViewPayout(w)}, nil
}

func makeOpenPayout(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(OpenPayoutRequest)
		if req.Err != nil {
			return PayoutResponse{Err: checkFirst(ctx, svc, req.Target, true)}, nil
		}
		return payoutResponse(svc.OpenPayout(ctx, req.UserID, req.ProgramID, req.PartnerID, req.Currency, req.Amount))
	}
}

func makeClosePayout(svc Service, pay bool) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(PayoutRequest)
		if req.Err != nil {
			return PayoutResponse{Err: checkFirst(ctx, svc, req.Target, true)}, nil
		}
		if pay {
			return payoutResponse(svc.PayPayout(ctx, req.UserID, req.ProgramID, req.PayoutID, req.Reference))
		}
		return payoutResponse(svc.CancelPayout(ctx, req.UserID, req.ProgramID, req.PayoutID))
	}
}
