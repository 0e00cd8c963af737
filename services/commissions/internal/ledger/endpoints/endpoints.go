// Package endpoints adapts the ledger to go-kit endpoints: one request and
// response type per admin operation. Business errors travel in the response
// (Failer); only infrastructure failures are endpoint errors. Every amount
// is an integer in minor units beside its currency.
package endpoints

import (
	"context"
	"time"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
)

// Service is what the admin endpoints need: the ledger's reads and
// withdrawal use cases, and one run of the approval scheduler now.
type Service interface {
	CommissionDetail(ctx context.Context, id int64) (ledger.CommissionDetail, error)
	SaleDetail(ctx context.Context, transactionID string, test bool) (ledger.SaleDetail, error)
	Balances(ctx context.Context, partnerID int64) ([]ledger.Balance, error)
	OpenWithdrawal(ctx context.Context, partnerID int64, currency string, amount int64) (ledger.Withdrawal, error)
	PayWithdrawal(ctx context.Context, id int64) (ledger.Withdrawal, error)
	CancelWithdrawal(ctx context.Context, id int64) (ledger.Withdrawal, error)
	Withdrawals(ctx context.Context, partnerID int64) ([]ledger.Withdrawal, error)
	Notifications(ctx context.Context, recipientKind string, recipientID int64) ([]ledger.Notification, error)
	// ApproveDueNow runs the approval scheduler once (with its metrics)
	// and answers how many commissions it approved.
	ApproveDueNow(ctx context.Context) (int, error)
}

// Set holds one endpoint per admin operation.
type Set struct {
	GetCommission    endpoint.Endpoint
	GetSale          endpoint.Endpoint
	Balances         endpoint.Endpoint
	OpenWithdrawal   endpoint.Endpoint
	PayWithdrawal    endpoint.Endpoint
	CancelWithdrawal endpoint.Endpoint
	Withdrawals      endpoint.Endpoint
	Notifications    endpoint.Endpoint
	ApproveDue       endpoint.Endpoint
}

// New builds the set and decorates every endpoint with mw, outermost first.
func New(svc Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		GetCommission:    obs.Decorate("get_commission", makeGetCommission(svc), mw...),
		GetSale:          obs.Decorate("get_sale", makeGetSale(svc), mw...),
		Balances:         obs.Decorate("balances", makeBalances(svc), mw...),
		OpenWithdrawal:   obs.Decorate("open_withdrawal", makeOpenWithdrawal(svc), mw...),
		PayWithdrawal:    obs.Decorate("pay_withdrawal", makeCloseWithdrawal(svc.PayWithdrawal), mw...),
		CancelWithdrawal: obs.Decorate("cancel_withdrawal", makeCloseWithdrawal(svc.CancelWithdrawal), mw...),
		Withdrawals:      obs.Decorate("withdrawals", makeWithdrawals(svc), mw...),
		Notifications:    obs.Decorate("notifications", makeNotifications(svc), mw...),
		ApproveDue:       obs.Decorate("approve_due", makeApproveDue(svc), mw...),
	}
}

// Response is what every admin operation answers: Data under "data", or a
// business error.
type Response[T any] struct {
	Data T     `json:"data"`
	Err  error `json:"-"`
}

// Failed implements go-kit's endpoint.Failer.
func (r Response[T]) Failed() error { return r.Err }

var (
	_ endpoint.Failer = Response[CommissionView]{}
	_ endpoint.Failer = Response[SaleView]{}
	_ endpoint.Failer = Response[[]BalanceView]{}
	_ endpoint.Failer = Response[OpenedView]{}
	_ endpoint.Failer = Response[WithdrawalView]{}
	_ endpoint.Failer = Response[[]WithdrawalView]{}
	_ endpoint.Failer = Response[[]NotificationView]{}
	_ endpoint.Failer = Response[ApprovedView]{}
)

// respond splits domain errors (answered to the client) from
// infrastructure failures (endpoint errors, answered 500).
func respond[T any](data T, err error) (any, error) {
	if err != nil {
		if errkind.Of(err) != errkind.Internal {
			return Response[T]{Err: err}, nil
		}
		return nil, err
	}
	return Response[T]{Data: data}, nil
}

// IDRequest names a commission, withdrawal or partner by id.
type IDRequest struct{ ID int64 }

// SaleRequest names a sale by transaction id; Test picks the test sale.
type SaleRequest struct {
	TransactionID string
	Test          bool
}

// OpenWithdrawalRequest opens a withdrawal; Amount 0: all available.
type OpenWithdrawalRequest struct {
	PartnerID int64
	Currency  string
	Amount    int64
}

// NotificationsRequest names a recipient.
type NotificationsRequest struct {
	RecipientKind string
	RecipientID   int64
}

// CommissionView is a commission. CustomerClickID is the customer's click
// id from the attribution decision (sale) or the lead event (lead).
type CommissionView struct {
	ID              int64      `json:"id"`
	SaleID          *int64     `json:"sale_id"`
	TransactionID   string     `json:"transaction_id"`
	ProgramID       int64      `json:"program_id"`
	PartnerID       int64      `json:"partner_id"`
	CustomerClickID string     `json:"customer_click_id"`
	Kind            string     `json:"kind"`
	Status          string     `json:"status"`
	Amount          int64      `json:"amount"`
	Currency        string     `json:"currency"`
	RefundedAmount  int64      `json:"refunded_amount"`
	Reason          string     `json:"reason"`
	PaidOut         bool       `json:"paid_out"`
	CreatedAt       time.Time  `json:"created_at"`
	ApprovedAt      *time.Time `json:"approved_at"`
}

func makeGetCommission(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		d, err := svc.CommissionDetail(ctx, req.(IDRequest).ID)
		if err != nil {
			return respond(CommissionView{}, err)
		}
		v := CommissionView{
			ID: d.ID, TransactionID: d.TransactionID, ProgramID: d.ProgramID, PartnerID: d.PartnerID, CustomerClickID: d.CustomerClickID,
			Kind: d.Kind, Status: string(d.Status), Amount: d.Amount.Minor, Currency: string(d.Amount.Currency),
			RefundedAmount: d.Refunded, Reason: d.Reason, PaidOut: d.PaidOut, CreatedAt: d.CreatedAt, ApprovedAt: d.ApprovedAt,
		}
		if d.SaleID != 0 {
			id := d.SaleID
			v.SaleID = &id
		}
		return respond(v, nil)
	}
}

// SaleView is a sale with its commissions' ids.
type SaleView struct {
	ID            int64   `json:"id"`
	TransactionID string  `json:"transaction_id"`
	ProgramID     int64   `json:"program_id"`
	AmountCents   int64   `json:"amount_cents"`
	Currency      string  `json:"currency"`
	RefundedCents int64   `json:"refunded_cents"`
	IsTest        bool    `json:"is_test"`
	CommissionIDs []int64 `json:"commission_ids"`
}

func makeGetSale(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(SaleRequest)
		d, err := svc.SaleDetail(ctx, r.TransactionID, r.Test)
		if err != nil {
			return respond(SaleView{}, err)
		}
		ids := d.CommissionIDs
		if ids == nil {
			ids = []int64{}
		}
		return respond(SaleView{
			ID: d.ID, TransactionID: d.TransactionID, ProgramID: d.ProgramID, AmountCents: d.Amount.Minor,
			Currency: string(d.Amount.Currency), RefundedCents: d.RefundedCents, IsTest: d.Test, CommissionIDs: ids,
		}, nil)
	}
}

// BalanceView is a partner's balance in one currency: the balance (may be
// negative), the open withdrawals' total and what is available.
type BalanceView struct {
	Currency        string `json:"currency"`
	Balance         int64  `json:"balance"`
	OpenWithdrawals int64  `json:"open_withdrawals"`
	Available       int64  `json:"available"`
}

func makeBalances(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		bs, err := svc.Balances(ctx, req.(IDRequest).ID)
		out := make([]BalanceView, 0, len(bs))
		for _, b := range bs {
			out = append(out, BalanceView{Currency: string(b.Amount.Currency), Balance: b.Amount.Minor, OpenWithdrawals: b.Open, Available: b.Available})
		}
		return respond(out, err)
	}
}

// OpenedView answers an opened withdrawal.
type OpenedView struct {
	ID     int64  `json:"id"`
	Amount int64  `json:"amount"`
	Status string `json:"status"`
}

func makeOpenWithdrawal(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(OpenWithdrawalRequest)
		w, err := svc.OpenWithdrawal(ctx, r.PartnerID, r.Currency, r.Amount)
		return respond(OpenedView{ID: w.ID, Amount: w.Amount.Minor, Status: w.Status}, err)
	}
}

// WithdrawalView is a withdrawal: Amount is what it pays (reduced while
// open to fit the balance), RequestedAmount what was asked.
type WithdrawalView struct {
	ID              int64     `json:"id"`
	PartnerID       int64     `json:"partner_id"`
	Currency        string    `json:"currency"`
	Amount          int64     `json:"amount"`
	RequestedAmount int64     `json:"requested_amount"`
	Status          string    `json:"status"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
}

func withdrawalView(w ledger.Withdrawal) WithdrawalView {
	return WithdrawalView{
		ID: w.ID, PartnerID: w.PartnerID, Currency: string(w.Amount.Currency), Amount: w.Amount.Minor,
		RequestedAmount: w.Requested, Status: w.Status, CreatedAt: w.CreatedAt.UTC(), UpdatedAt: w.UpdatedAt.UTC(),
	}
}

func makeCloseWithdrawal(close func(context.Context, int64) (ledger.Withdrawal, error)) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		w, err := close(ctx, req.(IDRequest).ID)
		return respond(withdrawalView(w), err)
	}
}

func makeWithdrawals(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		ws, err := svc.Withdrawals(ctx, req.(IDRequest).ID)
		out := make([]WithdrawalView, 0, len(ws))
		for _, w := range ws {
			out = append(out, withdrawalView(w))
		}
		return respond(out, err)
	}
}

// NotificationView is a notification; Payload is its JSON object.
type NotificationView struct {
	ID        int64          `json:"id"`
	Kind      string         `json:"kind"`
	Payload   map[string]any `json:"payload"`
	CreatedAt time.Time      `json:"created_at"`
}

func makeNotifications(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, req any) (any, error) {
		r := req.(NotificationsRequest)
		ns, err := svc.Notifications(ctx, r.RecipientKind, r.RecipientID)
		out := make([]NotificationView, 0, len(ns))
		for _, n := range ns {
			out = append(out, NotificationView{ID: n.ID, Kind: n.Kind, Payload: n.Payload, CreatedAt: n.CreatedAt})
		}
		return respond(out, err)
	}
}

// ApprovedView answers approve-due.
type ApprovedView struct {
	Approved int `json:"approved"`
}

func makeApproveDue(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, _ any) (any, error) {
		n, err := svc.ApproveDueNow(ctx)
		return respond(ApprovedView{Approved: n}, err)
	}
}
