// Package endpoints adapts the track service to go-kit endpoints: the sale
// and refund routes' request and response types. Refusals travel in the
// response (Failer); only failures are endpoint errors.
package endpoints

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/go-kit/kit/endpoint"

	"github.com/svc-dev/svc/libs/obs"
	"github.com/svc-dev/svc/services/commissions/internal/money"
	"github.com/svc-dev/svc/services/commissions/internal/track"
)

// Service is the track use cases (*track.Service).
type Service interface {
	Sale(ctx context.Context, in track.SaleInput) (track.SaleOutput, error)
	Refund(ctx context.Context, in track.RefundInput) (track.RefundOutput, error)
}

// Set holds the routes' endpoints.
type Set struct {
	Sale   endpoint.Endpoint
	Refund endpoint.Endpoint
}

// New builds the set and decorates every endpoint with mw, outermost first.
func New(svc Service, mw ...obs.EndpointMiddleware) Set {
	return Set{
		Sale:   obs.Decorate("track_sale", makeSale(svc), mw...),
		Refund: obs.Decorate("track_refund", makeRefund(svc), mw...),
	}
}

// SaleResponse answers POST /api/v1/track/sale: a recorded sale, or a test
// sale (Data). Fields are in JSON-name order; those of the other shape are
// zero and omitted.
type SaleResponse struct {
	ClickID        string          `json:"click_id,omitempty"`
	Commission     *CommissionView `json:"commission,omitempty"`
	CustomerStatus string          `json:"customer_status,omitempty"`
	Data           *TestSaleData   `json:"data,omitempty"`
	Message        string          `json:"message"`
	SaleID         int64           `json:"sale_id,omitempty"`
	Success        bool            `json:"success"`
	TransactionID  string          `json:"transaction_id,omitempty"`
	Err            error           `json:"-"`
}

// Failed implements endpoint.Failer.
func (r SaleResponse) Failed() error { return r.Err }

// CommissionView is the commission a sale created: its amount in major
// units of its currency, as deductionAmount is.
type CommissionView struct {
	ID       int64       `json:"id"`
	Status   string      `json:"status"`
	Amount   json.Number `json:"amount"`
	Currency string      `json:"currency"`
}

// TestSaleData is a test sale, in the shape of the other routes' test
// events.
type TestSaleData struct {
	EventID       int64  `json:"eventId"`
	ProgramID     int64  `json:"programId"`
	TestMode      bool   `json:"test_mode"`
	TransactionID string `json:"transaction_id"`
}

func makeSale(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		out, err := svc.Sale(ctx, request.(track.SaleInput))
		if err != nil {
			return SaleResponse{Err: err}, failure(err)
		}
		if out.Test {
			return SaleResponse{Success: true, Message: track.MsgTestSale, Data: &TestSaleData{
				EventID: out.SaleID, ProgramID: out.ProgramID, TestMode: true, TransactionID: out.TransactionID,
			}}, nil
		}
		resp := SaleResponse{
			Success: true, Message: track.MsgSaleTracked, SaleID: out.SaleID, TransactionID: out.TransactionID,
			ClickID: out.ClickID, CustomerStatus: out.CustomerStatus,
		}
		if c := out.Commission; c != nil {
			resp.Commission = &CommissionView{ID: c.ID, Status: string(c.Status), Amount: c.Amount.Number(), Currency: string(c.Amount.Currency)}
		}
		return resp, nil
	}
}

// RefundResponse answers POST /api/v1/track/refund in the spec's shapes.
type RefundResponse struct {
	CommissionID    int64        `json:"commission_id,omitempty"`
	DeductionAmount *json.Number `json:"deductionAmount,omitempty"`
	Message         string       `json:"message,omitempty"`
	Reason          string       `json:"reason,omitempty"`
	Status          string       `json:"status,omitempty"`
	Success         bool         `json:"success"`
	Test            bool         `json:"test,omitempty"`
	Err             error        `json:"-"`
}

// Failed implements endpoint.Failer.
func (r RefundResponse) Failed() error { return r.Err }

// TestKeyRefund is the test key's answer, given before the body is read.
func TestKeyRefund() RefundResponse { return RefundResponse{Success: true, Test: true} }

func makeRefund(svc Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		out, err := svc.Refund(ctx, request.(track.RefundInput))
		if err != nil {
			return RefundResponse{Err: err}, failure(err)
		}
		resp := RefundResponse{Success: true, Status: out.Outcome, CommissionID: out.CommissionID}
		switch out.Outcome {
		case string(money.OutcomeReversed), string(money.OutcomeRefunded):
			n := out.Deduction.Number()
			resp.DeductionAmount = &n
		case string(money.OutcomeSkipped):
			resp.Reason = out.SkipReason
		default: // no_commission
			resp.CommissionID, resp.Message = 0, track.MsgNoCommission
		}
		return resp, nil
	}
}

// failure is err when it is a failure (5xx), nil for a refusal the client
// reads (which still travels in the response).
func failure(err error) error {
	var te *track.Error
	if errors.As(err, &te) {
		return nil
	}
	return err
}
