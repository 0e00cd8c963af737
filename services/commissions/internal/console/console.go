// Package console is the brand console's commissions and payouts (issue
// 21): a member of a program reads its commissions, each partner's money
// in the program and the program's payouts, and (with tracking:write)
// opens, pays and cancels payouts. Access is decided on the catalog
// replica's memberships; the money rules are the ledger's (package
// ledger), applied to the program's share of a partner's money. No HTTP or
// SQL here.
package console

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/services/commissions/internal/ledger"
)

// Permissions of a membership (accounts' names).
const (
	PermissionRead  = "tracking:read"
	PermissionWrite = "tracking:write"
)

// Error is a refusal with the message the client reads; Field names the
// parameter of a 400.
type Error struct {
	Kind    error
	Message string
	Field   string
}

func (e *Error) Error() string { return e.Message }

// Unwrap gives the kind.
func (e *Error) Unwrap() error { return e.Kind }

// The refusals, with the settings routes' words for access.
var (
	ErrNoAccess        = &Error{Kind: errkind.Forbidden, Message: "You do not have access to this program"}
	ErrReadOnly        = &Error{Kind: errkind.Forbidden, Message: "You do not have permission to change this program's payouts"}
	ErrPartnerNotFound = &Error{Kind: errkind.NotFound, Message: "Partner not found in this program"}
	ErrPayoutNotFound  = &Error{Kind: errkind.NotFound, Message: "Payout not found in this program"}
	ErrPayoutNotOpen   = &Error{Kind: errkind.Conflict, Message: "Payout is not open"}
	ErrBadStatus       = &Error{Kind: errkind.Invalid, Field: "status", Message: "status must be one of " + strings.Join(Statuses, ", ")}
	ErrBadPartner      = &Error{Kind: errkind.Invalid, Field: "partner_id", Message: "partner_id must be a positive whole number"}
	ErrBadFrom         = &Error{Kind: errkind.Invalid, Field: "from", Message: "from must be a date (YYYY-MM-DD) or an RFC 3339 time"}
	ErrBadTo           = &Error{Kind: errkind.Invalid, Field: "to", Message: "to must be a date (YYYY-MM-DD) or an RFC 3339 time"}
	ErrEmptyRange      = &Error{Kind: errkind.Invalid, Field: "to", Message: "to must be after from"}
	ErrBadLimit        = &Error{Kind: errkind.Invalid, Field: "limit", Message: fmt.Sprintf("limit must be a whole number from 1 to %d", MaxLimit)}
	ErrBadCursor       = &Error{Kind: errkind.Invalid, Field: "cursor", Message: "cursor must be the next_cursor of a previous page"}
	ErrBadMoneyCursor  = &Error{Kind: errkind.Invalid, Field: "balances_cursor", Message: "balances_cursor must be the balances_next_cursor of a previous page"}
)

// Statuses a commission can have (the status filter's values).
var Statuses = []string{"pending", "approved", "refunded", "reversed"}

// Page sizes, as the other console lists.
const (
	DefaultLimit = 50
	MaxLimit     = 100
)

// Member is a user's membership of a program as the replica has it.
type Member struct {
	Active      bool
	Permissions []string
}

// Filter selects commissions: "" and zero values select all. From is
// inclusive, To exclusive, both on created_at.
type Filter struct {
	Status    string
	PartnerID int64
	From, To  time.Time
}

// Cursor is the position after the last row of a page: commissions are
// listed newest first by (created_at, id).
type Cursor struct {
	CreatedAt time.Time
	ID        int64
}

// Commission is one row of the commissions list.
type Commission struct {
	ID              int64
	SaleID          int64  // 0 for a lead commission
	TransactionID   string // "" for a lead commission
	PartnerID       int64
	CustomerClickID string
	Kind            string
	Status          string
	Amount          int64
	Currency        string
	Refunded        int64
	Test            bool
	HoldUntil       time.Time
	CreatedAt       time.Time
	ApprovedAt      *time.Time
}

// PartnerMoney is a partner's money in one program and currency: earned is
// the net of its credited commissions there, paid and open the program's
// payouts; balance is earned minus paid; available is what a payout may
// take now (ledger.ProgramAvailable: never more than the partner's whole
// available balance).
type PartnerMoney struct {
	PartnerID int64
	Currency  string
	Earned    int64
	Paid      int64
	Open      int64
	Balance   int64
	Available int64
}

// MoneyCursor is where a page of the payouts list's money continues: after
// this partner and currency (the zero value: from the first).
type MoneyCursor struct {
	PartnerID int64
	Currency  string
}

// Store is what the console reads. Each listing calls each per row, in
// order, while it reads (rows are never collected: a CSV answer streams
// them); limit 0 reads every row.
type Store interface {
	Member(ctx context.Context, programID, userID int64) (Member, bool, error)
	PartnerInProgram(ctx context.Context, programID, partnerID int64) (bool, error)
	Commissions(ctx context.Context, programID int64, f Filter, after *Cursor, limit int, each func(Commission) error) error
	// Money lists every partner with money in the program, by partner
	// and currency, with their whole available balance in the currency.
	// Money lists a page of the partners' money in the program, by
	// partner and currency, after the cursor.
	Money(ctx context.Context, programID int64, after MoneyCursor, limit int, each func(m PartnerMoney) error) error
	// Payouts lists the program's payouts, newest first, after the id
	// afterID (0: from the newest).
	Payouts(ctx context.Context, programID, afterID int64, limit int, each func(ledger.Withdrawal) error) error
}

// Ledger is the ledger's program-scoped payout use cases.
type Ledger interface {
	OpenProgramWithdrawal(ctx context.Context, programID, partnerID int64, currency string, amount int64) (ledger.Withdrawal, error)
	PayProgramWithdrawal(ctx context.Context, programID, id int64, reference string) (ledger.Withdrawal, error)
	CancelProgramWithdrawal(ctx context.Context, programID, id int64) (ledger.Withdrawal, error)
}

// Service is the console's commissions and payouts use cases. userID comes
// from a verified dashboard session. A listing checks access before it
// returns; the rows are then read by the returned function (the transport
// streams them).
type Service struct {
	store  Store
	ledger Ledger
}

// New checks the wiring.
func New(store Store, l Ledger) (*Service, error) {
	if store == nil || l == nil {
		return nil, errors.New("console: store and ledger are required")
	}
	return &Service{store: store, ledger: l}, nil
}

// Check is the access check alone: the transport runs it before it
// reports a bad request, so a non-member or a reader learns nothing from
// the validation of what they sent.
func (s *Service) Check(ctx context.Context, userID, programID int64, write bool) error {
	return s.authorize(ctx, userID, programID, write)
}

// authorize admits an active member holding tracking:read, and
// tracking:write too when write is set.
func (s *Service) authorize(ctx context.Context, userID, programID int64, write bool) error {
	if userID <= 0 || programID <= 0 {
		return ErrNoAccess
	}
	m, ok, err := s.store.Member(ctx, programID, userID)
	if err != nil {
		return fmt.Errorf("membership of user %d in program %d: %w", userID, programID, err)
	}
	if !ok || !m.Active || !slices.Contains(m.Permissions, PermissionRead) {
		return ErrNoAccess
	}
	if write && !slices.Contains(m.Permissions, PermissionWrite) {
		return ErrReadOnly
	}
	return nil
}

// partner refuses a partner that is not in the program.
func (s *Service) partner(ctx context.Context, programID, partnerID int64) error {
	ok, err := s.store.PartnerInProgram(ctx, programID, partnerID)
	if err != nil {
		return fmt.Errorf("partner %d in program %d: %w", partnerID, programID, err)
	}
	if !ok {
		return ErrPartnerNotFound
	}
	return nil
}

// Commissions checks access and the filter's partner, then answers the
// reader of the rows: limit rows after the cursor (0: all of them).
func (s *Service) Commissions(ctx context.Context, userID, programID int64, f Filter, after *Cursor, limit int) (func(context.Context, func(Commission) error) error, error) {
	if err := s.authorize(ctx, userID, programID, false); err != nil {
		return nil, err
	}
	if f.PartnerID != 0 {
		if err := s.partner(ctx, programID, f.PartnerID); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context, each func(Commission) error) error {
		return s.store.Commissions(ctx, programID, f, after, limit, each)
	}, nil
}

// Money checks access and answers a page of the partners' money in the
// program after the cursor, at most limit rows.
func (s *Service) Money(ctx context.Context, userID, programID int64, after MoneyCursor, limit int) ([]PartnerMoney, error) {
	if err := s.authorize(ctx, userID, programID, false); err != nil {
		return nil, err
	}
	out := []PartnerMoney{}
	err := s.store.Money(ctx, programID, after, limit, func(m PartnerMoney) error {
		m.Balance = m.Earned - m.Paid
		m.Available = ledger.ProgramAvailable(ledger.ProgramFunds{Earned: m.Earned, Paid: m.Paid, Open: m.Open})
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Payouts checks access and answers the reader of the program's payouts.
func (s *Service) Payouts(ctx context.Context, userID, programID int64) (func(ctx context.Context, afterID int64, limit int, each func(ledger.Withdrawal) error) error, error) {
	if err := s.authorize(ctx, userID, programID, false); err != nil {
		return nil, err
	}
	return func(ctx context.Context, afterID int64, limit int, each func(ledger.Withdrawal) error) error {
		return s.store.Payouts(ctx, programID, afterID, limit, each)
	}, nil
}

// OpenPayout opens a payout of a partner of the program (amount 0: all
// that is available), with the admin withdrawal's rules and messages.
func (s *Service) OpenPayout(ctx context.Context, userID, programID, partnerID int64, currency string, amount int64) (ledger.Withdrawal, error) {
	if err := s.authorize(ctx, userID, programID, true); err != nil {
		return ledger.Withdrawal{}, err
	}
	if err := s.partner(ctx, programID, partnerID); err != nil {
		return ledger.Withdrawal{}, err
	}
	return s.ledger.OpenProgramWithdrawal(ctx, programID, partnerID, currency, amount)
}

// PayPayout marks a payout of the program paid, keeping reference.
func (s *Service) PayPayout(ctx context.Context, userID, programID, id int64, reference string) (ledger.Withdrawal, error) {
	if err := s.authorize(ctx, userID, programID, true); err != nil {
		return ledger.Withdrawal{}, err
	}
	return payoutResult(s.ledger.PayProgramWithdrawal(ctx, programID, id, reference))
}

// CancelPayout cancels a payout of the program.
func (s *Service) CancelPayout(ctx context.Context, userID, programID, id int64) (ledger.Withdrawal, error) {
	if err := s.authorize(ctx, userID, programID, true); err != nil {
		return ledger.Withdrawal{}, err
	}
	return payoutResult(s.ledger.CancelProgramWithdrawal(ctx, programID, id))
}

// payoutResult words the ledger's withdrawal refusals as payouts.
func payoutResult(w ledger.Withdrawal, err error) (ledger.Withdrawal, error) {
	switch {
	case errors.Is(err, ledger.ErrWithdrawalNotFound):
		return w, ErrPayoutNotFound
	case errors.Is(err, ledger.ErrWithdrawalNotOpen):
		return w, ErrPayoutNotOpen
	}
	return w, err
}
