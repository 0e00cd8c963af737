package ledger

import (
	"context"
	"fmt"
	"time"
)

// NotificationsLimit is how many notifications Notifications answers.
const NotificationsLimit = 100

// Notifications lists a recipient's latest notifications, newest first.
func (s *Service) Notifications(ctx context.Context, recipientKind string, recipientID int64) ([]Notification, error) {
	if recipientKind != RecipientPartner && recipientKind != RecipientAdvertiser {
		return nil, fmt.Errorf("%w: recipient kind %q", ErrInvalidInput, recipientKind)
	}
	return s.store.Notifications(ctx, recipientKind, recipientID, NotificationsLimit)
}

// Commission reads a commission; ErrCommissionNotFound.
func (s *Service) Commission(ctx context.Context, id int64) (Commission, error) {
	return s.store.Commission(ctx, id)
}

// SaleByTransaction reads the sale of a transaction id within a program
// (programID 0: any program, the id being global); ErrSaleNotFound. A test
// sale is answered like any other (Sale.Test): the caller decides what a
// test key may see.
func (s *Service) SaleByTransaction(ctx context.Context, programID int64, transactionID string) (Sale, error) {
	return s.store.SaleByTransaction(ctx, programID, transactionID)
}

// CommissionDetail is a commission as the admin API shows it: with its
// sale's transaction id ("" for a lead commission) and whether the
// partner's paid withdrawals already cover what is left of it
// (money.PaidOut; never one with nothing left).
type CommissionDetail struct {
	Commission
	TransactionID string
	PaidOut       bool
}

// CommissionDetail reads a commission with its sale's transaction id and
// whether it is paid out; ErrCommissionNotFound.
func (s *Service) CommissionDetail(ctx context.Context, id int64) (CommissionDetail, error) {
	c, err := s.store.Commission(ctx, id)
	if err != nil {
		return CommissionDetail{}, err
	}
	d := CommissionDetail{Commission: c}
	if c.SaleID != 0 {
		sale, err := s.store.SaleByID(ctx, c.SaleID)
		if err != nil {
			return CommissionDetail{}, fmt.Errorf("sale of commission %d: %w", id, err)
		}
		d.TransactionID = sale.TransactionID
	}
	// Paid out is derived from net amounts (money.PaidOut): what a refund
	// took back from the balance was taken back from the payouts too, so
	// a commission with nothing left has no share of any payout. Without
	// this, a prefix of net amounts "covered" a reversed commission after
	// a paid one, or before any payout at all.
	if !c.Credited || c.Net().Minor == 0 {
		return d, nil
	}
	err = s.store.Atomic(ctx, func(tx Tx) error {
		var err error
		d.PaidOut, err = s.paidOut(ctx, tx, c)
		return err
	})
	if err != nil {
		return CommissionDetail{}, err
	}
	return d, nil
}

// SaleDetail is a sale with the ids of its commissions.
type SaleDetail struct {
	Sale
	CommissionIDs []int64
}

// SaleDetail reads the sale of a transaction id (any program) that is a
// test sale when test is set, a live one otherwise; ErrSaleNotFound.
func (s *Service) SaleDetail(ctx context.Context, transactionID string, test bool) (SaleDetail, error) {
	read := func() (Sale, error) { return s.store.SaleByTransaction(ctx, 0, transactionID) }
	if test {
		read = func() (Sale, error) { return s.store.TestSaleByTransaction(ctx, transactionID) }
	}
	sale, err := read()
	if err != nil {
		return SaleDetail{}, err
	}
	if sale.Test != test {
		return SaleDetail{}, fmt.Errorf("sale %q (test %t): %w", transactionID, test, ErrSaleNotFound)
	}
	ids, err := s.store.SaleCommissionIDs(ctx, sale.ID)
	if err != nil {
		return SaleDetail{}, err
	}
	return SaleDetail{Sale: sale, CommissionIDs: ids}, nil
}

// BackstopBacklog counts the sales recorded before olderThan whose
// commission is still undecided.
func (s *Service) BackstopBacklog(ctx context.Context, olderThan time.Time) (int64, error) {
	return s.store.CountSalesWithoutCommission(ctx, olderThan)
}
