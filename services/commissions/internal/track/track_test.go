package track_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/svc-dev/svc/services/commissions/internal/attribution"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
	"github.com/svc-dev/svc/services/commissions/internal/track"
)

// The spec's "400 partnerId required to create commission" row: tracking
// attributes the payment but the customer has no partner, so the ledger
// records the sale (its id consumed) without commission. The public routes
// cannot provoke a partnerless customer (every click comes from a partner's
// link), so the rule is checked here on the use case: the message, the
// no_attribution kind, and the reservation kept (never released).
func TestSaleWithoutPartnerKeepsTheSaleAndAnswersPartnerRequired(t *testing.T) {
	l := &ledgerStub{complete: func(int64, int64, int64) (ledger.SaleResult, error) {
		return ledger.SaleResult{}, &ledger.CommissionNotCreatedError{SaleID: 7, Cause: ledger.ErrPartnerRequired}
	}}
	attr := attributorFunc(func(context.Context, attribution.Request) (attribution.Decision, error) {
		return attribution.Decision{Outcome: attribution.OutcomeAttributed, CustomerID: 3, PartnerID: 0}, nil
	})
	svc, err := track.New(l, attr, time.Now, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Sale(context.Background(), track.SaleInput{
		Key: track.Key{ID: 1, ProgramID: 2}, TransactionID: "t1", AmountCents: 100, Currency: "USD", ClickID: "c",
	})
	var te *track.Error
	if !errors.As(err, &te) || te.Message != track.MsgPartnerRequired || !errors.Is(err, track.ErrNoAttribution) {
		t.Fatalf("err = %v, want %q (no_attribution)", err, track.MsgPartnerRequired)
	}
	if l.released != 0 || l.completed != 1 {
		t.Fatalf("released %d, completed %d: the sale must stay recorded", l.released, l.completed)
	}
}

type attributorFunc func(context.Context, attribution.Request) (attribution.Decision, error)

func (f attributorFunc) Attribute(ctx context.Context, r attribution.Request) (attribution.Decision, error) {
	return f(ctx, r)
}

// ledgerStub records the calls Sale makes; only reservation and completion
// are expected.
type ledgerStub struct {
	complete            func(saleID, customerID, partnerID int64) (ledger.SaleResult, error)
	released, completed int
}

func (l *ledgerStub) RecordSale(context.Context, ledger.SaleInput) (ledger.SaleResult, error) {
	return ledger.SaleResult{}, errors.New("unexpected RecordSale")
}

func (l *ledgerStub) ReserveSale(_ context.Context, in ledger.SaleInput, _ []byte) (ledger.Sale, error) {
	return ledger.Sale{ID: 7, TransactionID: in.TransactionID, Reserved: true}, nil
}

func (l *ledgerStub) CompleteSale(_ context.Context, saleID int64, who ledger.Attributed) (ledger.SaleResult, error) {
	l.completed++
	return l.complete(saleID, who.CustomerID, who.PartnerID)
}

func (l *ledgerStub) ReleaseSale(context.Context, int64) (bool, error) {
	l.released++
	return true, nil
}

func (l *ledgerStub) Refund(context.Context, ledger.RefundInput) (ledger.RefundResult, error) {
	return ledger.RefundResult{}, errors.New("unexpected Refund")
}
